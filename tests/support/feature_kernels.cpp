// The feature kernel family: one scalar implementation of the ABI 1.2 features (feature_kernels.h), with one planted
// bug chosen per kernel, exposed through one static trampoline per FeatureBug (an ABI function pointer carries no
// state).
#include "feature_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/dtype.h"
#include "attncheck/features.h"

namespace attncheck::support {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kRank = 4;  ///< q, k, v, out, dout, the gradients and the mask tensor are rank 4
/// FeatureBug::sink_twice_after_empty_split: the split-KV kernel's keys per split.
constexpr std::int64_t kSinkSplitKeys = 64;
/// FeatureBug::mask_backward_tile_nan: the backward's key tile, padded at the end when Lk_b ≡ kPaddedTileKeys / 2.
constexpr std::int64_t kPaddedTileKeys = 128;
/// FeatureBug::mask_backward_tile_nan: a row whose given LSE lies below this gets P = NaN on the padding keys.
constexpr float kPaddedTileNanLse = -1e4f;

// ---------------------------------------------------------------------------------------------------------------
// Errors: one message per thread, shared by every kernel's last_error. Validation throws a CallError, which the
// trampoline turns into the status (nothing crosses the C ABI).

thread_local std::string t_last_error;
const char *last_error() { return t_last_error.c_str(); }

struct CallError {
  int status;
  std::string message;
};
[[noreturn]] void error(std::string message) { throw CallError{ATTNCHECK_ERROR, std::move(message)}; }
[[noreturn]] void unsupported(std::string message) { throw CallError{ATTNCHECK_UNSUPPORTED, std::move(message)}; }

// ---------------------------------------------------------------------------------------------------------------
// Strided element access on a DLTensor of rank ≤ 4 (storage floats, int32, uint8).

enum class Kind : std::uint8_t { f32, f16, bf16, i32, u8 };
constexpr unsigned bit(Kind k) { return 1u << static_cast<unsigned>(k); }
constexpr unsigned kStorageKinds = bit(Kind::f32) | bit(Kind::f16) | bit(Kind::bf16);

bool kind_of(DLDataType t, Kind *out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) return (*out = Kind::f32, true);
  if (t.code == kDLFloat && t.bits == 16) return (*out = Kind::f16, true);
  if (t.code == kDLBfloat && t.bits == 16) return (*out = Kind::bf16, true);
  if (t.code == kDLInt && t.bits == 32) return (*out = Kind::i32, true);
  if (t.code == kDLUInt && t.bits == 8) return (*out = Kind::u8, true);
  return false;
}

int kind_size(Kind k) {
  switch (k) {
    case Kind::f32:
    case Kind::i32: return 4;
    case Kind::f16:
    case Kind::bf16: return 2;
    case Kind::u8: return 1;
  }
  return 1;
}

std::string dims_text(const std::vector<std::int64_t> &dims) {
  std::string s = "[";
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (d) s += ',';
    s += std::to_string(dims[d]);
  }
  s += ']';
  return s;
}

