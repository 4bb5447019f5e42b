// Shared internals of the bundled kernels: error reporting, thread count, operand validation and strided views.
// Nothing here is exported from libattncheck_builtin.so (the library is built with hidden visibility).
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/problem.h"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace attncheck::builtin {

/// Records `msg` as the calling thread's last error and returns `status` (for `return fail(...)`).
int fail(int status, std::string msg);
/// The calling thread's last error message ("" when none); valid until the thread's next failing call.
const char *last_error();

/// Threads a parallel kernel uses now: attncheck_builtin_set_threads's value when ≥ 1, else ATTNCHECK_THREADS
/// when it is a positive integer, else omp_get_max_threads().
int thread_count();
/// attncheck_builtin_set_threads's value when ≥ 1 (threads asked for, on every call), else 0 (the kernel may use
/// fewer than thread_count() on a small call).
int requested_threads();
/// Sets the count thread_count() returns; n ≤ 0 restores the default.
void set_threads(int n);
/// Largest ATTNCHECK_THREADS value taken (a sanity bound; larger values are ignored).
inline constexpr int kMaxThreads = 4096;

/// A rank-4 tensor [n0, n1, n2, n3] as a kernel receives it: base pointer (data + byte_offset), dtype and strides
/// in elements (compact row-major when the DLTensor's strides are NULL, as DLPack allows).
struct View {
  std::byte *data = nullptr;
  Dtype dtype = Dtype::f32;
  std::int64_t n[4] = {0, 0, 0, 0};
  std::int64_t s[4] = {0, 0, 0, 0};

  /// Element offset of [i0, i1, i2, i3].
  std::int64_t offset(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3];
  }
  int fp8 = -1;       ///< FP8 (Fp8 value): the elements are float8 bits standing for factor · value; −1: dtype
  float factor = 1;  ///< FP8: the tensor's descale
  /// Element [i0, i1, i2, i3] widened exactly to float (FP8: times the descale, one rounding).
  float get(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const;
  /// Stores x rounded (to nearest even) to the dtype.
  void set(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, float x) const;
};

/// The float32 lse [B, Hq, Lq] (NULL data when the caller passed no lse).
struct LseView {
  float *data = nullptr;
  std::int64_t s[3] = {0, 0, 0};
  float &at(std::int64_t b, std::int64_t h, std::int64_t i) const { return data[b * s[0] + h * s[1] + i * s[2]]; }
};

/// The ABI 1.2 settings of a call (kernel_abi.h's attncheck_args) after validation; everything off when
/// params->features is 0. Sequence b is batch entry b, or packed sequence b under VARLEN.
struct CallFeatures {
  std::uint32_t bits = 0;  ///< ATTNCHECK_FEATURE_*
  bool has(std::uint32_t bit) const { return (bits & bit) != 0; }
  std::int64_t window_left = -1, window_right = -1;  ///< −1: unbounded (both −1 without WINDOW)
  float softcap = 0;                                  ///< 0 without SOFTCAP
  std::vector<float> alibi, sinks;                    ///< [Hq]; empty without ALIBI / SINKS
  /// MASK: element (b, h, i, j) at mask + (b·s0 + h·s1 + i·s2 + j·s3) elements, a broadcast dim's stride 0;
  /// uint8 (nonzero = visible) or float32 (added to the logit; −∞ hides).
  const std::byte *mask = nullptr;
  bool mask_boolean = false;
  std::int64_t mask_s[4] = {0, 0, 0, 0};
  std::int64_t nseq = 0;                  ///< sequences: B, or the packed ones under VARLEN
  std::vector<std::int64_t> cu_q, cu_k;  ///< VARLEN: [nseq + 1] first row and key of each sequence
  std::vector<std::int64_t> seqused;     ///< PAGED: keys of each batch entry
  std::vector<std::int64_t> block_table;  ///< PAGED: [nseq × pages_per_seq]
  std::int64_t pages_per_seq = 0, page_size = 0;
  float dropout_p = 0;                    ///< 0 without DROPOUT
  std::uint64_t dropout_seed = 0;
  std::uint8_t *dropout_mask = nullptr;   ///< forward: where the applied mask goes (uint8, strides below), or NULL
  std::int64_t dropout_s[4] = {0, 0, 0, 0};
  int fp8_format = -1;                    ///< FP8: the format of q, k, v (Fp8), −1 without FP8
  float descale[3] = {1, 1, 1};           ///< FP8: descale_q, descale_k, descale_v
};

