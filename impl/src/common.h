// Shared internals of the bundled kernels: error reporting, thread count, operand validation and strided views.
// Nothing here is exported from libattncheck_builtin.so (the library is built with hidden visibility).
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/problem.h"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace attncheck::builtin {

/// Records `msg` as the calling thread's last error and returns `status` (for `return fail(...)`).
int fail(int status, std::string msg);
/// The calling thread's last error message ("" when none); valid until the thread's next failing call.
const char *last_error();

/// Threads a parallel kernel uses now: attncheck_builtin_set_threads's value when ≥ 1, else ATTNCHECK_THREADS
/// when it is a positive integer, else omp_get_max_threads().
int thread_count();
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
  /// Element [i0, i1, i2, i3] widened exactly to float.
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

/// Everything a kernel needs after validation.
struct Operands {
  Shape shape;
  Dtype dtype = Dtype::f32;
  Mask mask = Mask::none;
  double scale = 1.0;
  View q, k, v, out;
  LseView lse;
  View dout, dq, dk, dv;  ///< backward only
};

/// Checks a forward call (non-null pointers, kDLCPU, one supported dtype, consistent shapes, float32 lse
/// [B,Hq,Lq] when given, a known mask, a finite scale) and fills *ops. Returns ATTNCHECK_OK, or the status to
/// return with the message recorded by fail(); `kernel` names the kernel in messages.
int check_forward(const char *kernel, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                  const DLTensor *v, const DLTensor *out, const DLTensor *lse, Operands *ops);
/// Same for backward: lse is required; dout has out's shape, dq/dk/dv have q/k/v's shapes; one dtype for all.
int check_backward(const char *kernel, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                   const DLTensor *v, const DLTensor *out, const DLTensor *lse, const DLTensor *dout,
                   const DLTensor *dq, const DLTensor *dk, const DLTensor *dv, Operands *ops);

/// Key range [0, n) query row i sees (visible_count of problem.h).
inline std::int64_t visible_keys(const Operands &o, std::int64_t i) {
  return visible_count(o.mask, i, o.shape.Lq, o.shape.Lk);
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