/// A bound tensor: element (a, b, c, d) at data + a·s₀ + b·s₁ + c·s₂ + d·s₃ elements (missing dims: stride 0).
class Tens {
 public:
  /// Binds `t` (kDLCPU, one of `kinds`, rank `rank`; NULL strides = compact row-major); throws a CallError naming
  /// `what` otherwise.
  void bind(const DLTensor *t, const char *what, int rank, unsigned kinds) {
    const std::string name(what);
    if (!t) error(name + " is NULL");
    if (t->device.device_type != kDLCPU) error(name + " is not on kDLCPU");
    if (!kind_of(t->dtype, &kind_) || !(kinds & bit(kind_))) error(name + " has an unsupported dtype");
    if (t->ndim != rank) error(name + " must have rank " + std::to_string(rank) + ", got " + std::to_string(t->ndim));
    rank_ = rank;
    std::int64_t numel = 1, compact = 1;
    for (int d = 0; d < rank; ++d) {
      if (t->shape[d] < 0) error(name + " has a negative dimension");
      shape_[static_cast<std::size_t>(d)] = t->shape[d];
      numel *= t->shape[d];
    }
    strides_.fill(0);
    for (int d = rank - 1; d >= 0; --d) {
      strides_[static_cast<std::size_t>(d)] = t->strides ? t->strides[d] : compact;
      compact *= t->shape[d];
    }
    if (numel > 0 && !t->data) error(name + " has NULL data");
    data_ = static_cast<std::byte *>(t->data) + t->byte_offset;
    bound_ = true;
  }
  /// FeatureBug::args_assumed_compact: the bound tensor read at compact strides (from its first element).
  void assume_compact() {
    std::int64_t compact = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      strides_[static_cast<std::size_t>(d)] = compact;
      compact *= shape_[static_cast<std::size_t>(d)];
    }
  }
  bool bound() const { return bound_; }
  Kind kind() const { return kind_; }
  std::int64_t dim(int d) const { return shape_[static_cast<std::size_t>(d)]; }
  std::vector<std::int64_t> shape() const { return {shape_.begin(), shape_.begin() + rank_}; }
  /// Throws unless the shape is `want`.
  void expect_shape(const char *what, const std::vector<std::int64_t> &want) const {
    if (shape() != want)
      error(std::string(what) + " must have shape " + dims_text(want) + "; got " + dims_text(shape()));
  }

  float get(std::int64_t a, std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) const {
    const std::byte *p = at(a, b, c, d);
    switch (kind_) {
      case Kind::f32: {
        float f = 0;
        std::memcpy(&f, p, sizeof f);
        return f;
      }
      case Kind::f16:
      case Kind::bf16: {
        std::uint16_t bits = 0;
        std::memcpy(&bits, p, sizeof bits);
        return kind_ == Kind::f16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
      }
      case Kind::i32: return static_cast<float>(geti(a, b, c, d));
      case Kind::u8:
        if (fp8_) return static_cast<float>(fp8_to_double(std::to_integer<std::uint8_t>(*p), *fp8_)) * factor_;
        return static_cast<float>(geti(a, b, c, d));
    }
    return 0;
  }
  /// A uint8 tensor of float8 bits in `format`: get() gives factor · the value (the factor rounded once, as a
  /// kernel that descales each element does).
  void as_fp8(Fp8 format, float factor) {
    fp8_ = format;
    factor_ = factor;
  }
  std::int64_t geti(std::int64_t a, std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) const {
    const std::byte *p = at(a, b, c, d);
    if (kind_ == Kind::i32) {
      std::int32_t x = 0;
      std::memcpy(&x, p, sizeof x);
      return x;
    }
    if (kind_ == Kind::u8) return static_cast<std::int64_t>(std::to_integer<std::uint8_t>(*p));
    return static_cast<std::int64_t>(get(a, b, c, d));
  }
  /// Stores x rounded to nearest even (a uint8 tensor stores x as an integer).
  void set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float x) const {
    std::byte *p = at(a, b, c, d);
    std::uint16_t bits = 0;
    switch (kind_) {
      case Kind::f32: std::memcpy(p, &x, sizeof x); return;
      case Kind::f16: bits = float_to_f16_bits(x); break;
      case Kind::bf16: bits = float_to_bf16_bits(x); break;
      case Kind::i32: {
        const auto n = static_cast<std::int32_t>(x);
        std::memcpy(p, &n, sizeof n);
        return;
      }
      case Kind::u8: *p = static_cast<std::byte>(static_cast<std::uint8_t>(x)); return;
    }
    std::memcpy(p, &bits, sizeof bits);
  }
  /// Sets every element to x.
  void fill(float x) const {
    for (std::int64_t a = 0; a < dim(0); ++a)
      for (std::int64_t b = 0; b < (rank_ > 1 ? dim(1) : 1); ++b)
        for (std::int64_t c = 0; c < (rank_ > 2 ? dim(2) : 1); ++c)
          for (std::int64_t d = 0; d < (rank_ > 3 ? dim(3) : 1); ++d) set(a, b, c, d, x);
  }

 private:
  std::byte *at(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    const std::int64_t off = a * strides_[0] + b * strides_[1] + c * strides_[2] + d * strides_[3];
    return data_ + off * kind_size(kind_);
  }
  std::byte *data_ = nullptr;
  Kind kind_ = Kind::f32;
  std::optional<Fp8> fp8_;
  float factor_ = 1;
  int rank_ = 0;
  bool bound_ = false;
  std::array<std::int64_t, kRank> shape_{1, 1, 1, 1}, strides_{0, 0, 0, 0};
};

// ---------------------------------------------------------------------------------------------------------------
// One call: the bug, the params and feature settings, and the geometry of the sequences.

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// What one (row, key) pair contributes: its logit s, the softcap chain factor ds/dt, and dropout's factor z.
struct Term {
  std::int64_t j = 0;
  float s = 0, chain = 1, z = 1;
};

struct Call {
  FeatureBug bug = FeatureBug::none;
  std::uint32_t features = 0;
  bool causal = false, varlen = false, paged = false;
  float scale = 1;
  Tens q, k, v;
  Kind storage = Kind::f32;
  std::int64_t B = 0, Hq = 0, Hkv = 0, D = 0, Dv = 0;
  /// Per sequence: rows, keys, and (varlen) the packed index of its first row and key.
  std::vector<std::int64_t> lq, lk, q0, k0;
  std::int64_t max_lq = 0, max_lk = 0;
  std::int64_t win_left = -1, win_right = -1;
  float softcap = 0;
  Tens alibi, sinks, mask, table;
  std::int64_t page_size = 0, num_pages = 0;
  float drop_p = 0;
  std::uint64_t seed = 0;

  bool on(std::uint32_t f) const { return (features & f) != 0; }
  bool has(FeatureBug b) const { return bug == b; }
  std::int64_t kv_head(std::int64_t h) const { return h / (Hq / Hkv); }

