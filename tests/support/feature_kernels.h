// A family of scalar attention kernels that implement the ABI 1.2 features (kernel_abi.h: sliding window, softcap,
// ALiBi, sinks, a mask tensor, packed varlen batches, a paged KV cache, dropout) — one correct kernel and one kernel
// per planted FeatureBug — each a real ABI attncheck_kernel (forward and backward) for the test suites and the bug
// plugin.
//
// Semantics (kernel_abi.h, features.h), per sequence b (batch entry, or packed sequence under VARLEN), query head h
// (kv head h / (Hq/Hkv)), row i < Lq_b; Lq_b, Lk_b the sequence's rows and keys, i' = i + Lk_b − Lq_b:
//   row i sees key j iff  j < Lk_b,  [causal] j ≤ i',  [window] i' − left ≤ j ≤ i' + right (−1: unbounded),
//                         [mask] mask[b, h, i, j] ≠ 0 (uint8) / ≠ −∞ (float32; size-1 dims broadcast)
//   s_ij  = (softcap ? c·tanh(scale·q_i·k_j / c) : scale·q_i·k_j) − slope_h·|i' − j| + additive mask
//   m_i   = max(max_j s_ij, sink_h),  l_i = Σ_j e^(s_ij − m_i) + [sinks] e^(sink_h − m_i)
//   O_i   = Σ_j e^(s_ij − m_i) z_ij v_j / l_i,   LSE_i = m_i + log l_i
//   z_ij  = 1 without dropout; else 1/(1 − p) when keep(seed, b, h, i, j) (probability 1 − p), 0 otherwise
//   a row that sees no key: O_i = 0, LSE_i = sink_h with a sink, −∞ without; zero dQ
// backward (every layout but paged, which the ABI gives no gradient), P_ij = e^(s_ij − LSE_i) from the given LSE
// (recomputed when lse is NULL):
//   dP_ij = z_ij dO_i·v_j,  D_i = dO_i·O_i,  dS_ij = P_ij (dP_ij − D_i) · [softcap] (1 − (s_cap_ij / c)²)
//   dQ_i = scale Σ_j dS_ij k_j,  dK_j = scale Σ_{h,i} dS_ij q_i,  dV_j = Σ_{h,i} P_ij z_ij dO_i
// Float32 arithmetic in plain loops (clarity over speed); float32, float16 or bfloat16 storage with any strides
// (NULL strides = compact), results rounded to storage; lse float32 or the storage dtype, and NULL in both passes.
// Forward writes the dropout mask it applied (every element of the mask tensor: keep(seed, b, h, i, j)); backward
// reproduces it from the seed. FP8: q, k, v as float8 bits (uint8, args->fp8_format) times their descale, out in
// whatever float dtype it is; forward only. An unknown feature bit is refused with ATTNCHECK_UNSUPPORTED.
//
// Example:
//   using namespace attncheck::support;
//   const attncheck_kernel &k = feature_kernel(FeatureBug::none);   // "features_correct", lives until program end
//   attncheck::call_forward(k, problem_with_features, out, &lse);   // kernel_call.h builds the varlen/paged layout
//   feature_contract(FeatureBug::none);  // "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout+fp8"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/kernel_abi.h"

