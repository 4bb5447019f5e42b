// A configurable family of scalar attention kernels for the test suites, each a real ABI attncheck_kernel
// (forward and backward) so it can be called through attncheck::call_forward / call_backward or exported as a
// plugin.
//
// A Variant either computes attention CORRECTLY — the choices below change only the order and precision of the
// rounding, never the mathematics — or carries exactly one classic attention-kernel Bug.
//
// Semantics (spec/include/attncheck/problem.h, kernel_abi.h), per batch b, query head h, query row i:
//   s_ij  = scale · q_i·k_j                       over the keys j visible to i (bottom-right causal or all)
//   O_i   = Σ_j softmax_j(s_i·) v_j,   LSE_i = log Σ_j exp(s_ij)      (kv head of h: h / (Hq/Hkv))
//   a row that sees no key: O_i = 0, LSE_i = −∞, zero gradients
// backward, with P_ij = exp(s_ij − LSE_i) recomputed from the LSE it is given:
//   dP_ij = dO_i·v_j,   D_i = Σ_c dO_ic O_ic,   dS_ij = P_ij (dP_ij − D_i)
//   dQ_i = scale Σ_j dS_ij k_j,   dK_j = scale Σ_i dS_ij q_i,   dV_j = Σ_i P_ij dO_i
//   (dK, dV of a kv head sum over the query heads that read it).
// Storage may be float32, float16 or bfloat16 (any strides, NULL strides meaning compact); results are rounded to
// the storage dtype on store; LSE is written in the lse tensor's dtype (float32 or the storage dtype), and lse may
// be NULL in forward and in backward (which then recomputes it).
//
// Example:
//   using namespace attncheck::support;
//   Variant v;  v.key_block = 16;  v.exp2_fold = true;                 // FlashAttention-like tiling
//   const attncheck_kernel &k = variant_kernel(v);                      // lives until the program ends
//   attncheck::call_forward(k, problem, out, &lse);
//   const attncheck_kernel &bad = variant_kernel(bug_variant(Bug::no_rescale));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/contract.h"
#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"

namespace attncheck::support {

/// One classic attention-kernel bug. Exactly what each does (forward / backward):
enum class Bug : std::uint8_t {
  none,
  missing_scale,            ///< both: scale taken as 1 (params.scale ignored). Visible when scale ≠ 1.
  scale_1_over_d,           ///< both: scale taken as 1/D (not params.scale). Visible when scale ≠ 1/D.
  scale_1_over_sqrt_dv,     ///< both: scale taken as 1/√Dv. Visible when scale ≠ 1/√Dv (default scale, D ≠ Dv).
  no_max_subtraction,       ///< forward: running max fixed at 0, p = exp(s) and LSE = log Σ p. Mathematically
                            ///< exact; visible only when exp(s) overflows (s ≳ 88.7 in float32 arithmetic: Inf/NaN).
  no_rescale,               ///< forward: when the running max grows, l is rescaled by exp(m_old − m_new) but the
                            ///< output accumulator is not. Visible when a later key block raises the row max.
  drop_last_partial_block,  ///< both: keys of the last block of a split that holds fewer than key_block keys are
                            ///< skipped (forward never reads them; backward gives them P = 0). Needs key_block ≥ 2.
  causal_off_by_one,        ///< both: causal row i sees keys j ≤ i + Lk − Lq + 1 — one future key too many.
  causal_top_left,          ///< both: causal row i sees keys j ≤ i (top-left aligned). Visible when Lq ≠ Lk.
  f16_dot_accumulation,     ///< both: q·k accumulated in float16 (each product and partial sum rounded to
                            ///< binary16) while everything else follows the variant. The error model's tight case.
  gqa_head_mod,             ///< both: query head h reads kv head h % Hkv instead of h / (Hq/Hkv).
  nan_fully_masked_rows,    ///< forward: a row that sees no key gets O = 0/0 = NaN (LSE stays −∞);
                            ///< backward: such a row gets dQ = NaN.
  dk_missing_scale,         ///< backward: dK = Σ_i dS_ij q_i without the factor scale.
  ds_without_d_term,        ///< backward: dS_ij = P_ij dP_ij (the − D_i term is dropped).
  output_not_zeroed,        ///< both: results are added to what out (forward) or dq, dk, dv (backward) already hold
                            ///< instead of overwriting them. LSE is written normally.
  read_past_last_key,       ///< both: the key loop runs to j = Lk inclusive; the extra key j = Lk is visible to the
                            ///< rows that see key Lk−1, and its k and v elements are read at one key stride past
                            ///< the last key when that address lies within the tensor's extent (the smallest
                            ///< storage range that holds all its elements: e.g. the next head's first key, or row
                            ///< padding) and as 0 otherwise — never outside the storage. Backward: it contributes to
                            ///< dQ (and to D with d_from_p); no dK, dV is stored for it.

