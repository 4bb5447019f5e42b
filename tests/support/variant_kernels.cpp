// The variant kernel family: one scalar implementation whose summation order, precision and bugs are chosen by a
// Variant, exposed through a fixed table of static trampolines (one slot per distinct variant) because an ABI
// function pointer cannot carry state.
#include "variant_kernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#include "attncheck/problem.h"

namespace attncheck::support {

namespace {

constexpr float kLog2e = 1.44269504088896340736f;  ///< log₂ e
constexpr float kLn2 = 0.693147180559945309417f;   ///< ln 2 = 1 / log₂ e
constexpr int kTf32Bits = 11;  ///< TensorFloat-32: float32's exponent, 10 stored significand bits
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kMaxRank = 4;             ///< q, k, v, out and the gradients are [B, H, L, X]
constexpr int kLseRank = 3;             ///< lse is [B, Hq, Lq]
constexpr int kCanonicalBugBlock = 16;  ///< key_block of bug_variant(drop_last_partial_block, split_combine_over_two)
constexpr int kCounterBugBlock = 8;     ///< key_block of bug_variant(block_counter_8bit): wraps past 2048 keys
constexpr int kDecodeBugBlock = 64;     ///< key_block of bug_variant(decode_drops_tail_block)
constexpr std::int64_t kBlockCounterWrap = 256;  ///< Bug::block_counter_8bit's counter: 8 bits

// ---------------------------------------------------------------------------------------------------------------
// Errors: one message per thread, shared by every slot's last_error.

thread_local std::string t_last_error;
const char *last_error() { return t_last_error.c_str(); }

int fail(int status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

// ---------------------------------------------------------------------------------------------------------------
// Strided element access on a DLTensor.

/// "[2,4,17,64]".
std::string dims_text(const std::int64_t *dims, int n) {
  std::string s = "[";
  for (int d = 0; d < n; ++d) {
    if (d) s += ',';
    s += std::to_string(dims[d]);
  }
  s += ']';
  return s;
}

/// A bound DLTensor of rank ≤ 4: element (a, b, c, d) lives at data + (a·s₀ + b·s₁ + c·s₂ + d·s₃) elements.
class View {
 public:
  /// Binds `t` (CPU, float32/float16/bfloat16, the given rank; NULL strides = compact row-major). False, with a
  /// message naming `what`, otherwise.
  bool bind(const DLTensor *t, const char *what, int rank, std::string *why) {
    const std::string name(what);
    if (!t) return (*why = name + " is NULL", false);
    if (t->device.device_type != kDLCPU) return (*why = name + " is not on kDLCPU", false);
    if (!from_dlpack(t->dtype, &dt_)) return (*why = name + " has a dtype other than float32/float16/bfloat16", false);
    if (t->ndim != rank)
      return (*why = name + " must have rank " + std::to_string(rank) + ", got " + std::to_string(t->ndim), false);
    rank_ = rank;
    std::int64_t numel = 1;
    for (int d = 0; d < rank; ++d) {
      if (t->shape[d] < 0) return (*why = name + " has a negative dimension", false);
      shape_[d] = t->shape[d];
      numel *= shape_[d];
    }
    std::int64_t compact = 1;  // NULL strides: row-major compact
    for (int d = rank - 1; d >= 0; --d) {
      strides_[d] = t->strides ? t->strides[d] : compact;
      compact *= shape_[d];
    }
    lo_ = 0;
    hi_ = numel == 0 ? -1 : 0;
    for (int d = 0; d < rank && numel > 0; ++d) {
      const std::int64_t reach = (shape_[d] - 1) * strides_[d];
      (reach < 0 ? lo_ : hi_) += reach;
    }
    data_ = static_cast<std::byte *>(t->data) + t->byte_offset;
    if (numel > 0 && !t->data) return (*why = name + " has NULL data", false);
    return true;
  }

  Dtype dtype() const { return dt_; }
  std::int64_t dim(int d) const { return shape_[d]; }
  bool has_shape(std::initializer_list<std::int64_t> want) const {
    if (static_cast<int>(want.size()) != rank_) return false;
    return std::equal(want.begin(), want.end(), shape_.begin());
  }
  std::string shape_text() const { return dims_text(shape_.data(), rank_); }

  /// Element offset of an index (trailing indices of a lower-rank view are 0); truncated to a wrapping int32 after
  /// wrap_offsets_32 (Bug::offsets_int32).
  std::int64_t offset(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d = 0) const {
    const std::int64_t off = a * strides_[0] + b * strides_[1] + c * strides_[2] + d * strides_[3];
    return wrap32_ ? static_cast<std::int32_t>(off) : off;  // modulo 2³² since C++20: no undefined behaviour
  }
  /// From now on offset() computes offsets as a 32-bit signed integer would (when `on`).
  void wrap_offsets_32(bool on) { wrap32_ = on; }
  /// Some stride is 0 (an expanded tensor).
  bool has_zero_stride() const {
    return std::any_of(strides_.begin(), strides_.begin() + rank_, [](std::int64_t x) { return x == 0; });
  }
  /// From now on offsets use compact row-major strides, whatever the tensor's (the layout bugs); an offset outside
  /// the tensor's real extent then loads 0 and stores nothing.
  void assume_compact() {
    std::int64_t compact = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      strides_[d] = compact;
      compact *= shape_[d];
    }
    guarded_ = true;
  }
  /// True when `off` lies within the tensor's extent: the smallest element range holding all its elements, hence
  /// inside the storage the caller allocated for it.
  bool in_extent(std::int64_t off) const { return lo_ <= off && off <= hi_; }

  float load(std::int64_t off) const {
    if (guarded_ && !in_extent(off)) return 0.f;
    const std::byte *p = data_ + off * dtype_size(dt_);
    std::uint16_t bits = 0;
    switch (dt_) {
      case Dtype::f32: {
        float f = 0;
        std::memcpy(&f, p, sizeof f);
        return f;
      }
      case Dtype::f16: std::memcpy(&bits, p, sizeof bits); return f16_bits_to_float(bits);
      case Dtype::bf16: std::memcpy(&bits, p, sizeof bits); return bf16_bits_to_float(bits);
    }
    return kNaN;
  }
  /// Stores x rounded (to nearest even) to the dtype.
  void store(std::int64_t off, float x) const {
    if (guarded_ && !in_extent(off)) return;
    std::byte *p = data_ + off * dtype_size(dt_);
    std::uint16_t bits = 0;
    switch (dt_) {
      case Dtype::f32: std::memcpy(p, &x, sizeof x); return;
      case Dtype::f16: bits = float_to_f16_bits(x); break;
      case Dtype::bf16: bits = float_to_bf16_bits(x); break;
    }
    std::memcpy(p, &bits, sizeof bits);
  }
  float get(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d = 0) const {
    return load(offset(a, b, c, d));
  }
  void set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float x) const {
    store(offset(a, b, c, d), x);
  }