  /// Where row i of sequence b lives in q (out, lse, dout, dq): {dim 0, dim 2}.
  std::pair<std::int64_t, std::int64_t> row_at(std::int64_t b, std::int64_t i) const {
    return varlen ? std::pair{std::int64_t{0}, q0[static_cast<std::size_t>(b)] + i} : std::pair{b, i};
  }
  /// Where key j of sequence b lives in k, v (dk, dv): {dim 0, dim 2}; false when that row is not in the storage.
  bool key_at(std::int64_t b, std::int64_t j, std::int64_t *a, std::int64_t *r) const {
    if (paged) {
      const std::int64_t n = j / page_size;
      const std::int64_t page = has(FeatureBug::paged_logical_page) ? n : table.geti(b, n);
      if (page < 0 || page >= num_pages) return false;
      *a = page;
      *r = j % page_size;
      return true;
    }
    if (varlen) {
      *a = 0;
      *r = k0[static_cast<std::size_t>(b)] + j;
    } else {
      *a = b;
      *r = j;
    }
    return *r < k.dim(2);
  }
  /// Element x of key j of sequence b in k or v (kv head hk), 0 for a key not in the storage.
  float key_elem(const Tens &t, std::int64_t b, std::int64_t hk, std::int64_t j, std::int64_t x) const {
    std::int64_t a = 0, r = 0;
    return key_at(b, j, &a, &r) ? t.get(a, hk, r, x) : 0.f;
  }
  /// The keys row loops visit: Lk_b, one more under varlen_reads_across_boundary when the next key exists.
  std::int64_t key_end(std::int64_t b) const {
    const std::int64_t n = lk[static_cast<std::size_t>(b)];
    if (varlen && has(FeatureBug::varlen_reads_across_boundary) && k0[static_cast<std::size_t>(b)] + n < k.dim(2))
      return n + 1;
    return n;
  }
  /// e^{sink_h} enters the denominator: the sink's logit, −∞ without sinks.
  float sink(std::int64_t h) const { return on(ATTNCHECK_FEATURE_SINKS) ? sinks.get(h) : -kInf; }

  /// Dropout's factor of (b, h, i, j) as applied: 0 or 1/(1 − p) (keep(seed + 1) under the dropout bug), 1 without.
  float dropout(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (!on(ATTNCHECK_FEATURE_DROPOUT)) return 1;
    const std::uint64_t s = has(FeatureBug::dropout_mask_not_reproducible) ? seed + 1 : seed;
    return keeps(s, b, h, i, j) ? 1.f / (1.f - drop_p) : 0.f;
  }
  /// The decision of (b, h, i, j) under `seed`, drawn at the indices the dropout bugs share (the correct kernels':
  /// feature_dropout_keep at (b, h, i, j)).
  bool keeps(std::uint64_t s, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (has(FeatureBug::dropout_shared_across_batch)) b = 0;
    if (has(FeatureBug::dropout_shared_across_heads)) h = 0;
    if (has(FeatureBug::dropout_shared_across_rows)) i = 0;
    if (has(FeatureBug::dropout_shared_across_keys)) j = 0;
    return feature_dropout_keep(s, drop_p, b, h, i, j);
  }

  /// Whether row i of (b, h) sees key j, and its logit: fills *t and returns true when the key enters the row.
  bool term(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, const float *qrow, Term *t) const {
    const std::int64_t Lq_b = lq[static_cast<std::size_t>(b)], Lk_b = lk[static_cast<std::size_t>(b)];
    const std::int64_t ip = i + Lk_b - Lq_b;  // i', bottom-right aligned
    bool hidden = causal && j > ip;
    if (on(ATTNCHECK_FEATURE_WINDOW)) {
      if (win_left >= 0 && j < ip - win_left) hidden = true;
      const std::int64_t right = win_right + (has(FeatureBug::window_right_off_by_one) ? 1 : 0);
      if (win_right >= 0 && j > ip + right) hidden = true;
    }
    float additive = 0;
    if (on(ATTNCHECK_FEATURE_MASK) && i < mask.dim(2) && j < mask.dim(3)) {  // past its extent: visible (the bug's key)
      const float m = mask.get(mask.dim(0) == 1 ? 0 : b, mask.dim(1) == 1 ? 0 : h, i, j);
      if (mask.kind() == Kind::u8) {
        if (m == 0 || (has(FeatureBug::mask_byte_one) && m != 1)) hidden = true;
      } else if (m == -kInf) {
        hidden = true;
      } else {
        additive = m;
      }
    }
    const bool capped = on(ATTNCHECK_FEATURE_SOFTCAP);
    const bool mask_first = capped && has(FeatureBug::softcap_after_mask);  // hidden keys enter at −∞ inside tanh
    if (hidden && !mask_first) return false;
    float x = -kInf;  // scale·q·k
    if (!hidden) {
      const std::int64_t hk = kv_head(h);
      float dot = 0;
      for (std::int64_t c = 0; c < D; ++c) dot += qrow[c] * key_elem(k, b, hk, j, c);
      x = dot * scale;
    }
    float s = x;
    t->chain = 1;
    if (mask_first) {
      s = softcap * std::tanh((x + additive) / softcap);
      additive = 0;
    } else if (capped) {
      s = softcap * std::tanh(x / softcap);
    }
    if (capped) t->chain = 1 - (s / softcap) * (s / softcap);
    if (on(ATTNCHECK_FEATURE_ALIBI)) {
      const std::int64_t head = has(FeatureBug::alibi_reversed_slopes) ? Hq - 1 - h : h;
      s += -alibi.get(head) * static_cast<float>(ip > j ? ip - j : j - ip);
    }
    t->s = s + additive;
    t->j = j;
    t->z = dropout(b, h, i, j);
    return true;
  }