  // Scale bugs (scale_bugs(), not in all_bugs()): invisible on short rows and small tensors.

  block_counter_8bit,       ///< both: the index of a key block (of key_block keys, counted from the start of its
                            ///< split) that ADDRESSES its keys is an 8-bit counter: key t of block b reads the k and
                            ///< v of key lo + (b mod 256)·key_block + t (lo the split's first key) — forward's
                            ///< q·k and P·V, backward's dP, dQ alike; visibility, P's key, and where dK, dV are
                            ///< stored use the true key. Visible when a split holds more than 256 blocks (canonical
                            ///< key_block 8: Lk > 2048) and the wrapped keys differ from the true ones. Needs
                            ///< key_block ≥ 1 (two-pass has one block per split).
  split_combine_over_two,   ///< forward: split-KV with splits = ⌈Lk / kSplitKeys⌉ (1024 keys; Variant::splits is
                            ///< ignored) of ⌈Lk/splits⌉ keys, each its own online softmax; the combine is right for 1
                            ///< or 2 splits, but with 3 or more M and Σ_s e^(LSE_s − M) cover only the first two
                            ///< non-empty splits (in combine order) while every split still adds e^(LSE_s − LSE)·O_s,
                            ///< LSE = M + log of that partial sum. Backward: the split-free recomputation from the
                            ///< (wrong) LSE it is given, or from forward's wrong LSE when given none. Visible when
                            ///< Lk > 2048 and a split past the second carries weight. Canonical key_block 16.
  decode_drops_tail_block,  ///< forward: in a decode call (Lq = 1) on a long row (Lk > kDecodeLongRow = 4096) the
                            ///< keys of each split's last block that holds fewer than key_block keys are skipped
                            ///< (never read; O and LSE without them). Backward correct (also when it recomputes
                            ///< the LSE). Needs key_block ≥ 2. Canonical key_block 64: visible for Lq = 1,
                            ///< Lk > 4096, Lk % 64 ≠ 0.
  offsets_int32,            ///< both: every element offset into q, k, v, out, lse, dout, dq, dk, dv (from the
                            ///< tensor's data pointer, strides included) is computed in int64 and truncated to a
                            ///< wrapping int32 (two's complement). Correct for every tensor whose offsets stay
                            ///< ≤ 2³¹ − 1; past that the wrapped offset addresses another element — or, like the
                            ///< real bug, memory outside the tensor's storage (a caller must map it). Canonical:
                            ///< the default configuration.

  // Softcap bugs (softcap_bugs(), not in all_bugs()): their kernels implement softcap and declare features=softcap.

  softcap_unscaled,         ///< both: the cap is applied to q·k before the scale: s = scale·c·tanh(q·k/c) (the
                            ///< scale folded in after the tanh). Visible with softcap when scale ≠ 1.
  softcap_no_chain,         ///< backward: dS without softcap's chain factor 1 − t² (forward correct). Visible
                            ///< with softcap where the logits are not ≪ c.

  // Reach bugs (reach_bugs(), not in all_bugs()): wrong only in the head ratios and batches of production models.

  gqa_group_past_8,         ///< both: with a GQA group of more than kGroupTile (8) query heads, query head h reads
                            ///< kv head (h / 8) mod Hkv instead of h / (Hq/Hkv) — a group tile of 8 heads assumed.
                            ///< Visible when Hq/Hkv > 8 and Hkv ≥ 2.
  kv_batch_wraps_2,         ///< both: k and v of batch entry b are read from batch entry b mod 2 (a one-bit kv batch
                            ///< index). Visible when B > 2.