 private:
  std::byte *data_ = nullptr;
  Dtype dt_ = Dtype::f32;
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{1, 1, 1, 1}, strides_{0, 0, 0, 0};
  std::int64_t lo_ = 0, hi_ = -1;
  bool wrap32_ = false;
  bool guarded_ = false;  ///< assume_compact: offsets checked against the real extent
};

// ---------------------------------------------------------------------------------------------------------------
// Emulated accumulation arithmetic: every result rounded to `dt` (exact float arithmetic for f32).

struct Arith {
  Dtype dt = Dtype::f32;
  float r(float x) const { return dt == Dtype::f32 ? x : static_cast<float>(round_to(dt, x)); }
  float add(float a, float b) const { return r(a + b); }
  float sub(float a, float b) const { return r(a - b); }
  float mul(float a, float b) const { return r(a * b); }
  float div(float a, float b) const { return r(a / b); }
  float exp(float x) const { return r(std::exp(x)); }
  float exp2(float x) const { return r(std::exp2(x)); }
  float log(float x) const { return r(std::log(x)); }
};

/// x chopped toward zero to `bits` significant bits, with the grid's spacing fixed below 2^min_exp (a dtype's
/// subnormals): how the approximation emulations err at their worst, always in one direction.
double chop(double x, int bits, int min_exp) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| ∈ [2^(e−1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 1, min_exp) - (bits - 1));
  return std::trunc(x / spacing) * spacing;
}

/// Significant bits and smallest normal exponent of float32, float16 and bfloat16.
struct Grid {
  int bits, min_exp;
};
Grid grid_of(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return {24, -126};
    case Dtype::f16: return {11, -14};
    case Dtype::bf16: return {8, -126};
  }
  return {24, -126};
}

/// tanh as Variant::tanh evaluates it (see there).
float tanh_of(Tanh t, float a) {
  constexpr int kApproxBits = 12;  // tanh.approx.f32: relative error 2^-10.987 ≈ chopping to 12 bits
  switch (t) {
    case Tanh::accurate: return std::tanh(a);
    case Tanh::approx: return static_cast<float>(chop(std::tanh(a), kApproxBits, grid_of(Dtype::f32).min_exp));
    case Tanh::approx_f16:
    case Tanh::approx_bf16: {
      const Dtype dt = t == Tanh::approx_f16 ? Dtype::f16 : Dtype::bf16;
      const Grid g = grid_of(dt);
      return static_cast<float>(chop(std::tanh(round_to(dt, a)), g.bits, g.min_exp));
    }
  }
  return std::tanh(a);
}

/// 2^a as Variant::exp evaluates it for the float16/bfloat16 instructions (see there).
float exp2_approx(Exp e, float a) {
  const Dtype dt = e == Exp::approx_f16 ? Dtype::f16 : Dtype::bf16;
  const Grid g = grid_of(dt);
  const double r = chop(std::exp2(round_to(dt, a)), g.bits, g.min_exp);
  return r < std::ldexp(1.0, g.min_exp) ? 0.f : static_cast<float>(r);
}

// ---------------------------------------------------------------------------------------------------------------
// One call's context: the variant, the problem's shape and inputs, and the helpers every pass shares.

/// Bug::scale_cached_per_shape: the scale of the first call of each shape (over every thread).
float first_scale_of_shape(const Shape &s, float scale) {
  static std::mutex m;
  static std::map<std::array<std::int64_t, 7>, float> first;
  const std::lock_guard<std::mutex> lock(m);
  return first.emplace(std::array{s.B, s.Hq, s.Hkv, s.Lq, s.Lk, s.D, s.Dv}, scale).first->second;
}


/// The scale the kernel actually uses: params.scale, or what a scale bug puts in its place.
double effective_scale(Bug bug, double scale, const Shape &s) {
  switch (bug) {
    case Bug::missing_scale: return 1.0;
    case Bug::scale_1_over_d: return 1.0 / static_cast<double>(s.D);
    case Bug::scale_1_over_sqrt_dv: return 1.0 / std::sqrt(static_cast<double>(s.Dv));
    case Bug::scale_12_bits: {
      int e = 0;
      const double m = std::frexp(scale, &e);
      return std::ldexp(std::round(std::ldexp(m, kScaleBits)), e - kScaleBits);
    }
    default: return scale;
  }
}

struct Ctx {
  Variant var;
  Shape s;
  Mask mask = Mask::none;
  Dtype storage = Dtype::f32;
  Arith acc;                   ///< the variant's arithmetic
  Arith dot;                   ///< q·k arithmetic: accumulate_qk (f32: acc), or float16 under Bug::f16_dot_accumulation
  Arith logit;                 ///< the multiply by score_mul: dot, or acc under Bug::f16_dot_accumulation
  float scale = 1;             ///< effective scale, in acc
  float score_mul = 1;         ///< u = (q·k) · score_mul: scale, or scale·log₂e with exp2_fold
  std::int64_t key_end = 0;    ///< keys the loops visit: Lk, or Lk + 1 under Bug::read_past_last_key
  std::int64_t splits = 1;     ///< var.splits, or ⌈Lk / kSplitKeys⌉ under Bug::split_combine_over_two
  std::int64_t split_len = 0;  ///< ⌈key_end / splits⌉
  bool drop_tail = false;      ///< forward under Bug::decode_drops_tail_block on a long decode row: skip partial blocks
  float cap = 0;               ///< softcap's c when the call sets ATTNCHECK_FEATURE_SOFTCAP, else 0
  View q, k, v;

  bool has(Bug b) const { return var.bug == b; }

  /// kv head of query head h: h / (Hq/Hkv), h % Hkv under Bug::gqa_head_mod, (h / 8) % Hkv under
  /// Bug::gqa_group_past_8 when the group is larger than 8.
  std::int64_t kv_head(std::int64_t h) const {
    if (has(Bug::gqa_head_mod)) return h % s.Hkv;
    if (has(Bug::gqa_group_past_8) && s.group() > kGroupTile) return (h / kGroupTile) % s.Hkv;
    return s.kv_head(h);
  }
  /// The batch entry whose k and v batch entry b reads: b, or b mod 2 under Bug::kv_batch_wraps_2.
  std::int64_t kv_batch(std::int64_t b) const { return has(Bug::kv_batch_wraps_2) ? b % 2 : b; }

  /// The last key causal row i sees (< 0: none): bottom-right i + Lk − Lq, top-left i, one more under the bug.
  std::int64_t last_seen(std::int64_t i) const {
    if (has(Bug::causal_off_by_one)) return i + s.Lk - s.Lq + 1;
    if (has(Bug::causal_top_left) || var.causal_top_left) return i;
    return last_visible(mask, i, s.Lq, s.Lk);
  }

  /// Whether row i sees key j (j = Lk, the read-past key, is seen by the rows that see key Lk − 1). With
  /// empty_rows_mean a row that sees no key sees them all.
  bool sees(std::int64_t i, std::int64_t j) const {
    if (j == s.Lk) j = s.Lk - 1;
    if (mask == Mask::none) return true;
    const std::int64_t last = last_seen(i);
    return j <= last || (var.empty_rows_mean && last < 0);
  }

  /// False for the keys Bug::drop_last_partial_block skips: those of a split's last block when it is partial.
  bool kept(std::int64_t j) const {
    if (!has(Bug::drop_last_partial_block) || var.key_block == 0) return true;
    const std::int64_t lo = (j / split_len) * split_len, hi = std::min(lo + split_len, key_end);
    const std::int64_t full = ((hi - lo) / var.key_block) * var.key_block;
    return j < lo + full;
  }

  /// The key row whose k and v stand for key j: j, or under Bug::block_counter_8bit the row addressed with the
  /// block index (from the split's first key) taken modulo 256.
  std::int64_t addressed_key(std::int64_t j) const {
    if (!has(Bug::block_counter_8bit) || var.key_block == 0 || split_len == 0) return j;
    const std::int64_t lo = (j / split_len) * split_len, bsz = var.key_block;
    return lo + ((j - lo) / bsz) % kBlockCounterWrap * bsz + (j - lo) % bsz;
  }

