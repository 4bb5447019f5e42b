#include "common.h"

#include "attncheck/builtin.h"

#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

namespace attncheck::builtin {

namespace {
thread_local std::string t_last_error;
/// attncheck_builtin_set_threads's value; 0 = default.
std::atomic<int> g_threads{0};

std::string dtype_text(DLDataType t) {
  Dtype dt;
  if (from_dlpack(t, &dt)) return std::string(dtype_name(dt));
  return "DLDataType{code=" + std::to_string(t.code) + ", bits=" + std::to_string(t.bits) +
         ", lanes=" + std::to_string(t.lanes) + "}";
}

std::string dims_text(const DLTensor &t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) {
    if (d) s += ',';
    s += std::to_string(t.shape[d]);
  }
  s += ']';
  return s;
}

/// Validation of one call; `fail_*` record the message and return the status.
class Checker {
 public:
  explicit Checker(const char *kernel) : kernel_(kernel) {}

  int error(const std::string &msg) const { return fail(ATTNCHECK_ERROR, std::string(kernel_) + ": " + msg); }
  int unsupported(const std::string &msg) const {
    return fail(ATTNCHECK_UNSUPPORTED, std::string(kernel_) + ": " + msg);
  }

  /// Pointer, device and data checks common to every tensor.
  int basic(const char *name, const DLTensor *t) const {
    if (!t) return error(std::string(name) + " is NULL");
    if (t->device.device_type != kDLCPU)
      return error(std::string(name) + " is on device type " + std::to_string(t->device.device_type) +
                   "; every tensor must be on kDLCPU");
    if (!t->data) return error(std::string(name) + " has NULL data");
    if (t->ndim > 0 && !t->shape) return error(std::string(name) + " has NULL shape");
    return ATTNCHECK_OK;
  }

  /// `t` must have rank 4, the given shape and dtype; fills *v.
  int tensor4(const char *name, const DLTensor *t, Dtype dt, const std::int64_t (&want)[4], View *v) const {
    if (int st = basic(name, t)) return st;
    if (t->ndim != 4) return error(std::string(name) + " must have rank 4; got rank " + std::to_string(t->ndim));
    for (int d = 0; d < 4; ++d)
      if (t->shape[d] != want[d])
        return error(std::string(name) + " must have shape [" + std::to_string(want[0]) + "," +
                     std::to_string(want[1]) + "," + std::to_string(want[2]) + "," + std::to_string(want[3]) +
                     "]; got " + dims_text(*t));
    Dtype got;
    if (!from_dlpack(t->dtype, &got) || got != dt)
      return error("every tensor must share q's dtype " + std::string(dtype_name(dt)) + "; " + name + " is " +
                   dtype_text(t->dtype));
    fill(*t, got, v);
    return ATTNCHECK_OK;
  }

  static void fill(const DLTensor &t, Dtype dt, View *v) {
    v->data = static_cast<std::byte *>(t.data) + t.byte_offset;
    v->dtype = dt;
    std::int64_t compact = 1;
    for (int d = 3; d >= 0; --d) {
      v->n[d] = t.shape[d];
      v->s[d] = t.strides ? t.strides[d] : compact;
      compact *= t.shape[d];
    }
  }

  int lse(const DLTensor *t, const Shape &s, LseView *out) const {
    if (int st = basic("lse", t)) return st;
    if (t->ndim != 3 || t->shape[0] != s.B || t->shape[1] != s.Hq || t->shape[2] != s.Lq)
      return error("lse must be float32 [B,Hq,Lq] = [" + std::to_string(s.B) + "," + std::to_string(s.Hq) + "," +
                   std::to_string(s.Lq) + "]; got shape " + dims_text(*t));
    if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1)
      return error("lse must be float32; got " + dtype_text(t->dtype));
    out->data = reinterpret_cast<float *>(static_cast<std::byte *>(t->data) + t->byte_offset);
    std::int64_t compact = 1;
    for (int d = 2; d >= 0; --d) {
      out->s[d] = t->strides ? t->strides[d] : compact;
      compact *= t->shape[d];
    }
    return ATTNCHECK_OK;
  }