  // Layout bugs (layout_bugs(), not in all_bugs()): wrong only for a tensor's own layout or a zero stride. A wrong
  // offset outside the tensor's extent reads 0 and stores nothing (never outside its storage).

  v_zero_stride_as_compact,  ///< both: a v with a zero stride (an expanded v) is addressed with compact row-major
                             ///< strides. Visible when v is expanded on a dimension longer than 1.
  lse_assumed_compact,       ///< both: the LSE is written (forward) and read (backward) at compact [B, Hq, Lq]
                             ///< offsets, whatever its strides. Visible when the LSE has a layout of its own.
  dout_assumed_compact,      ///< backward: dO is read at compact offsets, whatever its strides (a dO not made
                             ///< contiguous). Visible when dO is not compact.

  // Empty-sequence bugs (empty_bugs(), not in all_bugs()): wrong only when Lk = 0 or Lq = 0.

  empty_kv_unwritten,        ///< forward: with Lk = 0 the call returns at once ("nothing to attend"), O and LSE
                             ///< left as they were.
  empty_q_grads_unwritten,   ///< backward: with Lq = 0 the call returns at once, dK and dV left as they were.

  // History bugs (history_bugs(), not in all_bugs()): right on a first call, wrong after certain earlier calls.

  scale_cached_per_shape,    ///< both: the scale of the first call of each shape is used for every later call of
                             ///< that shape (a plan cache keyed by shape without the scale). Visible when a shape
                             ///< comes back with another scale.
  result_cached_by_address,  ///< forward: when q, k, v are the last call's tensors (addresses, offsets, shape), the
                             ///< last call's O and LSE are written again (result reuse keyed by pointer). Visible
                             ///< when the same buffers come back with new values.

  // Precision bugs (precision_bugs(), not in all_bugs()): within the bound on most inputs, past it on a narrow family.