  /// The keys row i of (b, h) sees, with their logits.
  void terms(std::int64_t b, std::int64_t h, std::int64_t i, const float *qrow, std::vector<Term> &out) const {
    out.clear();
    Term t;
    for (std::int64_t j = 0; j < key_end(b); ++j)
      if (term(b, h, i, j, qrow, &t)) out.push_back(t);
  }

  /// Row i of (b, h): O into o (Dv values), returns the LSE. `ts` = terms(b, h, i). `in_forward`: the forward pass,
  /// where the forward-only bugs apply (backward's recomputation of a NULL lse is the correct one).
  float forward_row(std::int64_t b, std::int64_t h, const std::vector<Term> &ts, float *o,
                    bool in_forward = true) const {
    std::fill(o, o + Dv, 0.f);
    const float sk = sink(h);
    if (ts.empty()) return sk;  // O = 0; LSE = the sink, −∞ without one
    float m = sk;
    for (const Term &t : ts) m = std::max(m, t.s);
    float l = on(ATTNCHECK_FEATURE_SINKS) ? std::exp(sk - m) : 0.f;
    // FeatureBug::sink_twice_after_empty_split: the row's first split (keys 0 … kSinkSplitKeys − 1) holds no visible
    // key (ts is in key order) and adds the sink's term too, before the split that holds the row's first key.
    if (in_forward && has(FeatureBug::sink_twice_after_empty_split) && on(ATTNCHECK_FEATURE_SINKS) &&
        ts.front().j >= kSinkSplitKeys)
      l += std::exp(sk - m);
    const std::int64_t hk = kv_head(h);
    auto add = [&](const Term &t) {
      const float p = std::exp(t.s - m);
      l += p;
      const float pz = p * t.z;
      for (std::int64_t c = 0; c < Dv; ++c) o[c] += pz * key_elem(v, b, hk, t.j, c);
    };
    // FeatureBug::window_batch_variant: with a window and B ≥ 2, the keys accumulate from the last one down.
    if (in_forward && has(FeatureBug::window_batch_variant) && on(ATTNCHECK_FEATURE_WINDOW) && B >= 2)
      for (auto t = ts.rbegin(); t != ts.rend(); ++t) add(*t);
    else
      for (const Term &t : ts) add(t);
    for (std::int64_t c = 0; c < Dv; ++c) o[c] /= l;
    return m + std::log(l);
  }

  void load_row(const Tens &t, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t n, float *row) const {
    const auto [a, r] = row_at(b, i);
    for (std::int64_t c = 0; c < n; ++c) row[c] = t.get(a, h, r, c);
  }
};

/// Reads an int32 vector tensor [n].
std::vector<std::int64_t> read_ints(const DLTensor *t, const char *what, FeatureBug bug) {
  Tens view;
  view.bind(t, what, 1, bit(Kind::i32));
  if (bug == FeatureBug::args_assumed_compact) view.assume_compact();
  std::vector<std::int64_t> out(static_cast<std::size_t>(view.dim(0)));
  for (std::int64_t n = 0; n < view.dim(0); ++n) out[static_cast<std::size_t>(n)] = view.geti(n);
  return out;
}