  /// Element x of key row j of k or v in kv head hk: the stored element for j < Lk; for the read-past key j = Lk,
  /// the element one key stride further when it lies within the tensor's extent, else 0.
  float key_elem(const View &t, std::int64_t b, std::int64_t hk, std::int64_t j, std::int64_t x) const {
    const std::int64_t off = t.offset(kv_batch(b), hk, addressed_key(j), x);
    if (j < s.Lk) return t.load(off);
    return t.in_extent(off) ? t.load(off) : 0.f;
  }

  /// u_j = (q·k_j) · score_mul, the exponent's argument before the max is subtracted (log₂ domain with exp2_fold).
  /// With softcap: u_j = c·tanh(scale·q·k_j / c) (× log₂e with exp2_fold), and *chain = 1 − tanh² (when given).
  float score(const float *qrow, std::int64_t b, std::int64_t hk, std::int64_t j, float *chain = nullptr) const {
    float d = 0;
    for (std::int64_t x = 0; x < s.D; ++x) d = dot.add(d, dot.mul(operand(qrow[x]), operand(key_elem(k, b, hk, j, x))));
    if (cap == 0) return logit.mul(d, score_mul);
    const bool unscaled = has(Bug::softcap_unscaled);
    const float t = acc.r(tanh_of(var.tanh, acc.div(unscaled ? d : logit.mul(d, scale), cap)));
    if (chain) *chain = has(Bug::softcap_no_chain) ? 1.f : acc.sub(1.f, acc.mul(t, t));
    float sv = acc.mul(cap, t);
    if (unscaled) sv = acc.mul(sv, scale);
    return var.exp2_fold ? acc.mul(sv, kLog2e) : sv;
  }
  /// Every exp goes through a float16/bfloat16 instruction's emulation (Variant::exp).
  bool narrow_exp() const { return var.exp == Exp::approx_f16 || var.exp == Exp::approx_bf16; }
  /// e^x, or 2^x with exp2_fold.
  float expo(float x) const {
    if (narrow_exp()) return acc.r(exp2_approx(var.exp, var.exp2_fold ? x : acc.mul(x, kLog2e)));
    return var.exp2_fold ? acc.exp2(x) : acc.exp(x);
  }
  /// e^x in the natural domain (split-KV's combination weights), approximated as expo is.
  float expn(float x) const { return narrow_exp() ? acc.r(exp2_approx(var.exp, acc.mul(x, kLog2e))) : acc.exp(x); }
  /// A max in the score domain as a natural logarithm (× ln 2 with exp2_fold), and back.
  float to_natural(float m) const { return var.exp2_fold ? acc.mul(m, kLn2) : m; }
  float from_natural(float l) const { return var.exp2_fold ? acc.mul(l, kLog2e) : l; }
  /// x as a matrix product's operand (Variant::fp32_precision).
  float operand(float x) const {
    switch (var.fp32_precision) {
      case Fp32Precision::ieee: return x;
      case Fp32Precision::tf32: return static_cast<float>(chop(x, kTf32Bits, grid_of(Dtype::f32).min_exp));
      case Fp32Precision::bf16: return static_cast<float>(round_to(Dtype::bf16, x));
      case Fp32Precision::f16: return static_cast<float>(round_to(Dtype::f16, x));
    }
    return x;
  }
  /// p as P·V (and backward) use it: rounded to the storage dtype with round_p.
  float stored_p(float p) const { return var.round_p ? static_cast<float>(round_to(storage, p)) : p; }
  /// What l = Σ p adds for one key: p, or the rounded p with rowsum_rounded_p.
  float rowsum_term(float p, float p_stored) const { return var.rowsum_rounded_p ? p_stored : p; }
  /// The LSE as returned: rounded to the storage dtype with lse_storage.
  float returned_lse(float lse) const {
    return var.lse_storage ? static_cast<float>(round_to(storage, lse)) : lse;
  }
  /// A result as stored: added to what the output held under Bug::output_not_zeroed.
  float result(const View &t, std::int64_t off, float x) const {
    return has(Bug::output_not_zeroed) ? acc.add(t.load(off), x) : x;
  }
};

/// Builds the context from q, k, v and params: ATTNCHECK_OK, or the status to return (message set).
int make_ctx(const Variant &var, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
             const DLTensor *v, Ctx *c) {
  std::string why;
  if (!params) return fail(ATTNCHECK_ERROR, "params is NULL");
  if (!c->q.bind(q, "q", kMaxRank, &why) || !c->k.bind(k, "k", kMaxRank, &why) || !c->v.bind(v, "v", kMaxRank, &why))
    return fail(ATTNCHECK_ERROR, why);
  for (View *t : {&c->q, &c->k, &c->v}) t->wrap_offsets_32(var.bug == Bug::offsets_int32);
  if (var.bug == Bug::v_zero_stride_as_compact && c->v.has_zero_stride()) c->v.assume_compact();
  if (!shape_of(*q, *k, *v, &c->s, &why)) return fail(ATTNCHECK_ERROR, why);
  if (c->q.dtype() != c->k.dtype() || c->q.dtype() != c->v.dtype())
    return fail(ATTNCHECK_ERROR, "q, k and v must share one dtype");
  if (params->mask != ATTNCHECK_MASK_NONE && params->mask != ATTNCHECK_MASK_CAUSAL)
    return fail(ATTNCHECK_UNSUPPORTED, "unknown mask " + std::to_string(params->mask));
  c->var = var;
  c->mask = static_cast<Mask>(params->mask);
  c->storage = c->q.dtype();
  c->acc = Arith{var.accumulate};
  const Dtype qk = var.accumulate_qk != Dtype::f32 ? var.accumulate_qk : var.accumulate;
  c->dot = Arith{var.bug == Bug::f16_dot_accumulation ? Dtype::f16 : qk};
  c->logit = var.bug == Bug::f16_dot_accumulation ? c->acc : c->dot;
  c->scale = c->acc.r(static_cast<float>(effective_scale(var.bug, params->scale, c->s)));
  if (var.bug == Bug::scale_cached_per_shape) c->scale = first_scale_of_shape(c->s, c->scale);
  c->score_mul = var.exp2_fold ? c->acc.mul(c->scale, kLog2e) : c->scale;
  c->key_end = c->s.Lk + (var.bug == Bug::read_past_last_key ? 1 : 0);
  const bool auto_splits = var.bug == Bug::split_combine_over_two;  // ⌈Lk / kSplitKeys⌉ splits (Lk ≥ 1)
  c->splits = auto_splits ? (c->s.Lk + kSplitKeys - 1) / kSplitKeys : var.splits;
  if (var.splits_by_occupancy) {
    const std::int64_t rows = c->s.B * c->s.Hq;
    c->splits = std::min(kMaxOccupancySplits, (kOccupancy + rows - 1) / rows);
  }
  c->split_len = (c->key_end + c->splits - 1) / c->splits;
  const std::uint32_t implemented = var.softcap ? std::uint32_t{ATTNCHECK_FEATURE_SOFTCAP} : 0u;
  if (params->features & ~implemented) return fail(ATTNCHECK_UNSUPPORTED, "unsupported features");
  if (params->features & ATTNCHECK_FEATURE_SOFTCAP) {
    const attncheck_args *a = params->args;
    if (!a || a->size < sizeof(attncheck_args)) return fail(ATTNCHECK_ERROR, "softcap needs params->args (ABI 1.2)");
    if (!(a->softcap > 0) || std::isinf(a->softcap)) return fail(ATTNCHECK_ERROR, "softcap must be finite and > 0");
    c->cap = c->acc.r(a->softcap);
  }
  return ATTNCHECK_OK;
}