  scale_12_bits,             ///< both: params.scale rounded to kScaleBits (12) significant bits (a scale kept in a
                             ///< narrow register): every logit off by the same relative error, up to 2⁻¹³ (D = 2:
                             ///< 2⁻¹⁵), which moves O by about that times the spread of its logits and v. Within a
                             ///< float16 kernel's bound on most inputs; past it on a few (a D whose 1/√D rounds far,
                             ///< logits spread widely while the softmax is not one-hot, v apart).
};

/// The group tile Bug::gqa_group_past_8 assumes.
inline constexpr std::int64_t kGroupTile = 8;

/// Keys per split of Bug::split_combine_over_two: splits = ⌈Lk / kSplitKeys⌉.
inline constexpr std::int64_t kSplitKeys = 1024;
/// Variant::splits_by_occupancy: the (B·Hq) rows a call must have to take one split, and the most splits it takes.
inline constexpr std::int64_t kOccupancy = 2, kMaxOccupancySplits = 2;
/// Bug::decode_drops_tail_block acts on decode calls with more keys than this.
inline constexpr std::int64_t kDecodeLongRow = 4096;

/// "none", "missing_scale", ... (the enumerator's name).
std::string_view bug_name(Bug b);
/// Every Bug except Bug::none and the scale bugs, in declaration order: each is caught by ordinary (short-row)
/// problems.
std::vector<Bug> all_bugs();
/// The bugs that show only on long rows or huge tensors; all_bugs() leaves them out: block_counter_8bit,
/// split_combine_over_two, decode_drops_tail_block, offsets_int32 (in declaration order).
std::vector<Bug> scale_bugs();
/// The softcap bugs: softcap_unscaled, softcap_no_chain. Their bug_variant implements softcap with the hardware's
/// approximate tanh (tanh.approx.f32), so that a check declaring tanh=approx still has something to catch.
std::vector<Bug> softcap_bugs();
/// The reach bugs: gqa_group_past_8, kv_batch_wraps_2 (each wrong only past the old draws: Hq/Hkv > 8, B > 2).
std::vector<Bug> reach_bugs();
/// The layout bugs: v_zero_stride_as_compact, lse_assumed_compact, dout_assumed_compact (each wrong only for a
/// tensor's own layout or broadcast, CaseSpec::layouts).
std::vector<Bug> layout_bugs();
/// The empty-sequence bugs: empty_kv_unwritten, empty_q_grads_unwritten (each wrong only with Lk = 0 or Lq = 0).
std::vector<Bug> empty_bugs();
/// The history bugs: scale_cached_per_shape, result_cached_by_address (each wrong only after an earlier call of the
/// same shape or on the same buffers).
std::vector<Bug> history_bugs();
/// Bug::scale_12_bits: the significant bits the scale keeps.
inline constexpr int kScaleBits = 12;
/// The precision bugs: scale_12_bits (within the bound on most inputs; past it only on a narrow family of them).
std::vector<Bug> precision_bugs();

/// A kernel configuration. Default: per-key online softmax in float32 arithmetic, keys in order, no split.
struct Variant {
  /// Arithmetic of every add, multiply, exp and log: f32 = float arithmetic; f16/bf16 = each result rounded to
  /// that dtype (attncheck::round_to), emulating low-precision accumulation.
  Dtype accumulate = Dtype::f32;
  /// Online-softmax tile: 1 = per-key, N = blocks of N keys (block max, then rescale by exp(m_old − m_new) and add
  /// the block's Σp and Σp·v), 0 = two-pass (the exact max of the split first, then one sum).
  int key_block = 1;
  /// Process the key blocks (and the splits when combining) last to first; keys inside a block stay in order.
  /// Backward: sums over keys run from the last key to the first.
  bool reverse_keys = false;
  /// Split-KV (FlashDecoding): keys cut into `splits` chunks of ⌈Lk/splits⌉ keys (the last may be empty), each its
  /// own online softmax giving O_s, LSE_s; combined over the non-empty ones as LSE = M + log Σ_s exp(LSE_s − M)
  /// (M = max_s LSE_s), O = Σ_s exp(LSE_s − LSE) O_s.
  int splits = 1;
  /// FlashAttention's exponent: p = exp2(u − m) with u = s'·c, c = scale·log₂e, on the raw scores s' = q·k and
  /// m = max u (the log₂-domain max; FlashAttention's max(s')·c for scale > 0), LSE = m·ln2 + log l — instead of
  /// p = exp(scale·s' − m).
  bool exp2_fold = false;
  /// Round P to the storage dtype before P·V (and P, dS before dV, dQ, dK in backward), as FlashAttention does for
  /// float16/bfloat16 storage. l = Σp keeps the unrounded p. A no-op for float32 storage.
  bool round_p = false;
  /// O = acc · (1/l) instead of acc / l (for each split's partial O_s too).
  bool reciprocal_norm = false;
  /// Backward: D_i = Σ_j P_ij dP_ij instead of Σ_c dO_ic O_ic (equal in exact arithmetic).
  bool d_from_p = false;

  // The options below are correct kernels under a contract other than the default one (contract_of gives it).