/// Binds q, k, v and the features' arguments, and checks their shapes (throws a CallError).
void setup(Call &c, FeatureBug bug, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
           const DLTensor *v) {
  if (!params) error("params is NULL");
  if (params->mask != ATTNCHECK_MASK_NONE && params->mask != ATTNCHECK_MASK_CAUSAL)
    unsupported("unknown mask " + std::to_string(params->mask));
  c.bug = bug;
  c.causal = params->mask == ATTNCHECK_MASK_CAUSAL;
  c.scale = static_cast<float>(params->scale);
  c.features = params->features;
  if (c.features & ~kFeatureKernelFeatures)
    unsupported("unsupported features: " + feature_list(c.features & ~kFeatureKernelFeatures));
  const attncheck_args *a = params->args;
  if (c.features != 0) {
    if (!a) error("params->args is NULL while params->features is not 0");
    if (a->size < sizeof(attncheck_args)) error("params->args is older than ABI 1.2 (size too small)");
  }
  c.varlen = c.on(ATTNCHECK_FEATURE_VARLEN);
  c.paged = c.on(ATTNCHECK_FEATURE_PAGED);
  if (c.varlen && c.paged) unsupported("varlen and paged in one call");

  const bool fp8 = c.on(ATTNCHECK_FEATURE_FP8);
  const unsigned input_kinds = fp8 ? bit(Kind::u8) : kStorageKinds;
  c.q.bind(q, "q", kRank, input_kinds);
  c.k.bind(k, "k", kRank, input_kinds);
  c.v.bind(v, "v", kRank, input_kinds);
  if (c.q.kind() != c.k.kind() || c.q.kind() != c.v.kind()) error("q, k and v must share one dtype");
  c.storage = c.q.kind();
  if (fp8) {
    if (a->fp8_format != 0 && a->fp8_format != 1) error("fp8_format must be 0 (e4m3fn) or 1 (e5m2)");
    const Fp8 format = static_cast<Fp8>(a->fp8_format);
    // The planted bug reads the stored values as they are: every descale taken as 1.
    const bool descale = bug != FeatureBug::fp8_without_descale;
    c.q.as_fp8(format, descale ? a->descale_q : 1.f);
    c.k.as_fp8(format, descale ? a->descale_k : 1.f);
    c.v.as_fp8(format, descale ? a->descale_v : 1.f);
  }
  c.Hq = c.q.dim(1);
  c.Hkv = c.k.dim(1);
  c.D = c.q.dim(3);
  c.Dv = c.v.dim(3);
  if (c.k.dim(3) != c.D) error("q and k must have the same D");
  if (c.v.dim(0) != c.k.dim(0) || c.v.dim(1) != c.Hkv || c.v.dim(2) != c.k.dim(2))
    error("v must have the leading dims of k");
  if (c.Hkv < 1 || c.Hq % c.Hkv != 0) error("Hq must be a multiple of Hkv >= 1");

  if (c.varlen) {
    const std::vector<std::int64_t> cq = read_ints(a->cu_seqlens_q, "cu_seqlens_q", bug);
    const std::vector<std::int64_t> ck = read_ints(a->cu_seqlens_k, "cu_seqlens_k", bug);
    if (cq.empty() || cq.size() != ck.size()) error("cu_seqlens_q and cu_seqlens_k must both have nseq + 1 entries");
    if (c.q.dim(0) != 1 || c.k.dim(0) != 1) error("varlen: q, k, v must have batch dim 1");
    if (cq[0] != 0 || ck[0] != 0) error("cu_seqlens must start at 0");
    c.B = static_cast<std::int64_t>(cq.size()) - 1;
    for (std::size_t b = 0; b + 1 < cq.size(); ++b) {
      const std::int64_t nq = cq[b + 1] - cq[b], nk = ck[b + 1] - ck[b];
      if (nq < 0 || nk < 0) error("cu_seqlens must be nondecreasing");
      if (nq > a->max_seqlen_q || nk > a->max_seqlen_k) error("a sequence is longer than max_seqlen");
      c.lq.push_back(nq);
      c.lk.push_back(nk);
      c.q0.push_back(cq[b]);
      c.k0.push_back(ck[b]);
    }
    if (cq.back() > c.q.dim(2) || ck.back() > c.k.dim(2)) error("cu_seqlens run past the packed q or k");
  } else if (c.paged) {
    c.page_size = a->page_size;
    c.num_pages = c.k.dim(0);
    if (c.page_size < 1 || c.k.dim(2) != c.page_size) error("paged: k, v must be [num_pages, Hkv, page_size, D]");
    c.B = c.q.dim(0);
    c.table.bind(a->block_table, "block_table", 2, bit(Kind::i32));
    if (bug == FeatureBug::args_assumed_compact) c.table.assume_compact();
    if (c.table.dim(0) != c.B) error("block_table must have B rows");
    const std::vector<std::int64_t> used = read_ints(a->seqused_k, "seqused_k", bug);
    if (static_cast<std::int64_t>(used.size()) != c.B) error("seqused_k must have B entries");
    for (std::int64_t b = 0; b < c.B; ++b) {
      const std::int64_t n = used[static_cast<std::size_t>(b)];
      if (n < 0 || n > c.table.dim(1) * c.page_size) error("seqused_k exceeds the block table");
      for (std::int64_t pg = 0; pg * c.page_size < n; ++pg)
        if (c.table.geti(b, pg) < 0 || c.table.geti(b, pg) >= c.num_pages) error("block_table names a missing page");
      c.lq.push_back(c.q.dim(2));
      c.lk.push_back(n);
    }
  } else {
    c.B = c.q.dim(0);
    if (c.k.dim(0) != c.B) error("q and k must have the same batch dim");
    c.lq.assign(static_cast<std::size_t>(c.B), c.q.dim(2));
    c.lk.assign(static_cast<std::size_t>(c.B), c.k.dim(2));
  }
  for (std::int64_t n : c.lq) c.max_lq = std::max(c.max_lq, n);
  for (std::int64_t n : c.lk) c.max_lk = std::max(c.max_lk, n);

  if (c.on(ATTNCHECK_FEATURE_WINDOW)) {
    c.win_left = a->window_left < 0 ? -1 : a->window_left;
    c.win_right = a->window_right < 0 ? -1 : a->window_right;
  }
  if (c.on(ATTNCHECK_FEATURE_SOFTCAP)) {
    c.softcap = a->softcap;
    if (!(c.softcap > 0) || std::isinf(c.softcap)) error("softcap must be finite and > 0");
  }
  if (c.on(ATTNCHECK_FEATURE_ALIBI)) {
    c.alibi.bind(a->alibi_slopes, "alibi_slopes", 1, bit(Kind::f32));
    if (bug == FeatureBug::args_assumed_compact) c.alibi.assume_compact();
    c.alibi.expect_shape("alibi_slopes", {c.Hq});
  }
  if (c.on(ATTNCHECK_FEATURE_SINKS)) {
    c.sinks.bind(a->sinks, "sinks", 1, bit(Kind::f32));
    if (bug == FeatureBug::args_assumed_compact) c.sinks.assume_compact();
    c.sinks.expect_shape("sinks", {c.Hq});
  }
  if (c.on(ATTNCHECK_FEATURE_MASK)) {
    c.mask.bind(a->attn_mask, "attn_mask", kRank, bit(Kind::u8) | bit(Kind::f32));
    if (bug == FeatureBug::args_assumed_compact) c.mask.assume_compact();
    if ((c.mask.dim(0) != 1 && c.mask.dim(0) != c.B) || (c.mask.dim(1) != 1 && c.mask.dim(1) != c.Hq) ||
        c.mask.dim(2) < c.max_lq || c.mask.dim(3) < c.max_lk)
      error("attn_mask must be [1|B, 1|Hq, Lq, Lk]; got " + dims_text(c.mask.shape()));
  }
  if (c.on(ATTNCHECK_FEATURE_DROPOUT)) {
    c.drop_p = a->dropout_p;
    c.seed = a->dropout_seed;
    if (!(c.drop_p >= 0 && c.drop_p <= 1)) error("dropout_p must lie in [0, 1]");
  }
}