namespace attncheck::support {

/// One planted feature bug, each documented in one line: what it does (forward / backward) and when it shows.
/// Every other feature, and every problem without the bug's feature, keeps the correct kernel's results bit for bit.
/// Details:
///  - window_right_off_by_one: nothing changes under causal (which caps the keys at i' anyway), nor where key
///    i' + right + 1 is past Lk_b − 1 or hidden by the mask tensor.
///  - softcap_after_mask: s = c·tanh((scale·q·k + additive mask)/c) − slope·|i' − j|, with the keys hidden by causal,
///    the window or the mask tensor (not keys past Lk_b) at −∞ inside the tanh: logit −c, chain factor 0 in backward.
///  - varlen_reads_across_boundary: key Lk_b is row cu_seqlens_k[b+1] of the packed k, v when that row exists, seen
///    under the same rules as any key at its position (the mask and dropout past their extent: visible, kept);
///    backward adds its term to dQ and stores no dK, dV for it. Causal hides it from every row.
///  - paged_logical_page: the page read is an unused (NaN) page or another entry's, or 0 when that page does not exist;
///    invisible where block_table[b, n] = n for every page n holding keys of b.
///  - dropout_mask_not_reproducible: backward reproduces the applied mask (seed + 1), not the returned one.
///  - window_batch_variant: B counts the sequences under varlen; the max is order-free, so only the roundings of l and
///    Σ P·V move (within any order-independent bound). SGLang's deterministic mode that lost its fixed split size on
///    the window path (sgl-project/sglang PR #26412). Backward keeps the correct kernel's, a NULL lse recomputed
///    in the correct order.
///  - mask_backward_tile_nan: the rows concerned are those that see no key without a sink (LSE −∞) and those whose
///    given LSE is below −1e4 (a huge negative additive mask); dK, dV keep the correct kernel's values. PyTorch's
///    cuDNN backward padding its last 128-key tile (pytorch/pytorch #196678).
///  - sink_twice_after_empty_split: a row's keys 0 … 63 all hidden (by the window's left edge or the mask tensor)
///    while it sees a later key; the extra term is added before the keys'. Backward keeps the correct kernel's (it
///    uses the given LSE, and recomputes a NULL one correctly). ROCm/rocm-libraries #12227.
enum class FeatureBug : std::uint8_t {
  none,
  /// both: with window_right ≥ 0 keys up to i' + right + 1 are seen; visible without causal, never with right = −1.
  window_right_off_by_one,
  /// both: s = c·tanh((scale·q·k + mask)/c): hidden keys get −c, not −∞; visible with softcap and a hidden key or mask.
  softcap_after_mask,
  /// both: query head h uses alibi_slopes[Hq − 1 − h]; visible with ALiBi whose slopes are not palindromic.
  alibi_reversed_slopes,
  /// both: sequence b also sees key Lk_b (the next sequence's first key) when it exists; visible without causal.
  varlen_reads_across_boundary,
  /// forward: key j of b is read from page j / page_size, not block_table[b, j / page_size]; visible where they differ.
  paged_logical_page,
  /// both: writes keep(seed) into dropout_mask but applies keep(seed + 1); visible with dropout_p > 0.
  dropout_mask_not_reproducible,
  /// forward, FP8: reads q, k, v as stored, every descale taken as 1; visible when a descale is not 1.
  fp8_without_descale,
  /// both: every query head draws head 0's decisions, keep(seed, b, 0, i, j), and writes what it applies; visible
  /// only to independence across heads (O and the gradients are right given the returned mask), with dropout_p > 0.
  dropout_shared_across_heads,
  /// both: every batch entry draws entry 0's decisions, keep(seed, 0, h, i, j) (a random offset not advanced per
  /// sequence), and writes what it applies; visible only to independence across batch entries, with B ≥ 2.
  dropout_shared_across_batch,
  /// both: every row draws row 0's decisions, keep(seed, b, h, 0, j) (one draw per row tile reused), and writes what
  /// it applies; visible only to independence across rows, with Lq ≥ 2.
  dropout_shared_across_rows,
  /// both: every key of a row draws key 0's decision, keep(seed, b, h, i, 0) (a whole row kept or dropped), and
  /// writes what it applies; visible only to independence across keys, with Lk ≥ 2.
  dropout_shared_across_keys,
  /// both: a boolean mask entry is visible only when it is 1 (the ABI: any nonzero byte); visible with a boolean
  /// mask holding other nonzero bytes.
  mask_byte_one,
  /// both: the argument tensors (alibi_slopes, sinks, attn_mask, cu_seqlens, block_table, seqused_k) are read at
  /// compact strides from their first element (a kernel that assumes them contiguous); visible when they are sent
  /// strided.
  args_assumed_compact,
  /// forward: with a window and B ≥ 2 every row sums its keys from j = Lk_b − 1 down to 0; visible only to batch
  /// invariance (a row's bits in a batch vs its entry alone), with a window, B ≥ 2 and a row of ≥ 3 visible keys.
  window_batch_variant,
  /// backward: with a mask tensor and Lk_b ≡ 64 (mod 128), a row whose given LSE is −∞ or below −1e4 gets a NaN dQ
  /// row; visible with a mask tensor, such an Lk_b and a row that sees no key without a sink.
  mask_backward_tile_nan,
  /// forward: with sinks, a row whose keys 0 … 63 are all hidden but that sees a later key counts the sink twice in
  /// l; visible with sinks, Lk_b > 64 and such a row.
  sink_twice_after_empty_split,
};

/// The features every kernel of the family declares and implements.
inline constexpr std::uint32_t kFeatureKernelFeatures =
    ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS |
    ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_DROPOUT |
    ATTNCHECK_FEATURE_FP8;

/// "none", "window_right_off_by_one", ... (the enumerator's name).
std::string_view feature_bug_name(FeatureBug bug);
/// Every FeatureBug but none, in declaration order.
std::vector<FeatureBug> all_feature_bugs();

/// The kernel carrying `bug` (named "features_correct" for none, else "features_<bug name>"); forward and backward.
/// The reference stays valid until the program ends. Thread-safe.
const attncheck_kernel &feature_kernel(FeatureBug bug);
/// The contract every kernel of the family declares: "features=window+softcap+alibi+sinks+mask+varlen+paged+dropout"
/// (the defaults otherwise: bottom-right causal, LSE in float32, …).
std::string feature_contract(FeatureBug bug);

/// The correct kernels' dropout decision: element (b, h, i, j) (sequence, query head, row and key within the
/// sequence) is kept iff a splitmix64 hash of (seed, b, h, i, j), as a uniform u ∈ [0, 1) of 24 bits, is ≥ p
/// (float32).
bool feature_dropout_keep(std::uint64_t seed, float p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j);

}  // namespace attncheck::support
