// An attention problem as the contract (spec/SPEC.md) defines it: shapes, mask, scale, dtype and its tensors.
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/features.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/tensor.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace attncheck {

/// The masks of SPEC.md §2.2. A kernel receives both causal alignments as ATTNCHECK_MASK_CAUSAL: which one it
/// computes is part of its contract (contract.h, `causal=`), and attncheck's reference follows the declared one.
enum class Mask : std::int32_t {
  none = ATTNCHECK_MASK_NONE,
  causal = ATTNCHECK_MASK_CAUSAL,  ///< bottom-right aligned: query i sees key j iff j ≤ i + Lk − Lq
  causal_top_left = 2,             ///< top-left aligned: query i sees key j iff j ≤ i (not an ABI value)
};
/// "none", "causal", "causal_top_left".
std::string_view mask_name(Mask m);
inline bool is_causal(Mask m) { return m != Mask::none; }

/// q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv], out [B,Hq,Lq,Dv], lse [B,Hq,Lq].
struct Shape {
  std::int64_t B = 1, Hq = 1, Hkv = 1, Lq = 1, Lk = 1, D = 1, Dv = 1;
  /// Query heads per kv head, Hq / Hkv.
  std::int64_t group() const { return Hq / Hkv; }
  /// The kv head query head h reads: h / (Hq / Hkv).
  std::int64_t kv_head(std::int64_t h) const { return h / group(); }
  /// B·Hq·Lq·Lk·(D + Dv): multiply-adds of a forward (q·k and P·V), what a kernel's (and the reference's) time grows
  /// with.
  std::int64_t work() const { return B * Hq * Lq * Lk * (D + Dv); }
  /// Throws std::invalid_argument naming the first violated rule (B, Hq, Hkv, D, Dv ≥ 1; Lq, Lk ≥ 0: an empty
  /// query or KV sequence is a valid call, SPEC.md §2.3; Hq a multiple of Hkv).
  void validate() const;
  std::string describe() const;  ///< "B=1 Hq=4 Hkv=2 Lq=17 Lk=64 D=64 Dv=32"
  friend bool operator==(const Shape &, const Shape &) = default;
};

/// scale = 1/√D, the contract's default (D of q and k, never Dv).
inline double default_scale(std::int64_t D) { return 1.0 / std::sqrt(static_cast<double>(D)); }

/// The last key query i may see: Lk − 1 without a mask; i + Lk − Lq bottom-right causal; i top-left causal.
inline std::int64_t last_visible(Mask m, std::int64_t i, std::int64_t Lq, std::int64_t Lk) {
  switch (m) {
    case Mask::causal: return i + Lk - Lq;
    case Mask::causal_top_left: return i;
    default: return Lk - 1;
  }
}
/// Causal visibility: query i sees key j iff j ≤ last_visible(i); everything without a mask.
inline bool visible(Mask m, std::int64_t i, std::int64_t j, std::int64_t Lq, std::int64_t Lk) {
  return j <= last_visible(m, i, Lq, Lk);
}
/// Number of keys query i sees: clamp(last_visible(i) + 1, 0, Lk).
inline std::int64_t visible_count(Mask m, std::int64_t i, std::int64_t Lq, std::int64_t Lk) {
  const std::int64_t n = last_visible(m, i, Lq, Lk) + 1;
  return n < 0 ? 0 : (n > Lk ? Lk : n);
}

struct Params {
  double scale = 1.0;
  Mask mask = Mask::none;
  attncheck_params to_abi() const {
    // Both alignments reach the kernel as ATTNCHECK_MASK_CAUSAL; other values pass through (tests send bad ones).
    return attncheck_params{scale, mask == Mask::causal_top_left ? ATTNCHECK_MASK_CAUSAL : static_cast<std::int32_t>(mask),
                            0, nullptr};
  }
};

/// The inputs of one problem; dout is present for backward problems. With features (SPEC.md §2.7) the tensors are
/// still the logical [B, H, L, D] ones, L the longest sequence (features.h); the call (kernel_call.h) gives the kernel
/// the layout `features.storage` names.
struct Problem {
  Shape shape;
  Params params;
  Tensor q, k, v;
  std::optional<Tensor> dout;
  Features features;
  /// The layouts the gate allocates the outputs in, which the backward then reads back: O (and dQ, dK, dV follow
  /// q, k, v) in out_layout, else q's; the LSE in lse_layout (Tensor::rows_with_layout), else compact.
  std::optional<Layout> out_layout, lse_layout;
  Dtype dtype() const { return q.dtype(); }
};

/// Shape read off q, k, v (and dout when given); throws std::invalid_argument with a message that names the
/// tensors and dimensions that disagree (rank, D of q vs k, Lk of k vs v, B, Hq not a multiple of Hkv, dtypes).
Shape shape_of(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *dout = nullptr);
/// Same check on DLTensors as a kernel receives them; returns false and fills *why instead of throwing.
bool shape_of(const DLTensor &q, const DLTensor &k, const DLTensor &v, Shape *out, std::string *why);

/// Row-major offsets into contiguous result arrays.
inline std::int64_t out_offset(const Shape &s, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
  return ((b * s.Hq + h) * s.Lq + i) * s.Dv + c;
}
inline std::int64_t lse_offset(const Shape &s, std::int64_t b, std::int64_t h, std::int64_t i) {
  return (b * s.Hq + h) * s.Lq + i;
}

}  // namespace attncheck