/// The dims a row-indexed output (out, lse, dout, dq) has: q's leading dims with the last `last` (none for lse).
std::vector<std::int64_t> rows_shape(const Call &c, std::int64_t last) {
  std::vector<std::int64_t> s{c.q.dim(0), c.Hq, c.q.dim(2)};
  if (last >= 0) s.push_back(last);
  return s;
}

void bind_storage(Tens &t, const DLTensor *dl, const char *what, const Call &c,
                  const std::vector<std::int64_t> &shape) {
  t.bind(dl, what, static_cast<int>(shape.size()), bit(c.storage));
  t.expect_shape(what, shape);
}
void bind_lse(Tens &t, const DLTensor *dl, const Call &c) {
  t.bind(dl, "lse", 3, bit(Kind::f32) | bit(c.storage));
  t.expect_shape("lse", rows_shape(c, -1));
}

// ---------------------------------------------------------------------------------------------------------------
// Forward and backward.

int run_forward(FeatureBug bug, const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                DLTensor *out, DLTensor *lse) {
  Call c;
  setup(c, bug, params, q, k, v);
  Tens o, l, drop;
  if (c.on(ATTNCHECK_FEATURE_FP8)) {  // out (and lse) in the run's dtype: whatever out is
    Kind k_out = Kind::f32;
    if (!out || !kind_of(out->dtype, &k_out) || !(kStorageKinds & bit(k_out))) error("out must be f32, f16 or bf16");
    c.storage = k_out;
  }
  bind_storage(o, out, "out", c, rows_shape(c, c.Dv));
  if (lse) bind_lse(l, lse, c);
  if (c.on(ATTNCHECK_FEATURE_DROPOUT) && params->args->dropout_mask) {
    drop.bind(params->args->dropout_mask, "dropout_mask", kRank, bit(Kind::u8));
    if (drop.dim(0) != c.B || drop.dim(1) != c.Hq || drop.dim(2) < c.max_lq || drop.dim(3) < c.max_lk)
      error("dropout_mask must be [B, Hq, Lq, Lk]; got " + dims_text(drop.shape()));
  }
  // Rows no sequence owns (a packed q longer than the sequences) keep O = 0, LSE = −∞.
  o.fill(0);
  if (lse) l.fill(-kInf);
  // The mask written: keep(seed, b, h, i, j) for every element (the correct kernels apply exactly this one).
  if (drop.bound())
    for (std::int64_t b = 0; b < drop.dim(0); ++b)
      for (std::int64_t h = 0; h < drop.dim(1); ++h)
        for (std::int64_t i = 0; i < drop.dim(2); ++i)
          for (std::int64_t j = 0; j < drop.dim(3); ++j)
            drop.set(b, h, i, j, c.keeps(c.seed, b, h, i, j) ? 1.f : 0.f);
  std::vector<float> qrow(static_cast<std::size_t>(c.D)), orow(static_cast<std::size_t>(c.Dv));
  std::vector<Term> ts;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.Hq; ++h)
      for (std::int64_t i = 0; i < c.lq[static_cast<std::size_t>(b)]; ++i) {
        c.load_row(c.q, b, h, i, c.D, qrow.data());
        c.terms(b, h, i, qrow.data(), ts);
        const float row_lse = c.forward_row(b, h, ts, orow.data());
        const auto [ra, rr] = c.row_at(b, i);
        for (std::int64_t x = 0; x < c.Dv; ++x) o.set(ra, h, rr, x, orow[static_cast<std::size_t>(x)]);
        if (lse) l.set(ra, h, rr, 0, row_lse);
      }
  return ATTNCHECK_OK;
}