  /// params, q, k, v, out: shape, dtype, mask and scale.
  int common(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
             const DLTensor *out, Operands *ops) const {
    if (!params) return error("params is NULL");
    for (auto [name, t] : {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}})
      if (int st = basic(name, t)) return st;
    if (!from_dlpack(q->dtype, &ops->dtype))
      return error("q has dtype " + dtype_text(q->dtype) + "; the contract allows float32, float16 and bfloat16");
    std::string why;
    if (!shape_of(*q, *k, *v, &ops->shape, &why)) return error(why);
    const Shape &s = ops->shape;
    if (int st = tensor4("q", q, ops->dtype, {s.B, s.Hq, s.Lq, s.D}, &ops->q)) return st;
    if (int st = tensor4("k", k, ops->dtype, {s.B, s.Hkv, s.Lk, s.D}, &ops->k)) return st;
    if (int st = tensor4("v", v, ops->dtype, {s.B, s.Hkv, s.Lk, s.Dv}, &ops->v)) return st;
    if (int st = tensor4("out", out, ops->dtype, {s.B, s.Hq, s.Lq, s.Dv}, &ops->out)) return st;
    if (params->mask != ATTNCHECK_MASK_NONE && params->mask != ATTNCHECK_MASK_CAUSAL)
      return unsupported("mask " + std::to_string(params->mask) + " is not supported (only none and causal)");
    ops->mask = static_cast<Mask>(params->mask);
    if (!std::isfinite(params->scale)) return error("scale must be finite; got " + std::to_string(params->scale));
    ops->scale = params->scale;
    return ATTNCHECK_OK;
  }

 private:
  const char *kernel_;
};
}  // namespace

int fail(int status, std::string msg) {
  t_last_error = std::move(msg);
  return status;
}

const char *last_error() { return t_last_error.c_str(); }

int thread_count() {
  if (const int n = g_threads.load(std::memory_order_relaxed); n >= 1) return n;
  if (const char *env = std::getenv("ATTNCHECK_THREADS")) {
    char *end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= kMaxThreads) return static_cast<int>(n);
  }
  return omp_get_max_threads();
}

void set_threads(int n) { g_threads.store(n >= 1 ? n : 0, std::memory_order_relaxed); }

int check_forward(const char *kernel, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                  const DLTensor *v, const DLTensor *out, const DLTensor *lse, Operands *ops) {
  const Checker c(kernel);
  if (int st = c.common(params, q, k, v, out, ops)) return st;
  if (lse)
    if (int st = c.lse(lse, ops->shape, &ops->lse)) return st;
  return ATTNCHECK_OK;
}

int check_backward(const char *kernel, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                   const DLTensor *v, const DLTensor *out, const DLTensor *lse, const DLTensor *dout,
                   const DLTensor *dq, const DLTensor *dk, const DLTensor *dv, Operands *ops) {
  const Checker c(kernel);
  if (int st = c.common(params, q, k, v, out, ops)) return st;
  if (!lse)
    return c.error("backward needs the float32 lse that forward returned (it is not recomputed); got NULL");
  if (int st = c.lse(lse, ops->shape, &ops->lse)) return st;
  const Shape &s = ops->shape;
  if (int st = c.tensor4("dout", dout, ops->dtype, {s.B, s.Hq, s.Lq, s.Dv}, &ops->dout)) return st;
  if (int st = c.tensor4("dq", dq, ops->dtype, {s.B, s.Hq, s.Lq, s.D}, &ops->dq)) return st;
  if (int st = c.tensor4("dk", dk, ops->dtype, {s.B, s.Hkv, s.Lk, s.D}, &ops->dk)) return st;
  if (int st = c.tensor4("dv", dv, ops->dtype, {s.B, s.Hkv, s.Lk, s.Dv}, &ops->dv)) return st;
  return ATTNCHECK_OK;
}

}  // namespace attncheck::builtin
