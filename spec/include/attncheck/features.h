// The features of SPEC.md §2.7 (ABI 1.2) as the reference, the error model and the checks see them: logical, per
// batch entry b — row i of b and key j of b, whatever the layout the kernel receives (a packed varlen batch, a paged
// cache; kernel_call.cpp builds that layout and maps the results back).
//
// Notation (SPEC.md §2.7): sequence b has Lq_b rows and Lk_b keys (Lq, Lk when not varlen/paged); row i is aligned
// to key i' = i + Lk_b − Lq_b (bottom-right) or i' = i (top-left causal). Row i of head h sees key j iff
//   i < Lq_b, j < Lk_b, [causal] j ≤ i', [window] i' − left ≤ j ≤ i' + right, [mask] mask_bhij ≠ 0 / ≠ −∞;
// its logit is
//   s_ij = softcap·tanh(scale·q_i·k_j / softcap) [softcap]  − slope_h·|i' − j| [alibi]  + mask_bhij [additive],
// and a sink adds e^{sink_h} to the row's denominator. Under FP8, q, k, v stand for descale_q·q, descale_k·k,
// descale_v·v (the logical tensors hold the stored values; descaled_q/k/v give the factors, 1 otherwise).
//
// Example:
//   attncheck::Features f;
//   f.window_left = 3;                    // each row sees itself and the 3 keys before it
//   f.softcap = 30;
//   f.bits();                             // ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP
#pragma once

#include "attncheck/kernel_abi.h"
#include "attncheck/tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

enum class Mask : std::int32_t;

/// The mask tensor's kind (ATTNCHECK_FEATURE_MASK).
enum class MaskKind : std::uint8_t {
  none,
  boolean,   ///< nonzero = visible
  additive,  ///< float32 added to the logits; −∞ hides
};

/// How the kernel receives k and v (and q): the dense [B, H, L, D] tensors, a packed varlen batch, or a paged cache.
enum class KvStorage : std::uint8_t { dense, varlen, paged };

struct Features {
  std::int64_t window_left = -1, window_right = -1;  ///< −1: unbounded; both −1 = no window
  double softcap = 0;                                ///< 0: off
  std::vector<double> alibi_slopes;                  ///< [Hq] (float32 values), empty: off
  std::vector<double> sinks;                         ///< [Hq] (float32 values), empty: off
  MaskKind mask_kind = MaskKind::none;
  std::int64_t mask_B = 1, mask_H = 1;   ///< the mask tensor's leading dims: 1 (broadcast) or B, Hq
  std::vector<double> mask;              ///< [mask_B, mask_H, Lq, Lk] row-major: 0/1, or float32 values (−∞ allowed)
  KvStorage storage = KvStorage::dense;
  /// Per-sequence lengths (varlen: rows and keys; paged: keys, seqused_k); empty: Lq and Lk for every b.
  std::vector<std::int64_t> seqlens_q, seqlens_k;
  /// varlen, paged: the memory order of the packed q, k, v (and outputs) or of the pages ([total, H, D] is blhd).
  Layout packed_layout = Layout::blhd;
  std::int64_t page_size = 0;            ///< paged: keys per page
  /// paged: the physical page of logical page n of batch entry b, block_table[b·pages_per_seq + n]; pages not listed
  /// are unused (the kernel gets them NaN-filled).
  std::vector<std::int32_t> block_table;
  std::int64_t pages_per_seq = 0, num_pages = 0;
  /// Rows align top-left (i' = i) for a kernel declaring causal=top-left, whether or not the problem is causal.
  bool top_left = false;
  double dropout_p = 0;                  ///< 0: off
  std::uint64_t dropout_seed = 0;
  /// The dropout mask the kernel applied, [B, Hq, Lq, Lk] (1 kept): the reference computes with it. Empty before the
  /// kernel's forward returned it.
  std::vector<std::uint8_t> dropout_keep;
  /// FP8 (ATTNCHECK_FEATURE_FP8): q, k, v reach the kernel as float8 bits of this format, their values exactly
  /// representable in it (the logical tensors hold them); the problem's values are descale · stored.
  std::optional<Fp8> fp8;
  double descale_q = 1, descale_k = 1, descale_v = 1;  ///< float32 values
  /// The argument tensors (alibi_slopes, sinks, attn_mask, cu_seqlens_q/k, block_table, seqused_k; not the
  /// dropout mask, which forward writes) are sent with element strides args_spread times the compact ones and
  /// args_offset elements past the start of their storage; every element between and before is poison (NaN, a byte
  /// 0x5a that a boolean mask reads as visible, an int32 of −2³¹), so a kernel that ignores their strides or byte
  /// offset reads it. 1 and 0: compact.
  std::int64_t args_spread = 1, args_offset = 0;

  bool window() const { return window_left >= 0 || window_right >= 0; }
  /// The ATTNCHECK_FEATURE_* bits in use.
  std::uint32_t bits() const;
  bool any() const { return bits() != 0; }
  /// "window=3,-1 softcap=30 alibi …" — "" when none is in use.
  std::string describe() const;
  friend bool operator==(const Features &, const Features &) = default;
};