/// Binds an output-like tensor and checks its shape and dtype.
bool bind_like(View *view, const DLTensor *t, const char *what, Dtype dt, std::initializer_list<std::int64_t> shape,
               std::string *why) {
  const int rank = static_cast<int>(shape.size());
  if (!view->bind(t, what, rank, why)) return false;
  if (view->dtype() != dt) return (*why = std::string(what) + " has the wrong dtype", false);
  if (!view->has_shape(shape)) {
    return (
        *why = std::string(what) + " must have shape " + dims_text(shape.begin(), rank) + "; got " + view->shape_text(),
        false);
  }
  return true;
}

/// Binds lse [B, Hq, Lq]: float32 or the storage dtype.
bool bind_lse(View *view, const DLTensor *t, Dtype storage, const Shape &s, std::string *why) {
  if (!view->bind(t, "lse", kLseRank, why)) return false;
  if (view->dtype() != Dtype::f32 && view->dtype() != storage)
    return (*why = "lse has the wrong dtype (float32 or the storage dtype)", false);
  if (!view->has_shape({s.B, s.Hq, s.Lq}))
    return (*why = "lse must have shape " + dims_text(std::array{s.B, s.Hq, s.Lq}.data(), kLseRank) + "; got " +
                   view->shape_text(),
            false);
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Forward.

/// Scratch of one call, sized once (no allocation per element).
struct Scratch {
  std::vector<float> qrow, u, blk, o, os;
  std::vector<float> part_acc, part_m, part_l, part_lse;
  std::vector<std::int64_t> part_seen;
  explicit Scratch(const Ctx &c)
      : qrow(static_cast<std::size_t>(c.s.D)),
        u(static_cast<std::size_t>(c.key_end)),
        blk(static_cast<std::size_t>(c.s.Dv)),
        o(static_cast<std::size_t>(c.s.Dv)),
        os(static_cast<std::size_t>(c.s.Dv)),
        part_acc(static_cast<std::size_t>(c.splits * c.s.Dv)),
        part_m(static_cast<std::size_t>(c.splits)),
        part_l(static_cast<std::size_t>(c.splits)),
        part_lse(static_cast<std::size_t>(c.splits)),
        part_seen(static_cast<std::size_t>(c.splits)) {}
};

/// Online softmax of row i over the keys [lo, hi) of one split, in blocks of key_block keys (all of them when
/// key_block = 0). State: running max m (score domain), l = Σ e^(u − m), acc = Σ p·v. For each block with a visible
/// key: m' = max(m, block max); when m' > m, l ← l·e^(m − m') and acc ← acc·e^(m − m'); then l += Σ_block p and
/// acc += Σ_block p·v with p = e^(u − m').
void run_split(const Ctx &c, Scratch &w, std::int64_t b, std::int64_t hk, std::int64_t i, std::int64_t lo,
               std::int64_t hi, std::size_t split) {
  const bool no_max = c.has(Bug::no_max_subtraction);
  const std::size_t Dv = static_cast<std::size_t>(c.s.Dv);
  float *acc = w.part_acc.data() + split * Dv;
  float m = no_max ? 0.f : -kInf, l = 0;
  std::int64_t seen = 0;
  std::fill(acc, acc + Dv, 0.f);
  const std::int64_t n = hi - lo;
  if (n > 0) {
    const std::int64_t bsz = c.var.key_block == 0 ? n : c.var.key_block;
    std::int64_t nblocks = (n + bsz - 1) / bsz;
    if ((c.has(Bug::drop_last_partial_block) || c.drop_tail) && n % bsz != 0) nblocks = n / bsz;
    for (std::int64_t t = 0; t < nblocks; ++t) {
      const std::int64_t blk = c.var.reverse_keys ? nblocks - 1 - t : t;
      const std::int64_t b0 = lo + blk * bsz, b1 = std::min(b0 + bsz, hi);
      float block_max = -kInf;
      std::int64_t count = 0;
      for (std::int64_t j = b0; j < b1; ++j) {
        if (!c.sees(i, j)) continue;
        const float u = c.score(w.qrow.data(), b, hk, j);
        w.u[static_cast<std::size_t>(j)] = u;
        block_max = std::max(block_max, u);
        ++count;
      }
      if (count == 0 && !c.var.dense_pv) continue;
      const float m_new = no_max ? 0.f : std::max(m, block_max);
      const bool rescale = seen > 0 && m_new != m;
      const float alpha = rescale ? c.expo(c.acc.sub(m, m_new)) : 1.f;
      float block_l = 0;
      std::fill(w.blk.begin(), w.blk.end(), 0.f);
      for (std::int64_t j = b0; j < b1; ++j) {
        const bool vis = c.sees(i, j);
        if (!vis && !c.var.dense_pv) continue;  // dense_pv: a masked key enters with p = 0
        const float p = vis ? c.expo(c.acc.sub(w.u[static_cast<std::size_t>(j)], m_new)) : 0.f;
        const float pv = c.operand(c.stored_p(p));
        block_l = c.acc.add(block_l, c.rowsum_term(p, pv));
        for (std::size_t x = 0; x < Dv; ++x)
          w.blk[x] = c.acc.add(w.blk[x],
                               c.acc.mul(pv, c.operand(c.key_elem(c.v, b, hk, j, static_cast<std::int64_t>(x)))));
      }
      if (rescale) {
        l = c.acc.mul(l, alpha);
        if (!c.has(Bug::no_rescale))
          for (std::size_t x = 0; x < Dv; ++x) acc[x] = c.acc.mul(acc[x], alpha);
      }
      l = c.acc.add(l, block_l);
      for (std::size_t x = 0; x < Dv; ++x) acc[x] = c.acc.add(acc[x], w.blk[x]);
      m = m_new;
      seen += count;
    }
  }
  w.part_m[split] = m;
  w.part_l[split] = l;
  w.part_seen[split] = seen;
}

/// o = acc / l (or acc · (1/l)) of a split; returns its LSE = m (as natural log) + log l.
float normalize(const Ctx &c, const Scratch &w, std::size_t split, float *o) {
  const std::size_t Dv = static_cast<std::size_t>(c.s.Dv);
  const float *acc = w.part_acc.data() + split * Dv;
  const float l = w.part_l[split];
  if (c.var.reciprocal_norm) {
    const float inv = c.acc.div(1.f, l);
    for (std::size_t x = 0; x < Dv; ++x) o[x] = c.acc.mul(acc[x], inv);
  } else {
    for (std::size_t x = 0; x < Dv; ++x) o[x] = c.acc.div(acc[x], l);
  }
  return c.acc.add(c.to_natural(w.part_m[split]), c.acc.log(l));
}

/// Row (b, h, i): fills w.o with O_i and returns LSE_i (natural log). Loads q_i into w.qrow.
float forward_row(const Ctx &c, Scratch &w, std::int64_t b, std::int64_t h, std::int64_t i) {
  const std::int64_t hk = c.kv_head(h);
  for (std::int64_t x = 0; x < c.s.D; ++x) w.qrow[static_cast<std::size_t>(x)] = c.q.get(b, h, i, x);
  const std::size_t nsplit = static_cast<std::size_t>(c.splits);
  std::int64_t seen = 0;
  for (std::size_t sp = 0; sp < nsplit; ++sp) {
    const std::int64_t lo = static_cast<std::int64_t>(sp) * c.split_len, hi = std::min(lo + c.split_len, c.key_end);
    run_split(c, w, b, hk, i, lo, hi, sp);
    seen += w.part_seen[sp];
  }
  if (seen == 0) {  // a row that sees no key: O = 0, LSE = −∞ (0/0 under the NaN bug)
    std::fill(w.o.begin(), w.o.end(), c.has(Bug::nan_fully_masked_rows) ? kNaN : 0.f);
    return -kInf;
  }
  if (nsplit == 1) return normalize(c, w, 0, w.o.data());
  // Split-KV combine: LSE = M + log Σ_s e^(LSE_s − M), O = Σ_s e^(LSE_s − LSE) O_s over the non-empty splits.
  // Bug::split_combine_over_two: M and Σ_s cover only the first two non-empty splits in combine order.
  auto split_at = [&](std::size_t t) { return c.var.reverse_keys ? nsplit - 1 - t : t; };
  std::size_t counted_end = nsplit;  // combine positions t < counted_end enter M and the sum
  if (c.has(Bug::split_combine_over_two))
    for (std::size_t t = 0, n = 0; t < nsplit; ++t)
      if (w.part_seen[split_at(t)] > 0 && ++n == 2) {
        counted_end = t + 1;
        break;
      }
  auto counted = [&](std::size_t sp) { return (c.var.reverse_keys ? nsplit - 1 - sp : sp) < counted_end; };
  float M = -kInf;
  for (std::size_t sp = 0; sp < nsplit; ++sp)
    if (w.part_seen[sp] > 0) {
      w.part_lse[sp] = normalize(c, w, sp, w.os.data());
      if (counted(sp)) M = std::max(M, w.part_lse[sp]);
    }
  float sum = 0;
  for (std::size_t t = 0; t < nsplit; ++t) {
    const std::size_t sp = split_at(t);
    if (w.part_seen[sp] > 0 && counted(sp)) sum = c.acc.add(sum, c.expn(c.acc.sub(w.part_lse[sp], M)));
  }
  const float lse = c.acc.add(M, c.acc.log(sum));
  std::fill(w.o.begin(), w.o.end(), 0.f);
  for (std::size_t t = 0; t < nsplit; ++t) {
    const std::size_t sp = split_at(t);
    if (w.part_seen[sp] == 0) continue;
    normalize(c, w, sp, w.os.data());
    const float weight = c.expn(c.acc.sub(w.part_lse[sp], lse));
    for (std::size_t x = 0; x < w.o.size(); ++x) w.o[x] = c.acc.add(w.o[x], c.acc.mul(weight, w.os[x]));
  }
  return lse;
}

/// Every row of the forward into o (and l when `with_lse`).
void forward_rows(const Ctx &c, View &o, View &l, bool with_lse) {
  const Shape &s = c.s;
  Scratch w(c);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const float row_lse = forward_row(c, w, b, h, i);
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          const std::int64_t off = o.offset(b, h, i, x);
          o.store(off, c.result(o, off, w.o[static_cast<std::size_t>(x)]));
        }
        if (with_lse) l.store(l.offset(b, h, i), c.returned_lse(row_lse));
      }
}

