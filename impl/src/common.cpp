#include "common.h"

#include "attncheck/builtin.h"
#include "attncheck/features.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

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

  /// Pointer, device and data checks common to every tensor. Under VARLEN a tensor with no element (a packed
  /// batch of empty sequences) may have NULL data.
  int basic(const char *name, const DLTensor *t) const {
    if (!t) return error(std::string(name) + " is NULL");
    if (t->device.device_type != kDLCPU)
      return error(std::string(name) + " is on device type " + std::to_string(t->device.device_type) +
                   "; every tensor must be on kDLCPU");
    if (!t->data && !(empty_ok_ && t->shape && numel(*t) == 0)) return error(std::string(name) + " has NULL data");
    if (t->ndim > 0 && !t->shape) return error(std::string(name) + " has NULL shape");
    return ATTNCHECK_OK;
  }

  static std::int64_t numel(const DLTensor &t) {
    std::int64_t n = 1;
    for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
    return n;
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

  /// An input (q, k or v; `which` 0, 1, 2): as tensor4, or under FP8 uint8 float8 bits with its descale.
  int input4(const char *name, const DLTensor *t, Dtype dt, const std::int64_t (&want)[4], const CallFeatures &f,
             int which, View *v) const {
    if (!f.has(ATTNCHECK_FEATURE_FP8)) return tensor4(name, t, dt, want, v);
    if (t->dtype.code != kDLUInt || t->dtype.bits != 8 || t->dtype.lanes != 1)
      return error(std::string("under FP8, ") + name + " must hold float8 bits (uint8); got " + dtype_text(t->dtype));
    for (int d = 0; d < 4; ++d)
      if (t->ndim != 4 || t->shape[d] != want[d])
        return error(std::string(name) + " must have shape [" + std::to_string(want[0]) + "," +
                     std::to_string(want[1]) + "," + std::to_string(want[2]) + "," + std::to_string(want[3]) +
                     "]; got " + dims_text(*t));
    fill(*t, dt, v);
    v->fp8 = f.fp8_format;
    v->factor = f.descale[which];
    return ATTNCHECK_OK;
  }

  static void fill(const DLTensor &t, Dtype dt, View *v) {
    v->data = t.data ? static_cast<std::byte *>(t.data) + t.byte_offset : nullptr;
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
    out->data = t->data ? reinterpret_cast<float *>(static_cast<std::byte *>(t->data) + t->byte_offset) : nullptr;
    std::int64_t compact = 1;
    for (int d = 2; d >= 0; --d) {
      out->s[d] = t->strides ? t->strides[d] : compact;
      compact *= t->shape[d];
    }
    return ATTNCHECK_OK;
  }

  /// params, q, k, v, out: shape, dtype, mask and scale; with features, their settings and argument tensors.
  int common(const attncheck_params *params, std::uint32_t supported, bool backward, const DLTensor *q,
             const DLTensor *k, const DLTensor *v, const DLTensor *out, Operands *ops) {
    if (!params) return error("params is NULL");
    if (int st = features(params, supported, backward, &ops->f)) return st;
    const bool varlen = ops->f.has(ATTNCHECK_FEATURE_VARLEN), paged = ops->f.has(ATTNCHECK_FEATURE_PAGED);
    empty_ok_ = varlen;
    for (auto [name, t] : {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}})
      if (int st = basic(name, t)) return st;
    // FP8: q, k, v are float8 bits (uint8); out has the dtype of the results.
    const bool fp8 = ops->f.has(ATTNCHECK_FEATURE_FP8);
    if (fp8 && (basic("out", out) != ATTNCHECK_OK || !from_dlpack(out->dtype, &ops->dtype)))
      return error("under FP8, out must be float32, float16 or bfloat16");
    if (!fp8 && !from_dlpack(q->dtype, &ops->dtype))
      return error("q has dtype " + dtype_text(q->dtype) + "; the contract allows float32, float16 and bfloat16");
    std::string why;
    if (varlen || paged) {
      if (int st = packed_shape(*q, *k, *v, paged, &ops->shape)) return st;
    } else if (!shape_of(*q, *k, *v, &ops->shape, &why)) {
      return error(why);
    }
    const Shape &s = ops->shape;
    const std::int64_t kv_batch = paged ? k->shape[0] : s.B;  // pages under PAGED
    if (int st = input4("q", q, ops->dtype, {s.B, s.Hq, s.Lq, s.D}, ops->f, 0, &ops->q)) return st;
    if (int st = input4("k", k, ops->dtype, {kv_batch, s.Hkv, s.Lk, s.D}, ops->f, 1, &ops->k)) return st;
    if (int st = input4("v", v, ops->dtype, {kv_batch, s.Hkv, s.Lk, s.Dv}, ops->f, 2, &ops->v)) return st;
    if (int st = tensor4("out", out, ops->dtype, {s.B, s.Hq, s.Lq, s.Dv}, &ops->out)) return st;
    if (params->mask != ATTNCHECK_MASK_NONE && params->mask != ATTNCHECK_MASK_CAUSAL)
      return unsupported("mask " + std::to_string(params->mask) + " is not supported (only none and causal)");
    ops->mask = static_cast<Mask>(params->mask);
    if (!std::isfinite(params->scale)) return error("scale must be finite; got " + std::to_string(params->scale));
    ops->scale = params->scale;
    ops->f.nseq = s.B;
    if (ops->f.bits)
      if (int st = arguments(*params->args, backward, kv_batch, ops)) return st;
    return ATTNCHECK_OK;
  }

 private:
  /// params->features against what the kernel implements (`supported`), and the settings that are plain numbers.
  int features(const attncheck_params *params, std::uint32_t supported, bool backward, CallFeatures *f) const {
    f->bits = params->features;
    if (f->bits == 0) return ATTNCHECK_OK;
    if (!params->args)
      return error("params->features is " + feature_list(f->bits) + " but params->args is NULL");
    if (const std::uint32_t unknown = f->bits & ~kKnownFeatures)
      return unsupported("unknown feature bits 0x" + hex(unknown) + " in params->features");
    if (backward && f->has(ATTNCHECK_FEATURE_PAGED))
      return unsupported("a paged KV cache has no backward (PAGED is forward only)");
    if (const std::uint32_t missing = f->bits & ~supported)
      return unsupported(std::string(backward ? "backward" : "forward") + " does not implement " +
                         feature_list(missing) + " (it implements " + feature_list(supported) + ")");
    if (f->has(ATTNCHECK_FEATURE_VARLEN) && f->has(ATTNCHECK_FEATURE_PAGED))
      return unsupported("VARLEN and PAGED in one call are not supported");
    const attncheck_args &a = *params->args;
    if (a.size < sizeof(attncheck_args))
      return error("args->size is " + std::to_string(a.size) + "; an ABI 1.2 attncheck_args has " +
                   std::to_string(sizeof(attncheck_args)) + " bytes");
    if (f->has(ATTNCHECK_FEATURE_WINDOW)) {
      if (a.window_left < -1 || a.window_right < -1)
        return error("args->window_left, window_right must be >= 0 or -1 (unbounded); got " +
                     std::to_string(a.window_left) + ", " + std::to_string(a.window_right));
      f->window_left = a.window_left;
      f->window_right = a.window_right;
    }
    if (f->has(ATTNCHECK_FEATURE_SOFTCAP)) {
      if (!(std::isfinite(a.softcap) && a.softcap > 0))
        return error("args->softcap must be finite and > 0; got " + std::to_string(a.softcap));
      f->softcap = a.softcap;
    }
    if (f->has(ATTNCHECK_FEATURE_FP8)) {
      if (backward) return unsupported("FP8 inputs have no backward (FP8 is forward only)");
      if (a.fp8_format != 0 && a.fp8_format != 1)
        return error("args->fp8_format must be 0 (e4m3fn) or 1 (e5m2); got " + std::to_string(a.fp8_format));
      for (float d : {a.descale_q, a.descale_k, a.descale_v})
        if (!std::isfinite(d) || d == 0)
          return error("args->descale_q, descale_k, descale_v must be finite and nonzero; got " + std::to_string(d));
      f->fp8_format = a.fp8_format;
      f->descale[0] = a.descale_q;
      f->descale[1] = a.descale_k;
      f->descale[2] = a.descale_v;
    }
    if (f->has(ATTNCHECK_FEATURE_DROPOUT)) {
      if (!(a.dropout_p >= 0 && a.dropout_p < 1))
        return error("args->dropout_p must be in [0, 1); got " + std::to_string(a.dropout_p));
      f->dropout_p = a.dropout_p;
      f->dropout_seed = a.dropout_seed;
    }
    return ATTNCHECK_OK;
  }

  /// The shape of q, k, v under VARLEN (all [1, H, total, D]; totals may be 0) or PAGED (q [B, Hq, Lq, D]; k, v
  /// [num_pages, Hkv, page_size, D|Dv]): Lk is the total of keys, or the page size.
  int packed_shape(const DLTensor &q, const DLTensor &k, const DLTensor &v, bool paged, Shape *s) const {
    if (q.ndim != 4 || k.ndim != 4 || v.ndim != 4)
      return error("q, k and v must be rank 4; got ranks " + std::to_string(q.ndim) + ", " + std::to_string(k.ndim) +
                   ", " + std::to_string(v.ndim));
    const std::string got = "; got q " + dims_text(q) + ", k " + dims_text(k) + ", v " + dims_text(v);
    if (!paged && (q.shape[0] != 1 || k.shape[0] != 1 || v.shape[0] != 1))
      return error("under VARLEN, q, k and v are packed [1, H, total, D]" + got);
    if (k.shape[0] != v.shape[0] || k.shape[1] != v.shape[1] || k.shape[2] != v.shape[2])
      return error(std::string(paged ? "k and v must be pages [num_pages, Hkv, page_size, D|Dv] alike"
                                     : "k and v must have the same heads and keys") + got);
    if (q.shape[3] != k.shape[3]) return error("head dims differ" + got);
    *s = Shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
    Shape check = *s;  // the rules of Shape::validate; packed totals may be 0
    if (!paged) check.Lq = check.Lk = 1;
    if (paged && k.shape[0] < 1) return error("k and v must hold at least one page" + got);
    if (!paged && (s->Lq < 0 || s->Lk < 0)) return error("negative packed lengths" + got);
    try {
      check.validate();
    } catch (const std::invalid_argument &e) {
      return error(e.what() + got);
    }
    return ATTNCHECK_OK;
  }

  /// A rank-1 or rank-2 int32 argument of the given dims, read into *out row-major.
  int ints(const char *name, const DLTensor *t, std::initializer_list<std::int64_t> want,
           std::vector<std::int64_t> *out) const {
    if (int st = argument(name, t, want, {{kDLInt, 32}}, "int32")) return st;
    const auto *p = reinterpret_cast<const std::int32_t *>(static_cast<const std::byte *>(t->data) + t->byte_offset);
    out->clear();
    const std::int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    const std::int64_t s_row = t->ndim == 2 ? stride(*t, 0) : 0, s_col = stride(*t, t->ndim - 1);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out->push_back(p[r * s_row + c * s_col]);
    return ATTNCHECK_OK;
  }

  /// A float32 [n] argument (ALiBi slopes, sinks), read into *out.
  int floats(const char *name, const DLTensor *t, std::int64_t n, std::vector<float> *out) const {
    if (int st = argument(name, t, {n}, {{kDLFloat, 32}}, "float32")) return st;
    const auto *p = reinterpret_cast<const float *>(static_cast<const std::byte *>(t->data) + t->byte_offset);
    out->resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) (*out)[static_cast<std::size_t>(i)] = p[i * stride(*t, 0)];
    return ATTNCHECK_OK;
  }

  /// Stride of dim d in elements (compact row-major when the strides are NULL).
  static std::int64_t stride(const DLTensor &t, int d) {
    if (t.strides) return t.strides[d];
    std::int64_t s = 1;
    for (int e = t.ndim - 1; e > d; --e) s *= t.shape[e];
    return s;
  }

  /// An argument tensor: present, on the CPU, of rank want.size() and dims `want` (−1: any), of one of `types`
  /// ({code, bits}, one lane).
  int argument(const char *name, const DLTensor *t, std::initializer_list<std::int64_t> want,
               std::initializer_list<std::pair<int, int>> types, const char *type_text) const {
    std::string shape = "[";
    for (std::int64_t w : want) {
      if (shape.size() > 1) shape += ',';
      shape += w < 0 ? std::string("·") : std::to_string(w);
    }
    shape += ']';
    const std::string expect = std::string(name) + " must be " + type_text + " " + shape;
    if (!t) return error(expect + "; got NULL");
    if (int st = basic(name, t)) return st;
    if (t->ndim != static_cast<int>(want.size())) return error(expect + "; got rank " + std::to_string(t->ndim));
    int d = 0;
    for (std::int64_t w : want) {
      if (w >= 0 && t->shape[d] != w) return error(expect + "; got " + dims_text(*t));
      ++d;
    }
    for (auto [code, bits] : types)
      if (t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1) return ATTNCHECK_OK;
    return error(expect + "; got " + dtype_text(t->dtype));
  }

  /// Sequence offsets (VARLEN): from 0, nondecreasing, ending at the packed total.
  int offsets(const char *name, const std::vector<std::int64_t> &cu, std::int64_t total, std::int64_t max_len,
              const char *max_name) const {
    if (cu.empty() || cu[0] != 0) return error(std::string(name) + " must start at 0");
    std::int64_t longest = 0;
    for (std::size_t b = 1; b < cu.size(); ++b) {
      if (cu[b] < cu[b - 1])
        return error(std::string(name) + " must not decrease; got " + std::to_string(cu[b - 1]) + " then " +
                     std::to_string(cu[b]));
      longest = std::max(longest, cu[b] - cu[b - 1]);
    }
    if (cu.back() != total)
      return error(std::string(name) + " ends at " + std::to_string(cu.back()) + " but the packed tensors hold " +
                   std::to_string(total));
    if (max_len < longest)
      return error(std::string(max_name) + " is " + std::to_string(max_len) + " but a sequence has " +
                   std::to_string(longest));
    return ATTNCHECK_OK;
  }

  /// The argument tensors of the features (shape in ops->shape, nseq = B so far); fills ops->f.
  int arguments(const attncheck_args &a, bool backward, std::int64_t kv_batch, Operands *ops) const {
    CallFeatures &f = ops->f;
    const Shape &s = ops->shape;
    std::int64_t max_q = s.Lq, max_k = s.Lk;  // the logical [Lq, Lk] of the mask and the dropout mask
    bool keys_at_least = false;               // PAGED: their Lk need only cover the longest sequence
    if (f.has(ATTNCHECK_FEATURE_ALIBI))
      if (int st = floats("args->alibi_slopes", a.alibi_slopes, s.Hq, &f.alibi)) return st;
    if (f.has(ATTNCHECK_FEATURE_SINKS))
      if (int st = floats("args->sinks", a.sinks, s.Hq, &f.sinks)) return st;
    if (f.has(ATTNCHECK_FEATURE_VARLEN)) {
      if (int st = ints("args->cu_seqlens_q", a.cu_seqlens_q, {-1}, &f.cu_q)) return st;
      if (int st = ints("args->cu_seqlens_k", a.cu_seqlens_k, {static_cast<std::int64_t>(f.cu_q.size())}, &f.cu_k))
        return st;
      if (int st = offsets("args->cu_seqlens_q", f.cu_q, s.Lq, a.max_seqlen_q, "args->max_seqlen_q")) return st;
      if (int st = offsets("args->cu_seqlens_k", f.cu_k, s.Lk, a.max_seqlen_k, "args->max_seqlen_k")) return st;
      f.nseq = static_cast<std::int64_t>(f.cu_q.size()) - 1;
      max_q = a.max_seqlen_q;
      max_k = a.max_seqlen_k;
    }
    if (f.has(ATTNCHECK_FEATURE_PAGED)) {
      if (a.page_size != s.Lk)
        return error("args->page_size is " + std::to_string(a.page_size) + " but k and v have pages of " +
                     std::to_string(s.Lk) + " keys");
      f.page_size = a.page_size;
      if (int st = ints("args->seqused_k", a.seqused_k, {s.B}, &f.seqused)) return st;
      if (int st = ints("args->block_table", a.block_table, {s.B, -1}, &f.block_table)) return st;
      f.pages_per_seq = a.block_table->shape[1];
      max_k = 0;
      for (std::int64_t b = 0; b < s.B; ++b) {
        const std::int64_t n = f.seqused[static_cast<std::size_t>(b)];
        if (n < 0 || n > f.pages_per_seq * f.page_size)
          return error("args->seqused_k[" + std::to_string(b) + "] is " + std::to_string(n) + "; the block table holds " +
                       std::to_string(f.pages_per_seq) + " pages of " + std::to_string(f.page_size) + " keys");
        for (std::int64_t pg = 0; pg * f.page_size < n; ++pg) {
          const std::int64_t page = f.block_table[static_cast<std::size_t>(b * f.pages_per_seq + pg)];
          if (page < 0 || page >= kv_batch)
            return error("args->block_table[" + std::to_string(b) + "," + std::to_string(pg) + "] is " +
                         std::to_string(page) + "; k and v hold " + std::to_string(kv_batch) + " pages");
        }
        max_k = std::max(max_k, n);
      }
      keys_at_least = true;
    }
    const std::int64_t want_k = keys_at_least ? -1 : max_k;
    auto cover = [&](const char *name, const DLTensor *t) {
      return keys_at_least && t->shape[3] < max_k
                 ? error(std::string(name) + " must cover " + std::to_string(max_k) + " keys; got " + dims_text(*t))
                 : ATTNCHECK_OK;
    };
    if (f.has(ATTNCHECK_FEATURE_MASK)) {
      const DLTensor *m = a.attn_mask;
      if (int st = argument("args->attn_mask", m, {-1, -1, max_q, want_k},
                            {{kDLUInt, 8}, {kDLInt, 8}, {kDLFloat, 32}},
                            "uint8 or float32 [Bm,Hm,Lq,Lk] (Bm 1 or B, Hm 1 or Hq)"))
        return st;
      if (int st = cover("args->attn_mask", m)) return st;
      if ((m->shape[0] != 1 && m->shape[0] != f.nseq) || (m->shape[1] != 1 && m->shape[1] != s.Hq))
        return error("args->attn_mask must be [Bm,Hm,Lq,Lk] with Bm 1 or " + std::to_string(f.nseq) + ", Hm 1 or " +
                     std::to_string(s.Hq) + "; got " + dims_text(*m));
      f.mask = static_cast<const std::byte *>(m->data) + m->byte_offset;
      f.mask_boolean = m->dtype.code != kDLFloat;
      for (int d = 0; d < 4; ++d) f.mask_s[d] = m->shape[d] == 1 ? 0 : stride(*m, d);
    }
    if (f.has(ATTNCHECK_FEATURE_DROPOUT) && a.dropout_mask) {
      const DLTensor *m = a.dropout_mask;
      if (int st = argument("args->dropout_mask", m, {f.nseq, s.Hq, max_q, want_k}, {{kDLUInt, 8}},
                            "uint8 [B,Hq,Lq,Lk]"))
        return st;
      if (int st = cover("args->dropout_mask", m)) return st;
      if (!backward) {  // backward reproduces the mask from the seed: it never reads the tensor
        f.dropout_mask = reinterpret_cast<std::uint8_t *>(static_cast<std::byte *>(m->data) + m->byte_offset);
        for (int d = 0; d < 4; ++d) f.dropout_s[d] = stride(*m, d);
      }
    }
    return ATTNCHECK_OK;
  }

  static std::string hex(std::uint32_t x) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x", x);
    return buf;
  }

  /// Every feature bit ABI 1.2 defines.
  static constexpr std::uint32_t kKnownFeatures = (ATTNCHECK_FEATURE_FP8 << 1) - 1;
  bool empty_ok_ = false;
  const char *kernel_;
};
}  // namespace