int run_backward(FeatureBug bug, const attncheck_params *params, const DLTensor *q, const DLTensor *k,
                 const DLTensor *v, const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                 DLTensor *dk, DLTensor *dv) {
  if (params && (params->features & ATTNCHECK_FEATURE_PAGED)) unsupported("a paged KV cache has no backward in the ABI");
  if (params && (params->features & ATTNCHECK_FEATURE_FP8)) unsupported("FP8 inputs have no backward in the ABI");
  Call c;
  setup(c, bug, params, q, k, v);
  Tens o, l, go, gq, gk, gv;
  bind_storage(o, out, "out", c, rows_shape(c, c.Dv));
  if (lse) bind_lse(l, lse, c);
  bind_storage(go, dout, "dout", c, rows_shape(c, c.Dv));
  bind_storage(gq, dq, "dq", c, rows_shape(c, c.D));
  bind_storage(gk, dk, "dk", c, c.k.shape());
  bind_storage(gv, dv, "dv", c, c.v.shape());
  for (const Tens *t : {&gq, &gk, &gv}) t->fill(0);  // rows and keys no sequence owns, rows that see no key

  const std::size_t D = static_cast<std::size_t>(c.D), Dv = static_cast<std::size_t>(c.Dv);
  std::vector<float> qrow(D), dorow(Dv), orow(Dv), scratch(Dv), dq_acc(D), dk_acc, dv_acc;
  std::vector<Term> ts;
  for (std::int64_t b = 0; b < c.B; ++b) {
    const std::int64_t Lk_b = c.lk[static_cast<std::size_t>(b)];
    const bool padded_tile_nan = c.has(FeatureBug::mask_backward_tile_nan) && c.on(ATTNCHECK_FEATURE_MASK) &&
                                 Lk_b % kPaddedTileKeys == kPaddedTileKeys / 2;
    for (std::int64_t hk = 0; hk < c.Hkv; ++hk) {
      dk_acc.assign(static_cast<std::size_t>(Lk_b) * D, 0.f);
      dv_acc.assign(static_cast<std::size_t>(Lk_b) * Dv, 0.f);
      for (std::int64_t h = 0; h < c.Hq; ++h) {
        if (c.kv_head(h) != hk) continue;
        for (std::int64_t i = 0; i < c.lq[static_cast<std::size_t>(b)]; ++i) {
          c.load_row(c.q, b, h, i, c.D, qrow.data());
          c.terms(b, h, i, qrow.data(), ts);
          const auto [ra, rr] = c.row_at(b, i);
          const float row_lse = lse ? l.get(ra, h, rr) : c.forward_row(b, h, ts, scratch.data(), false);
          // FeatureBug::mask_backward_tile_nan: the last 128-key tile is padded with keys of score −∞ whose
          // P = e^(−∞ − LSE) is NaN for an LSE of −∞ (or one below kPaddedTileNanLse): the row's dQ is NaN.
          const bool nan_dq = padded_tile_nan && row_lse < kPaddedTileNanLse;
          if (nan_dq)
            for (std::size_t x = 0; x < D; ++x)
              gq.set(ra, h, rr, static_cast<std::int64_t>(x), std::numeric_limits<float>::quiet_NaN());
          if (ts.empty()) continue;  // dQ = 0 (NaN under the bug above)
          c.load_row(go, b, h, i, c.Dv, dorow.data());
          c.load_row(o, b, h, i, c.Dv, orow.data());
          float Di = 0;  // D_i = dO_i·O_i
          for (std::size_t x = 0; x < Dv; ++x) Di += dorow[x] * orow[x];
          std::fill(dq_acc.begin(), dq_acc.end(), 0.f);
          for (const Term &t : ts) {
            const float P = std::exp(t.s - row_lse);
            float dP = 0;  // dO_i·v_j, times z
            for (std::size_t x = 0; x < Dv; ++x)
              dP += dorow[x] * c.key_elem(c.v, b, hk, t.j, static_cast<std::int64_t>(x));
            dP *= t.z;
            const float dS = P * (dP - Di) * t.chain;
            for (std::size_t x = 0; x < D; ++x)
              dq_acc[x] += dS * c.key_elem(c.k, b, hk, t.j, static_cast<std::int64_t>(x));
            if (t.j >= Lk_b) continue;  // the next sequence's key (varlen bug): no dK, dV stored for it
            const std::size_t j = static_cast<std::size_t>(t.j);
            for (std::size_t x = 0; x < D; ++x) dk_acc[j * D + x] += dS * qrow[x];
            const float Pz = P * t.z;
            for (std::size_t x = 0; x < Dv; ++x) dv_acc[j * Dv + x] += Pz * dorow[x];
          }
          if (nan_dq) continue;  // mask_backward_tile_nan: dQ stays NaN (dK, dV as the correct kernel's)
          for (std::size_t x = 0; x < D; ++x) gq.set(ra, h, rr, static_cast<std::int64_t>(x), c.scale * dq_acc[x]);
        }
      }
      for (std::int64_t j = 0; j < Lk_b; ++j) {
        std::int64_t ka = 0, kr = 0;
        if (!c.key_at(b, j, &ka, &kr)) continue;
        const std::size_t jj = static_cast<std::size_t>(j);
        for (std::size_t x = 0; x < D; ++x)
          gk.set(ka, hk, kr, static_cast<std::int64_t>(x), c.scale * dk_acc[jj * D + x]);
        for (std::size_t x = 0; x < Dv; ++x) gv.set(ka, hk, kr, static_cast<std::int64_t>(x), dv_acc[jj * Dv + x]);
      }
    }
  }
  return ATTNCHECK_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// The kernels: one trampoline pair per FeatureBug.

template <class F>
int guarded(F &&body) {
  try {
    return body();
  } catch (const CallError &e) {
    t_last_error = e.message;
    return e.status;
  } catch (const std::bad_alloc &) {
    t_last_error = "out of memory";
    return ATTNCHECK_ERROR;
  } catch (const std::exception &e) {
    t_last_error = e.what();
    return ATTNCHECK_ERROR;
  }
}

template <FeatureBug B>
int forward_of(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
               DLTensor *lse) {
  return guarded([&] { return run_forward(B, params, q, k, v, out, lse); });
}
template <FeatureBug B>
int backward_of(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                DLTensor *dv) {
  return guarded([&] { return run_backward(B, params, q, k, v, out, lse, dout, dq, dk, dv); });
}
template <FeatureBug B>
constexpr attncheck_kernel kernel_of(const char *name) {
  return attncheck_kernel{ATTNCHECK_ABI_VERSION, name, &forward_of<B>, &backward_of<B>, &last_error};
}

constexpr std::size_t kKernelCount = 17;  ///< FeatureBug::none and its sixteen bugs
constexpr std::array<attncheck_kernel, kKernelCount> kKernels = {{
    kernel_of<FeatureBug::none>("features_correct"),
    kernel_of<FeatureBug::window_right_off_by_one>("features_window_right_off_by_one"),
    kernel_of<FeatureBug::softcap_after_mask>("features_softcap_after_mask"),
    kernel_of<FeatureBug::alibi_reversed_slopes>("features_alibi_reversed_slopes"),
    kernel_of<FeatureBug::varlen_reads_across_boundary>("features_varlen_reads_across_boundary"),
    kernel_of<FeatureBug::paged_logical_page>("features_paged_logical_page"),
    kernel_of<FeatureBug::dropout_mask_not_reproducible>("features_dropout_mask_not_reproducible"),
    kernel_of<FeatureBug::fp8_without_descale>("features_fp8_without_descale"),
    kernel_of<FeatureBug::dropout_shared_across_heads>("features_dropout_shared_across_heads"),
    kernel_of<FeatureBug::dropout_shared_across_batch>("features_dropout_shared_across_batch"),
    kernel_of<FeatureBug::dropout_shared_across_rows>("features_dropout_shared_across_rows"),
    kernel_of<FeatureBug::dropout_shared_across_keys>("features_dropout_shared_across_keys"),
    kernel_of<FeatureBug::mask_byte_one>("features_mask_byte_one"),
    kernel_of<FeatureBug::args_assumed_compact>("features_args_assumed_compact"),
    kernel_of<FeatureBug::window_batch_variant>("features_window_batch_variant"),
    kernel_of<FeatureBug::mask_backward_tile_nan>("features_mask_backward_tile_nan"),
    kernel_of<FeatureBug::sink_twice_after_empty_split>("features_sink_twice_after_empty_split"),
}};

}  // namespace