/// Bug::result_cached_by_address: the last forward call's inputs and what it wrote (one entry, over every thread).
struct LastCall {
  const void *q, *k, *v;
  std::uint64_t q_offset, k_offset, v_offset;
  Shape s;
  bool with_lse;
  std::vector<float> out, lse;  ///< row-major
  bool same_inputs(const LastCall &o) const {
    return q == o.q && k == o.k && v == o.v && q_offset == o.q_offset && k_offset == o.k_offset &&
           v_offset == o.v_offset && s == o.s && with_lse == o.with_lse;
  }
};
std::mutex g_last_call_mutex;
std::optional<LastCall> g_last_call;

LastCall record(LastCall key, const View &o, const View &l, const Shape &s) {
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        for (std::int64_t x = 0; x < s.Dv; ++x) key.out.push_back(o.load(o.offset(b, h, i, x)));
        if (key.with_lse) key.lse.push_back(l.load(l.offset(b, h, i)));
      }
  return key;
}

void replay(const LastCall &last, const View &o, const View &l, const Shape &s) {
  std::size_t n = 0, r = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        for (std::int64_t x = 0; x < s.Dv; ++x) o.store(o.offset(b, h, i, x), last.out[n++]);
        if (last.with_lse) l.store(l.offset(b, h, i), last.lse[r++]);
      }
}