  /// Arithmetic of the logits: q·k (each product and partial sum) and the multiply by the scale (or by
  /// scale·log₂e with exp2_fold; that constant itself stays in `accumulate`) rounded to this dtype; the rest follows
  /// `accumulate`. f32 (the default) means the logits follow `accumulate`. Contract: accumulate-qk=<dtype>.
  Dtype accumulate_qk = Dtype::f32;
  /// With round_p: the row sum l = Σ of the rounded p (the same values that multiply V), forward and wherever
  /// backward recomputes it — as a ones column appended to V does. A no-op without round_p. Contract:
  /// rowsum=rounded-p.
  bool rowsum_rounded_p = false;
  /// Backward, GQA: dK, dV of a kv head = Σ over its G query heads of each head's part (scale·Σ_i dS q for dK,
  /// Σ_i P dO for dV) rounded to the storage dtype, summed in float32, then stored — as FlashAttention-2 and
  /// PyTorch SDPA do. Contract: grad-sum=per-head (allowed by default for float16/bfloat16).
  bool grad_per_head = false;
  /// Forward writes LSE rounded to the storage dtype (and backward, given no LSE, recomputes that rounded value).
  /// Contract: lse=storage. Independently of this option every variant accepts an lse tensor of float32 or of the
  /// storage dtype, writes LSE in the dtype that tensor has, reads either in backward, and takes lse == NULL in
  /// both (backward then recomputes the LSE from q and k, as a kernel declaring lse=none does).
  bool lse_storage = false;
  /// Causal rows see keys j ≤ i (top-left aligned), the same visibility as Bug::causal_top_left but declared.
  /// Contract: causal=top-left (attncheck then passes Mask::causal_top_left problems as ATTNCHECK_MASK_CAUSAL).
  bool causal_top_left = false;
  /// P·V and backward's products run densely over every key of each block, masked keys included with P = 0
  /// (0·v, 0·dO, dS = 0·(dP − D), 0·k): finite hidden k, v never change visible rows, but NaN/Inf there leaks
  /// (0·NaN = NaN) — like tensor-core GEMM kernels. Fully masked blocks are not skipped. A row that sees no key still
  /// gives O = 0, LSE = −∞. Contract: hidden-keys=finite (the default).
  bool dense_pv = false;
  /// A row that sees no key behaves as if it saw every key: O = softmax over all keys · v, LSE = log-sum-exp over
  /// all keys (finite), gradients to match — what an additive large finite negative mask gives (with equal logits,
  /// the mean of v). Contract: empty-rows=unspecified.
  bool empty_rows_mean = false;
  /// Backward: the order of dQ's sum over keys changes from call to call (a global atomic call counter picks the
  /// rotation and direction), so dQ differs in the last bits between calls while staying within the error bound —
  /// like FlashAttention-2's atomic dQ accumulation. Thread-safe. Contract: backward-determinism=within-bound
  /// (the default).
  bool nondeterministic_backward = false;
  /// Split-KV with the split count chosen by occupancy, as FlashDecoding's heuristic does: ⌈kOccupancy / (B·Hq)⌉
  /// splits, at most kMaxOccupancySplits, replacing `splits` — so a row's bits depend on the batch it is in and on
  /// how many heads share the call, while every result stays within the bound. Contract: batch-invariant=no (the
  /// default).
  bool splits_by_occupancy = false;

  // Softcap and the transcendental functions (contract: features=softcap, tanh=…, exp=…).

  /// Implement ATTNCHECK_FEATURE_SOFTCAP as FlashAttention-2 does: s = c·tanh(x/c) on x = scale·q·k (then × log₂e
  /// with exp2_fold), and backward's dS multiplied by the chain factor 1 − t² before it is rounded. Without it (and
  /// for every other feature) a call with features set is declined. Contract: features=softcap.
  bool softcap = false;
  /// Softcap's tanh: accurate (float tanh), or an emulation of the hardware approximation the contract names
  /// (tanh=approx, approx-f16, approx-bf16) at its worst: approx chops float tanh toward zero to 12 significant bits
  /// (relative error < 2⁻¹¹, every logit shrunk); approx_f16/bf16 round the argument to that dtype and chop the
  /// result toward zero to its grid (absolute error < 2⁻¹¹, 2⁻⁸).
  Tanh tanh = Tanh::accurate;
  /// Every exp (p, the rescale factors, split-KV's weights, backward's P): accurate, or an emulation of
  /// ex2.approx.f16 / ex2.approx.ftz.bf16 (exp=approx-f16, approx-bf16): 2^a of the log₂-domain argument rounded
  /// to that dtype, chopped toward zero to its significand (relative error < 2⁻¹⁰, 2⁻⁷) and flushed to 0 below its
  /// smallest normal. Exp::approx (ex2.approx.f32) computes as accurate does.
  Exp exp = Exp::accurate;
  /// The operands of every matrix product — q and k of the logits, P (after round_p) and v of P·V; backward's dO and
  /// v of dP, dS and q of dK, P and dO of dV, dS and k of dQ — rounded to this format first, products accumulated in
  /// `accumulate` (contract: fp32-precision=…): tf32 chopped to 11 significant bits (tensor cores reading a float32
  /// register's top bits), bf16 and f16 rounded to nearest even (oneDNN's fpmath_mode, cvt.rn). D_i = Σ dO·O and the
  /// row sum are not products of matrices and keep float32.
  Fp32Precision fp32_precision = Fp32Precision::ieee;