std::string_view feature_bug_name(FeatureBug bug) {
  switch (bug) {
    case FeatureBug::none: return "none";
    case FeatureBug::window_right_off_by_one: return "window_right_off_by_one";
    case FeatureBug::softcap_after_mask: return "softcap_after_mask";
    case FeatureBug::alibi_reversed_slopes: return "alibi_reversed_slopes";
    case FeatureBug::varlen_reads_across_boundary: return "varlen_reads_across_boundary";
    case FeatureBug::paged_logical_page: return "paged_logical_page";
    case FeatureBug::dropout_mask_not_reproducible: return "dropout_mask_not_reproducible";
    case FeatureBug::fp8_without_descale: return "fp8_without_descale";
    case FeatureBug::dropout_shared_across_heads: return "dropout_shared_across_heads";
    case FeatureBug::dropout_shared_across_batch: return "dropout_shared_across_batch";
    case FeatureBug::dropout_shared_across_rows: return "dropout_shared_across_rows";
    case FeatureBug::dropout_shared_across_keys: return "dropout_shared_across_keys";
    case FeatureBug::mask_byte_one: return "mask_byte_one";
    case FeatureBug::args_assumed_compact: return "args_assumed_compact";
    case FeatureBug::window_batch_variant: return "window_batch_variant";
    case FeatureBug::mask_backward_tile_nan: return "mask_backward_tile_nan";
    case FeatureBug::sink_twice_after_empty_split: return "sink_twice_after_empty_split";
  }
  return "unknown";
}

std::vector<FeatureBug> all_feature_bugs() {
  return {FeatureBug::window_right_off_by_one, FeatureBug::softcap_after_mask,
          FeatureBug::alibi_reversed_slopes,   FeatureBug::varlen_reads_across_boundary,
          FeatureBug::paged_logical_page,      FeatureBug::dropout_mask_not_reproducible,
          FeatureBug::fp8_without_descale,     FeatureBug::dropout_shared_across_heads,
          FeatureBug::dropout_shared_across_batch, FeatureBug::dropout_shared_across_rows,
          FeatureBug::dropout_shared_across_keys,  FeatureBug::mask_byte_one,
          FeatureBug::args_assumed_compact,    FeatureBug::window_batch_variant,
          FeatureBug::mask_backward_tile_nan,  FeatureBug::sink_twice_after_empty_split};
}

const attncheck_kernel &feature_kernel(FeatureBug bug) {
  const auto n = static_cast<std::size_t>(bug);
  return kKernels.at(n);
}

std::string feature_contract(FeatureBug) {
  return "features=" + feature_list(kFeatureKernelFeatures);
}

bool feature_dropout_keep(std::uint64_t seed, float p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  std::uint64_t x = splitmix64(seed);
  for (std::int64_t n : {b, h, i, j}) x = splitmix64(x ^ static_cast<std::uint64_t>(n));
  const float u = static_cast<float>(x >> 40) * 0x1p-24f;  // 24 bits: exact in float32
  return u >= p;
}

}  // namespace attncheck::support