int run_forward(const Variant &var, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                const DLTensor *v, DLTensor *out, DLTensor *lse) {
  Ctx c;
  if (const int st = make_ctx(var, params, q, k, v, &c); st != ATTNCHECK_OK) return st;
  const Shape &s = c.s;
  c.drop_tail = c.has(Bug::decode_drops_tail_block) && s.Lq == 1 && s.Lk > kDecodeLongRow;
  std::string why;
  View o, l;
  if (!bind_like(&o, out, "out", c.storage, {s.B, s.Hq, s.Lq, s.Dv}, &why)) return fail(ATTNCHECK_ERROR, why);
  if (lse && !bind_lse(&l, lse, c.storage, s, &why)) return fail(ATTNCHECK_ERROR, why);
  for (View *t : {&o, &l}) t->wrap_offsets_32(c.has(Bug::offsets_int32));
  if (c.has(Bug::lse_assumed_compact)) l.assume_compact();
  if (c.has(Bug::empty_kv_unwritten) && s.Lk == 0) return ATTNCHECK_OK;
  if (c.has(Bug::result_cached_by_address)) {
    const LastCall key{q->data, k->data, v->data, q->byte_offset, k->byte_offset, v->byte_offset, s, lse != nullptr};
    const std::lock_guard<std::mutex> lock(g_last_call_mutex);
    if (g_last_call && g_last_call->same_inputs(key)) {
      replay(*g_last_call, o, l, s);
      return ATTNCHECK_OK;
    }
    forward_rows(c, o, l, lse != nullptr);
    g_last_call = record(key, o, l, s);
    return ATTNCHECK_OK;
  }
  forward_rows(c, o, l, lse != nullptr);
  return ATTNCHECK_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// Backward.

/// Backward calls so far, over every variant and thread: picks nondeterministic_backward's dQ order.
std::atomic<std::uint64_t> g_backward_calls{0};

int run_backward(const Variant &var, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                 const DLTensor *v, const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                 DLTensor *dk, DLTensor *dv) {
  Ctx c;
  if (const int st = make_ctx(var, params, q, k, v, &c); st != ATTNCHECK_OK) return st;
  const Shape &s = c.s;
  std::string why;
  View o, l, go, gq, gk, gv;
  if (!bind_like(&o, out, "out", c.storage, {s.B, s.Hq, s.Lq, s.Dv}, &why) ||
      (lse && !bind_lse(&l, lse, c.storage, s, &why)) ||
      !bind_like(&go, dout, "dout", c.storage, {s.B, s.Hq, s.Lq, s.Dv}, &why) ||
      !bind_like(&gq, dq, "dq", c.storage, {s.B, s.Hq, s.Lq, s.D}, &why) ||
      !bind_like(&gk, dk, "dk", c.storage, {s.B, s.Hkv, s.Lk, s.D}, &why) ||
      !bind_like(&gv, dv, "dv", c.storage, {s.B, s.Hkv, s.Lk, s.Dv}, &why))
    return fail(ATTNCHECK_ERROR, why);
  for (View *t : {&o, &l, &go, &gq, &gk, &gv}) t->wrap_offsets_32(c.has(Bug::offsets_int32));
  if (c.has(Bug::lse_assumed_compact)) l.assume_compact();
  if (c.has(Bug::dout_assumed_compact)) go.assume_compact();
  if (c.has(Bug::empty_q_grads_unwritten) && s.Lq == 0) return ATTNCHECK_OK;

  Scratch w(c);
  const std::size_t D = static_cast<std::size_t>(s.D), Dv = static_cast<std::size_t>(s.Dv);
  const std::size_t nkeys = static_cast<std::size_t>(c.key_end);
  const std::size_t nk = static_cast<std::size_t>(s.Lk) * D, nv = static_cast<std::size_t>(s.Lk) * Dv;
  std::vector<float> qrow(D), dorow(Dv), orow(Dv), P(nkeys), dP(nkeys), dS(nkeys), chain(nkeys, 1.f), dq_acc(D);
  // dK, dV of the kv head: the sum over its query heads — of every term, or (grad_per_head) of each head's part,
  // accumulated in dk_part, dv_part and rounded to storage.
  const bool per_head = c.var.grad_per_head;
  std::vector<float> dk_acc(nk), dv_acc(nv), dk_part(per_head ? nk : 0), dv_part(per_head ? nv : 0);
  std::vector<char> live(nkeys);  // key j is seen by the row and not dropped
  std::vector<char> used(nkeys);  // key j enters the products: live, or any key with dense_pv (P = 0)
  auto key_at = [&](std::size_t t) { return c.var.reverse_keys ? nkeys - 1 - t : t; };
  // dQ's order over keys: key_at, or with nondeterministic_backward rotated by (call / 2) and reversed on odd calls.
  const std::uint64_t call = c.var.nondeterministic_backward ? g_backward_calls.fetch_add(1) : 0;
  auto dq_key_at = [&](std::size_t t) {
    if (!c.var.nondeterministic_backward) return key_at(t);
    const std::size_t r = (t + static_cast<std::size_t>((call / 2) % nkeys)) % nkeys;
    return (call % 2) ? nkeys - 1 - r : r;
  };
  const bool scale_dk = !c.has(Bug::dk_missing_scale);

  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t hk = 0; hk < s.Hkv; ++hk) {
      std::fill(dk_acc.begin(), dk_acc.end(), 0.f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.f);
      float *dk_sum = per_head ? dk_part.data() : dk_acc.data();  // where this head's terms go
      float *dv_sum = per_head ? dv_part.data() : dv_acc.data();
      for (std::int64_t h = 0; h < s.Hq; ++h) {
        if (c.kv_head(h) != hk) continue;
        if (per_head) {
          std::fill(dk_part.begin(), dk_part.end(), 0.f);
          std::fill(dv_part.begin(), dv_part.end(), 0.f);
        }
        for (std::int64_t i = 0; i < s.Lq; ++i) {
          std::int64_t n_live = 0;
          for (std::size_t j = 0; j < nkeys; ++j) {
            const auto jj = static_cast<std::int64_t>(j);
            live[j] = c.sees(i, jj) && c.kept(jj);
            used[j] = live[j] || c.var.dense_pv;
            n_live += live[j];
          }
          if (n_live == 0) {  // a row that sees no key: dQ = 0 (NaN under the NaN bug)
            const float fill = c.has(Bug::nan_fully_masked_rows) ? kNaN : 0.f;
            for (std::int64_t x = 0; x < s.D; ++x) {
              const std::int64_t off = gq.offset(b, h, i, x);
              gq.store(off, c.result(gq, off, fill));
            }
            continue;
          }
          const float row_lse = lse ? l.get(b, h, i) : c.returned_lse(forward_row(c, w, b, h, i));
          const float lse_u = c.from_natural(row_lse);
          for (std::size_t x = 0; x < D; ++x) qrow[x] = c.q.get(b, h, i, static_cast<std::int64_t>(x));
          for (std::size_t x = 0; x < Dv; ++x) {
            dorow[x] = go.get(b, h, i, static_cast<std::int64_t>(x));
            orow[x] = o.get(b, h, i, static_cast<std::int64_t>(x));
          }
          // P_ij = e^(u_j − LSE_i) recomputed from the given LSE (0 for a masked key under dense_pv); dP_ij = dO_i·v_j.
          for (std::size_t t = 0; t < nkeys; ++t) {
            const std::size_t j = key_at(t);
            if (!used[j]) continue;
            const auto jj = static_cast<std::int64_t>(j);
            P[j] = live[j] ? c.expo(c.acc.sub(c.score(qrow.data(), b, hk, jj, &chain[j]), lse_u)) : 0.f;
            float d = 0;
            for (std::size_t x = 0; x < Dv; ++x)
              d = c.acc.add(d, c.acc.mul(c.operand(dorow[x]),
                                         c.operand(c.key_elem(c.v, b, hk, jj, static_cast<std::int64_t>(x)))));
            dP[j] = d;
          }
          // D_i = Σ_c dO_ic O_ic, or Σ_j P_ij dP_ij.
          float Di = 0;
          if (c.var.d_from_p) {
            for (std::size_t t = 0; t < nkeys; ++t)
              if (const std::size_t j = key_at(t); used[j]) Di = c.acc.add(Di, c.acc.mul(P[j], dP[j]));
          } else {
            for (std::size_t x = 0; x < Dv; ++x) Di = c.acc.add(Di, c.acc.mul(dorow[x], orow[x]));
          }
          // dS_ij = P_ij (dP_ij − D_i) (as stored with round_p); dK_j += dS_ij q_i; dV_j += P_ij dO_i.
          for (std::size_t t = 0; t < nkeys; ++t) {
            const std::size_t j = key_at(t);
            if (!used[j]) continue;
            const auto jj = static_cast<std::int64_t>(j);
            float dSj =
                c.has(Bug::ds_without_d_term) ? c.acc.mul(P[j], dP[j]) : c.acc.mul(P[j], c.acc.sub(dP[j], Di));
            if (c.cap != 0) dSj = c.acc.mul(dSj, chain[j]);  // softcap's chain rule, before dS is rounded
            const float ps = c.operand(c.stored_p(P[j])), dss = c.operand(c.stored_p(dSj));
            dS[j] = dss;
            if (jj >= s.Lk) continue;  // the read-past key has no dK, dV
            for (std::size_t x = 0; x < D; ++x)
              dk_sum[j * D + x] = c.acc.add(dk_sum[j * D + x], c.acc.mul(dss, c.operand(qrow[x])));
            for (std::size_t x = 0; x < Dv; ++x)
              dv_sum[j * Dv + x] = c.acc.add(dv_sum[j * Dv + x], c.acc.mul(ps, c.operand(dorow[x])));
          }
          // dQ_i = scale Σ_j dS_ij k_j.
          std::fill(dq_acc.begin(), dq_acc.end(), 0.f);
          for (std::size_t t = 0; t < nkeys; ++t) {
            const std::size_t j = dq_key_at(t);
            if (!used[j]) continue;
            const auto jj = static_cast<std::int64_t>(j);
            for (std::size_t x = 0; x < D; ++x)
              dq_acc[x] =
                  c.acc.add(dq_acc[x],
                            c.acc.mul(dS[j], c.operand(c.key_elem(c.k, b, hk, jj, static_cast<std::int64_t>(x)))));
          }
          for (std::int64_t x = 0; x < s.D; ++x) {
            const std::int64_t off = gq.offset(b, h, i, x);
            gq.store(off, c.result(gq, off, c.acc.mul(c.scale, dq_acc[static_cast<std::size_t>(x)])));
          }
        }
        if (per_head) {  // this head's part of dK (scaled) and dV, rounded to storage, added in float32
          for (std::size_t x = 0; x < nk; ++x) {
            const float part = scale_dk ? c.acc.mul(c.scale, dk_part[x]) : dk_part[x];
            dk_acc[x] += static_cast<float>(round_to(c.storage, part));
          }
          for (std::size_t x = 0; x < nv; ++x) dv_acc[x] += static_cast<float>(round_to(c.storage, dv_part[x]));
        }
      }
      for (std::int64_t j = 0; j < s.Lk; ++j) {
        const std::size_t row = static_cast<std::size_t>(j);
        for (std::int64_t x = 0; x < s.D; ++x) {
          const float g = dk_acc[row * D + static_cast<std::size_t>(x)];
          const std::int64_t off = gk.offset(b, hk, j, x);
          gk.store(off, c.result(gk, off, scale_dk && !per_head ? c.acc.mul(c.scale, g) : g));
        }
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          const std::int64_t off = gv.offset(b, hk, j, x);
          gv.store(off, c.result(gv, off, dv_acc[row * Dv + static_cast<std::size_t>(x)]));
        }
      }
    }
  return ATTNCHECK_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// Registry: a fixed table of trampolines, slot I calling the kernel with the variant stored in slot I.