  Bug bug = Bug::none;

  /// Unique description: e.g. "online_b7_rev_exp2_f32acc", "twopass_split5_roundp_f16acc"; the contract options
  /// append "_qkf16acc", "_rowsumP", "_gradPerHead", "_lseS", "_topleft", "_densePV", "_emptyMean", "_nondetBwd",
  /// "_softcap", "_tanh" + the approximation ("_tanhApprox", "_tanhApproxF16", …), "_exp" + it and "_fp32" + the
  /// operand format ("_fp32tf32").
  /// A bug variant is "bug:<bug_name>" when its configuration is bug_variant(bug)'s, else
  /// "bug:<bug_name>/<configuration>".
  std::string name() const;
  friend bool operator==(const Variant &, const Variant &) = default;
};

/// The canonical variant carrying `b`: the default configuration, except key_block 16 for drop_last_partial_block
/// (a bug that needs a block of more than one key) and split_combine_over_two, key_block 8 for block_counter_8bit
/// (wrong once Lk > 256·8 = 2048) and key_block 64 for decode_drops_tail_block.
Variant bug_variant(Bug b);

/// The ABI kernel of `v` (name = v.name(); forward and backward). Equal variants give the same kernel; the
/// reference stays valid until the program ends. Thread-safe. Throws std::invalid_argument for key_block < 0 or
/// splits < 1, std::length_error once kMaxVariantKernels distinct variants exist.
const attncheck_kernel &variant_kernel(const Variant &v);
/// How many distinct variants variant_kernel can serve (each one occupies a static trampoline slot).
inline constexpr std::size_t kMaxVariantKernels = 256;

/// A spread of correct variants over summation orders and precisions: key_block 1, 3, 7, 16, 64 and two-pass;
/// reversed; split-KV 2 and 5; exp2 folding; reciprocal normalization; D from P; float16 and bfloat16
/// accumulation; round_p (which matters for float16/bfloat16 storage); and FlashAttention/FlashDecoding-like mixes.
/// Each is correct under the default contract with its accumulation dtype (contract_of(v): accumulate=<accumulate>).
std::vector<Variant> correct_variants();

/// One variant per contract option (accumulate_qk = f16, rowsum_rounded_p, grad_per_head, lse_storage,
/// causal_top_left, dense_pv, empty_rows_mean, nondeterministic_backward), in that order, each on a
/// FlashAttention-like base (key_block 16, exp2_fold, round_p). Each is correct under contract_of(v).
std::vector<Variant> contract_variants();

/// Correct float32 kernels whose matrix products read narrower operands (fp32_precision): TF32 (PyTorch's
/// allow_tf32 on NVIDIA GPUs, chopped), bfloat16 (a float32 model run in bfloat16 on CPUs that have it, oneDNN's
/// fpmath_mode=bf16) and float16 (inputs cast to half for tensor cores), each on the FlashAttention-like base. Each is
/// correct under contract_of(v) (fp32-precision=…), and fails a float32 run under the defaults.
std::vector<Variant> fp32_precision_variants();

/// Correct variants that use a hardware approximation, each on the FlashAttention-like base with softcap: tanh
/// approx, approx_f16 and approx_bf16; exp approx_f16 and approx_bf16 (with an accurate tanh); exp approx (the
/// float32 instruction, computed as accurate). Each is correct under contract_of(v), and only under a contract that
/// declares its approximation (but exp approx, which the defaults cover).
std::vector<Variant> approximation_variants();

/// The contract under which `v` is a correct kernel: the defaults, changed only where v needs it —
/// accumulate-qk/-pv from accumulate and accumulate_qk, rowsum=rounded-p, grad-sum=per-head, lse=storage,
/// causal=top-left, empty-rows=unspecified, features=softcap, tanh=…, exp=… (dense_pv needs hidden-keys=finite and nondeterministic_backward
/// backward-determinism=within-bound: both defaults). For a bug variant: the contract of its configuration.
KernelContract contract_of(const Variant &v);

}  // namespace attncheck::support