/// Everything a kernel needs after validation. `shape` is that of the tensors as passed: under VARLEN B = 1 and
/// Lq, Lk are the packed totals; under PAGED Lk is the page size (k, v are [num_pages, Hkv, page_size, ·]). The
/// sequences' own lengths and places come from the member functions.
struct Operands {
  Shape shape;
  Dtype dtype = Dtype::f32;
  Mask mask = Mask::none;
  double scale = 1.0;
  View q, k, v, out;
  LseView lse;
  View dout, dq, dk, dv;  ///< backward only
  CallFeatures f;

  std::int64_t seqs() const { return f.nseq; }
  /// Rows Lq_b and keys Lk_b of sequence b.
  std::int64_t seq_rows(std::int64_t b) const {
    return f.has(ATTNCHECK_FEATURE_VARLEN) ? f.cu_q[static_cast<std::size_t>(b) + 1] - f.cu_q[static_cast<std::size_t>(b)]
                                           : shape.Lq;
  }
  std::int64_t seq_keys(std::int64_t b) const {
    if (f.has(ATTNCHECK_FEATURE_VARLEN))
      return f.cu_k[static_cast<std::size_t>(b) + 1] - f.cu_k[static_cast<std::size_t>(b)];
    return f.has(ATTNCHECK_FEATURE_PAGED) ? f.seqused[static_cast<std::size_t>(b)] : shape.Lk;
  }
  /// Row i of sequence b is [row_batch(b), h, row_offset(b) + i] of q, out, lse, dout, dq.
  std::int64_t row_batch(std::int64_t b) const { return f.has(ATTNCHECK_FEATURE_VARLEN) ? 0 : b; }
  std::int64_t row_offset(std::int64_t b) const {
    return f.has(ATTNCHECK_FEATURE_VARLEN) ? f.cu_q[static_cast<std::size_t>(b)] : 0;
  }
  /// Key j of sequence b is [*batch, hk, *row] of k, v (and dk, dv): a page and its row under PAGED.
  void key_at(std::int64_t b, std::int64_t j, std::int64_t *batch, std::int64_t *row) const {
    if (f.has(ATTNCHECK_FEATURE_PAGED)) {
      *batch = f.block_table[static_cast<std::size_t>(b * f.pages_per_seq + j / f.page_size)];
      *row = j % f.page_size;
    } else if (f.has(ATTNCHECK_FEATURE_VARLEN)) {
      *batch = 0;
      *row = f.cu_k[static_cast<std::size_t>(b)] + j;
    } else {
      *batch = b;
      *row = j;
    }
  }
};

/// Checks a forward call (non-null pointers, kDLCPU, one supported dtype, consistent shapes, float32 lse
/// [B,Hq,Lq] when given, a known mask, a finite scale) and fills *ops. With params->features ≠ 0 also the features:
/// those outside `supported` are ATTNCHECK_UNSUPPORTED; NULL args and malformed settings or argument tensors are
/// ATTNCHECK_ERROR; the tensors' shapes follow the layout VARLEN or PAGED names. Returns ATTNCHECK_OK, or the status
/// to return with the message recorded by fail(); `kernel` names the kernel in messages.
int check_forward(const char *kernel, std::uint32_t supported, const attncheck_params *params, const DLTensor *q,
                  const DLTensor *k, const DLTensor *v, const DLTensor *out, const DLTensor *lse, Operands *ops);