struct Slot {
  Variant variant;
  std::string name;
  attncheck_kernel kernel{};
};
struct Registry {
  std::mutex mutex;
  std::array<Slot, kMaxVariantKernels> slots;
  std::size_t used = 0;
};
Registry &registry() {
  static Registry r;
  return r;
}

/// Runs a kernel body, turning any exception into ATTNCHECK_ERROR (nothing may cross the C ABI).
template <class F>
int guarded(F &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(ATTNCHECK_ERROR, "out of memory");
  } catch (const std::exception &e) {
    return fail(ATTNCHECK_ERROR, e.what());
  }
}

template <std::size_t I>
int forward_slot(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                 DLTensor *lse) {
  return guarded([&] { return run_forward(registry().slots[I].variant, params, q, k, v, out, lse); });
}
template <std::size_t I>
int backward_slot(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                  DLTensor *dv) {
  return guarded(
      [&] { return run_backward(registry().slots[I].variant, params, q, k, v, out, lse, dout, dq, dk, dv); });
}

using ForwardFn = decltype(attncheck_kernel::forward);
using BackwardFn = decltype(attncheck_kernel::backward);
template <std::size_t... I>
constexpr std::array<ForwardFn, sizeof...(I)> forward_table(std::index_sequence<I...>) {
  return {{&forward_slot<I>...}};
}
template <std::size_t... I>
constexpr std::array<BackwardFn, sizeof...(I)> backward_table(std::index_sequence<I...>) {
  return {{&backward_slot<I>...}};
}
constexpr auto kForwardSlots = forward_table(std::make_index_sequence<kMaxVariantKernels>{});
constexpr auto kBackwardSlots = backward_table(std::make_index_sequence<kMaxVariantKernels>{});

/// "Approx", "ApproxF16", "ApproxBf16": a Tanh or Exp approximation in a variant's name (both enums list accurate,
/// approx, approx_f16, approx_bf16 in that order).
template <class E>
std::string approximation_suffix(E e) {
  switch (static_cast<int>(e)) {
    case 1: return "Approx";
    case 2: return "ApproxF16";
    case 3: return "ApproxBf16";
  }
  return "";
}

/// "online_b7_rev_split5_exp2_roundp_recip_dfromp_f32acc" (only the options that are on).
std::string config_name(const Variant &v) {
  std::string n = v.key_block == 0 ? "twopass" : "online_b" + std::to_string(v.key_block);
  if (v.reverse_keys) n += "_rev";
  if (v.splits != 1) n += "_split" + std::to_string(v.splits);
  if (v.exp2_fold) n += "_exp2";
  if (v.round_p) n += "_roundp";
  if (v.reciprocal_norm) n += "_recip";
  if (v.d_from_p) n += "_dfromp";
  n.append("_").append(dtype_name(v.accumulate)).append("acc");
  if (v.accumulate_qk != Dtype::f32) n.append("_qk").append(dtype_name(v.accumulate_qk)).append("acc");
  if (v.rowsum_rounded_p) n += "_rowsumP";
  if (v.grad_per_head) n += "_gradPerHead";
  if (v.lse_storage) n += "_lseS";
  if (v.causal_top_left) n += "_topleft";
  if (v.dense_pv) n += "_densePV";
  if (v.empty_rows_mean) n += "_emptyMean";
  if (v.nondeterministic_backward) n += "_nondetBwd";
  if (v.splits_by_occupancy) n += "_splitsByOccupancy";
  if (v.softcap) n += "_softcap";
  if (v.tanh != Tanh::accurate) n += "_tanh" + approximation_suffix(v.tanh);
  if (v.fp32_precision != Fp32Precision::ieee) n.append("_fp32").append(fp32_precision_name(v.fp32_precision));
  if (v.exp != Exp::accurate) n += "_exp" + approximation_suffix(v.exp);
  return n;
}

}  // namespace

std::string_view bug_name(Bug b) {
  switch (b) {
    case Bug::none: return "none";
    case Bug::missing_scale: return "missing_scale";
    case Bug::scale_1_over_d: return "scale_1_over_d";
    case Bug::scale_1_over_sqrt_dv: return "scale_1_over_sqrt_dv";
    case Bug::no_max_subtraction: return "no_max_subtraction";
    case Bug::no_rescale: return "no_rescale";
    case Bug::drop_last_partial_block: return "drop_last_partial_block";
    case Bug::causal_off_by_one: return "causal_off_by_one";
    case Bug::causal_top_left: return "causal_top_left";
    case Bug::f16_dot_accumulation: return "f16_dot_accumulation";
    case Bug::gqa_head_mod: return "gqa_head_mod";
    case Bug::nan_fully_masked_rows: return "nan_fully_masked_rows";
    case Bug::dk_missing_scale: return "dk_missing_scale";
    case Bug::ds_without_d_term: return "ds_without_d_term";
    case Bug::output_not_zeroed: return "output_not_zeroed";
    case Bug::read_past_last_key: return "read_past_last_key";
    case Bug::block_counter_8bit: return "block_counter_8bit";
    case Bug::split_combine_over_two: return "split_combine_over_two";
    case Bug::decode_drops_tail_block: return "decode_drops_tail_block";
    case Bug::offsets_int32: return "offsets_int32";
    case Bug::softcap_unscaled: return "softcap_unscaled";
    case Bug::softcap_no_chain: return "softcap_no_chain";
    case Bug::gqa_group_past_8: return "gqa_group_past_8";
    case Bug::kv_batch_wraps_2: return "kv_batch_wraps_2";
    case Bug::v_zero_stride_as_compact: return "v_zero_stride_as_compact";
    case Bug::lse_assumed_compact: return "lse_assumed_compact";
    case Bug::dout_assumed_compact: return "dout_assumed_compact";
    case Bug::empty_kv_unwritten: return "empty_kv_unwritten";
    case Bug::empty_q_grads_unwritten: return "empty_q_grads_unwritten";
    case Bug::scale_cached_per_shape: return "scale_cached_per_shape";
    case Bug::result_cached_by_address: return "result_cached_by_address";
    case Bug::scale_12_bits: return "scale_12_bits";
  }
  return "unknown";
}

std::vector<Bug> all_bugs() {
  return {Bug::missing_scale,
          Bug::scale_1_over_d,
          Bug::scale_1_over_sqrt_dv,
          Bug::no_max_subtraction,
          Bug::no_rescale,
          Bug::drop_last_partial_block,
          Bug::causal_off_by_one,
          Bug::causal_top_left,
          Bug::f16_dot_accumulation,
          Bug::gqa_head_mod,
          Bug::nan_fully_masked_rows,
          Bug::dk_missing_scale,
          Bug::ds_without_d_term,
          Bug::output_not_zeroed,
          Bug::read_past_last_key};
}