/// "window", "softcap", "alibi", "sinks", "mask", "varlen", "paged", "dropout", "fp8" (one bit).
std::string_view feature_name(std::uint32_t bit);
/// Every feature bit, in the order above.
inline constexpr std::uint32_t kAllFeatures[] = {
    ATTNCHECK_FEATURE_WINDOW, ATTNCHECK_FEATURE_SOFTCAP, ATTNCHECK_FEATURE_ALIBI,
    ATTNCHECK_FEATURE_SINKS,  ATTNCHECK_FEATURE_MASK,    ATTNCHECK_FEATURE_VARLEN,
    ATTNCHECK_FEATURE_PAGED,  ATTNCHECK_FEATURE_DROPOUT, ATTNCHECK_FEATURE_FP8};
/// "window+softcap" (kAllFeatures order), "none" for 0: the value of the contract key `features`.
std::string feature_list(std::uint32_t bits);
/// Inverse of feature_list (',' separates too); throws std::invalid_argument naming an unknown feature.
std::uint32_t parse_feature_list(std::string_view text);

/// The logical geometry of one row: what SPEC.md §2.7 needs to decide visibility and biases.
struct RowFrame {
  std::int64_t Lq_b = 0, Lk_b = 0;  ///< the sequence's rows and keys
  std::int64_t aligned = 0;         ///< i' (bottom-right or top-left)
  bool exists = false;              ///< i < Lq_b
};

/// Sequence b's rows and keys (Lq, Lk unless seqlens are given).
std::int64_t seq_rows(const Features &f, std::int64_t b, std::int64_t Lq);
std::int64_t seq_keys(const Features &f, std::int64_t b, std::int64_t Lk);

/// The frame of row i of batch entry b: aligned top-left under Mask::causal_top_left or f.top_left, else
/// bottom-right.
RowFrame row_frame(const Features &f, Mask m, std::int64_t b, std::int64_t i, std::int64_t Lq, std::int64_t Lk);
/// The keys lo … hi (inclusive; empty when lo > hi) that the row of frame `fr` may see by its sequence's length, the
/// causal mask and the window — the mask tensor may hide some of them still (sees).
struct KeyRange {
  std::int64_t lo = 0, hi = -1;
  bool empty() const { return lo > hi; }
};
KeyRange key_range(const Features &f, Mask m, const RowFrame &fr);
/// The keys any of rows i0 … i1 − 1 of batch entry b may see: the union of their key_range()s, within [0, Lk − 1]
/// (empty when none sees a key). A tile of rows needs only these keys' products.
KeyRange rows_key_range(const Features &f, Mask m, std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t Lq,
                        std::int64_t Lk);
/// Whether row (b, h, i) sees key j (causal, window, lengths, the mask tensor), with `fr` = row_frame(…).
bool sees(const Features &f, Mask m, const RowFrame &fr, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
          std::int64_t h, std::int64_t i, std::int64_t j);
/// The mask tensor's value for (b, h, i, j) (broadcast over size-1 dims); 1 when there is no mask.
double mask_value(const Features &f, std::int64_t Lq, std::int64_t Lk, std::int64_t b, std::int64_t h,
                  std::int64_t i, std::int64_t j);
/// ALiBi's term −slope_h·|i' − j| (0 without ALiBi): exact in double (a float32 slope times an integer < 2²⁴).
double alibi_bias(const Features &f, const RowFrame &fr, std::int64_t h, std::int64_t j);
/// The exact additive terms of a visible logit after softcap: −slope_h·|i' − j| (ALiBi) + the additive mask. Exact in
/// double for the generated values (slopes are float32, distances < 2²⁴, mask values float32; SPEC.md §2.7).
double logit_bias(const Features &f, const RowFrame &fr, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
                  std::int64_t h, std::int64_t i, std::int64_t j);
/// The factors the values of q, k, v stand for: the FP8 descales, or 1.
inline double descaled_q(const Features &f) { return f.fp8 ? f.descale_q : 1; }
inline double descaled_k(const Features &f) { return f.fp8 ? f.descale_k : 1; }
inline double descaled_v(const Features &f) { return f.fp8 ? f.descale_v : 1; }
/// The index of decision (b, h, i, j) in a dropout mask [B, Hq, Lq, Lk] (row-major).
inline std::size_t dropout_index(std::int64_t Hq, std::int64_t Lq, std::int64_t Lk, std::int64_t b, std::int64_t h,
                                 std::int64_t i, std::int64_t j) {
  return static_cast<std::size_t>(((b * Hq + h) * Lq + i) * Lk + j);
}
/// Dropout's factor for (b, h, i, j): 0 (dropped), 1/(1 − p) (kept), or 1 without dropout.
double dropout_factor(const Features &f, std::int64_t Hq, std::int64_t Lq, std::int64_t Lk, std::int64_t b,
                      std::int64_t h, std::int64_t i, std::int64_t j);

}  // namespace attncheck