/// Same for backward: lse is required; dout has out's shape, dq/dk/dv have q/k/v's shapes; one dtype for all.
/// PAGED is always ATTNCHECK_UNSUPPORTED (the ABI defines no gradient of a paged cache).
int check_backward(const char *kernel, std::uint32_t supported, const attncheck_params *params, const DLTensor *q,
                   const DLTensor *k, const DLTensor *v, const DLTensor *out, const DLTensor *lse,
                   const DLTensor *dout, const DLTensor *dq, const DLTensor *dk, const DLTensor *dv, Operands *ops);

/// Keys [begin, end) that row i of a sequence of Lq_b rows and Lk_b keys sees by position: lengths, the causal mask
/// (bottom-right: j ≤ i' = i + Lk_b − Lq_b) and the window (i' − left ≤ j ≤ i' + right; −1 = unbounded). begin and
/// end never decrease with i; a row that sees nothing has begin = end. Without a window: [0, visible_count).
struct KeyRange {
  std::int64_t begin, end;
};
inline KeyRange key_range(Mask m, std::int64_t left, std::int64_t right, std::int64_t Lq_b, std::int64_t Lk_b,
                          std::int64_t i) {
  const std::int64_t aligned = i + Lk_b - Lq_b;
  std::int64_t end = is_causal(m) ? aligned + 1 : Lk_b;
  if (right >= 0) end = std::min(end, aligned + right + 1);
  const std::int64_t begin = left >= 0 ? std::clamp<std::int64_t>(aligned - left, 0, Lk_b) : 0;
  return {begin, std::clamp<std::int64_t>(end, begin, Lk_b)};
}

// ---- element conversions (exact widening, round-to-nearest-even narrowing) ----

inline float load_f16(std::uint16_t h) { return f16_bits_to_float(h); }
inline float load_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Element `idx` (in elements) of storage `p` of dtype `dt`, widened to float.
inline float load_elem(const std::byte *p, Dtype dt, std::int64_t idx) {
  switch (dt) {
    case Dtype::f32: {
      float f;
      std::memcpy(&f, p + idx * 4, sizeof f);
      return f;
    }
    case Dtype::f16: {
      std::uint16_t h;
      std::memcpy(&h, p + idx * 2, sizeof h);
      return load_f16(h);
    }
    case Dtype::bf16: {
      std::uint16_t h;
      std::memcpy(&h, p + idx * 2, sizeof h);
      return load_bf16(h);
    }
  }
  return 0.0f;
}

/// Stores x rounded to the dtype at element `idx` of `p`.
inline void store_elem(std::byte *p, Dtype dt, std::int64_t idx, float x) {
  switch (dt) {
    case Dtype::f32: std::memcpy(p + idx * 4, &x, sizeof x); return;
    case Dtype::f16: {
      const std::uint16_t h = float_to_f16_bits(x);
      std::memcpy(p + idx * 2, &h, sizeof h);
      return;
    }
    case Dtype::bf16: {
      const std::uint16_t h = float_to_bf16_bits(x);
      std::memcpy(p + idx * 2, &h, sizeof h);
      return;
    }
  }
}

inline float View::get(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
  if (fp8 >= 0)
    return static_cast<float>(fp8_to_double(std::to_integer<std::uint8_t>(data[offset(i0, i1, i2, i3)]),
                                            static_cast<Fp8>(fp8))) *
           factor;
  return load_elem(data, dtype, offset(i0, i1, i2, i3));
}
inline void View::set(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, float x) const {
  store_elem(data, dtype, offset(i0, i1, i2, i3), x);
}

}  // namespace attncheck::builtin

namespace attncheck::builtin {

// ---- the kernels (ABI signatures; each catches every exception and reports it as ATTNCHECK_ERROR) ----

int naive_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse);
int naive_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv);
int flash_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse);
int flash_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv);

}  // namespace attncheck::builtin