std::vector<Bug> scale_bugs() {
  return {Bug::block_counter_8bit, Bug::split_combine_over_two, Bug::decode_drops_tail_block, Bug::offsets_int32};
}

std::vector<Bug> softcap_bugs() { return {Bug::softcap_unscaled, Bug::softcap_no_chain}; }

std::vector<Bug> reach_bugs() { return {Bug::gqa_group_past_8, Bug::kv_batch_wraps_2}; }

std::vector<Bug> layout_bugs() {
  return {Bug::v_zero_stride_as_compact, Bug::lse_assumed_compact, Bug::dout_assumed_compact};
}

std::vector<Bug> empty_bugs() { return {Bug::empty_kv_unwritten, Bug::empty_q_grads_unwritten}; }

std::vector<Bug> history_bugs() { return {Bug::scale_cached_per_shape, Bug::result_cached_by_address}; }

std::vector<Bug> precision_bugs() { return {Bug::scale_12_bits}; }

Variant bug_variant(Bug b) {
  Variant v;
  v.bug = b;
  if (b == Bug::softcap_unscaled || b == Bug::softcap_no_chain) {
    v.softcap = true;
    v.tanh = Tanh::approx;
  }
  if (b == Bug::drop_last_partial_block || b == Bug::split_combine_over_two) v.key_block = kCanonicalBugBlock;
  if (b == Bug::block_counter_8bit) v.key_block = kCounterBugBlock;
  if (b == Bug::decode_drops_tail_block) v.key_block = kDecodeBugBlock;
  return v;
}

std::string Variant::name() const {
  if (bug == Bug::none) return config_name(*this);
  Variant canonical = bug_variant(bug);
  const std::string head = "bug:" + std::string(bug_name(bug));
  return canonical == *this ? head : head + "/" + config_name(*this);
}

const attncheck_kernel &variant_kernel(const Variant &v) {
  if (v.key_block < 0)
    throw std::invalid_argument("variant_kernel: key_block must be ≥ 0, got " + std::to_string(v.key_block));
  if (v.splits < 1) throw std::invalid_argument("variant_kernel: splits must be ≥ 1, got " + std::to_string(v.splits));
  Registry &r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (std::size_t i = 0; i < r.used; ++i)
    if (r.slots[i].variant == v) return r.slots[i].kernel;
  if (r.used == kMaxVariantKernels)
    throw std::length_error("variant_kernel: all " + std::to_string(kMaxVariantKernels) + " slots are in use");
  Slot &slot = r.slots[r.used];
  slot.variant = v;
  slot.name = v.name();
  slot.kernel = attncheck_kernel{ATTNCHECK_ABI_VERSION, slot.name.c_str(), kForwardSlots[r.used],
                                 kBackwardSlots[r.used], &last_error};
  ++r.used;
  return slot.kernel;
}

std::vector<Variant> correct_variants() {
  constexpr int kSmallBlock = 3, kOddBlock = 7, kTile = 16, kWideTile = 64;  // summation tiles
  constexpr int kTwoSplits = 2, kThreeSplits = 3, kFiveSplits = 5;           // split-KV chunk counts
  constexpr int kTwoPass = 0;
  using enum Dtype;
  return {
      {},  // per-key online softmax
      {.key_block = kSmallBlock},
      {.key_block = kOddBlock},
      {.key_block = kTile},
      {.key_block = kWideTile},
      {.key_block = kTwoPass},
      {.reverse_keys = true},
      {.key_block = kOddBlock, .reverse_keys = true},
      {.key_block = kTwoPass, .reverse_keys = true},
      {.splits = kTwoSplits},
      {.key_block = kSmallBlock, .splits = kFiveSplits},
      {.key_block = kTwoPass, .reverse_keys = true, .splits = kFiveSplits},
      {.exp2_fold = true},
      {.key_block = kTile, .exp2_fold = true},
      {.reciprocal_norm = true},
      {.d_from_p = true},
      {.round_p = true},
      // FlashAttention-2-like: wide tiles, exp2 folding, P rounded to storage, multiply by 1/l.
      {.key_block = kWideTile, .exp2_fold = true, .round_p = true, .reciprocal_norm = true},
      // FlashDecoding-like: split-KV of FlashAttention tiles.
      {.key_block = kTile, .splits = kFiveSplits, .exp2_fold = true, .round_p = true, .reciprocal_norm = true},
      {.key_block = kOddBlock, .reverse_keys = true, .splits = kThreeSplits, .d_from_p = true},
      // Low-precision accumulation.
      {.accumulate = f16},
      {.accumulate = f16, .key_block = kTile, .exp2_fold = true, .round_p = true},
      {.accumulate = f16, .key_block = kTwoPass, .splits = kTwoSplits},
      {.accumulate = bf16},
      {.accumulate = bf16, .key_block = kOddBlock, .reverse_keys = true, .d_from_p = true},
  };
}

namespace {
/// The base of the contract, operand and approximation variants: FlashAttention-like tiles, exp2 folding, P rounded.
Variant flash_like() {
  constexpr int kTile = 16;
  Variant base;
  base.key_block = kTile;
  base.exp2_fold = true;
  base.round_p = true;
  return base;
}
}  // namespace

std::vector<Variant> contract_variants() {
  std::vector<Variant> out(8, flash_like());
  out[0].accumulate_qk = Dtype::f16;
  out[1].rowsum_rounded_p = true;
  out[2].grad_per_head = true;
  out[3].lse_storage = true;
  out[4].causal_top_left = true;
  out[5].dense_pv = true;
  out[6].empty_rows_mean = true;
  out[7].nondeterministic_backward = true;
  return out;
}

std::vector<Variant> fp32_precision_variants() {
  std::vector<Variant> out;
  for (Fp32Precision f : {Fp32Precision::tf32, Fp32Precision::bf16, Fp32Precision::f16}) {
    out.push_back(flash_like());
    out.back().fp32_precision = f;
  }
  return out;
}

std::vector<Variant> approximation_variants() {
  Variant base = flash_like();
  base.softcap = true;
  std::vector<Variant> out(6, base);
  out[0].tanh = Tanh::approx;
  out[1].tanh = Tanh::approx_f16;
  out[2].tanh = Tanh::approx_bf16;
  out[3].exp = Exp::approx_f16;
  out[4].exp = Exp::approx_bf16;
  out[5].exp = Exp::approx;
  return out;
}

KernelContract contract_of(const Variant &v) {
  KernelContract c;
  c.accumulate_pv = v.accumulate;
  c.accumulate_qk = v.accumulate_qk != Dtype::f32 ? v.accumulate_qk : v.accumulate;
  if (v.rowsum_rounded_p) c.rowsum_rounded_p = Allow::yes;
  if (v.grad_per_head) c.grad_per_head = Allow::yes;
  if (v.lse_storage) c.lse = LseOutput::storage;
  if (v.causal_top_left) c.causal = CausalAlign::top_left;
  if (v.empty_rows_mean) c.empty_rows = EmptyRows::unspecified;
  if (v.softcap) c.features |= ATTNCHECK_FEATURE_SOFTCAP;
  c.tanh = v.tanh;
  c.exp = v.exp;
  c.fp32_precision = v.fp32_precision;
  // dense_pv: hidden-keys=finite and nondeterministic_backward: backward-determinism=within-bound are the defaults.
  return c;
}

}  // namespace attncheck::support