int fail(int status, std::string msg) {
  t_last_error = std::move(msg);
  return status;
}

const char *last_error() { return t_last_error.c_str(); }

int requested_threads() { return std::max(g_threads.load(std::memory_order_relaxed), 0); }

int thread_count() {
  if (const int n = requested_threads(); n >= 1) return n;
  if (const char *env = std::getenv("ATTNCHECK_THREADS")) {
    char *end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= kMaxThreads) return static_cast<int>(n);
  }
  return omp_get_max_threads();
}

void set_threads(int n) { g_threads.store(n >= 1 ? n : 0, std::memory_order_relaxed); }

int check_forward(const char *kernel, std::uint32_t supported, const attncheck_params *params, const DLTensor *q,
                  const DLTensor *k, const DLTensor *v, const DLTensor *out, const DLTensor *lse, Operands *ops) {
  Checker c(kernel);
  if (int st = c.common(params, supported, false, q, k, v, out, ops)) return st;
  if (lse)
    if (int st = c.lse(lse, ops->shape, &ops->lse)) return st;
  return ATTNCHECK_OK;
}

int check_backward(const char *kernel, std::uint32_t supported, const attncheck_params *params, const DLTensor *q,
                   const DLTensor *k, const DLTensor *v, const DLTensor *out, const DLTensor *lse,
                   const DLTensor *dout, const DLTensor *dq, const DLTensor *dk, const DLTensor *dv, Operands *ops) {
  Checker c(kernel);
  if (int st = c.common(params, supported, true, q, k, v, out, ops)) return st;
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
