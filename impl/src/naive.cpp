// "naive": the textbook algorithm, float32 only. For each (sequence, head) it materializes the Lq_b × Lk_b score
// matrix S = scale·Q Kᵀ — softcapped, plus ALiBi and an additive mask, −∞ where a key is hidden (causal, window,
// mask tensor, lengths) — takes a max-shifted softmax row by row (a sink adds e^sink to the denominator) and
// multiplies by V, dropout scaling kept probabilities by 1/(1 − p) and zeroing the others. Backward recomputes
// P = exp(S − LSE) from the forward's LSE and applies the chain rule with D_i = Σ_c dO_ic O_ic and the dropout
// factors Z (0 or 1/(1 − p)):
//   dV = (P ⊙ Z)ᵀ dO,  dP = Z ⊙ dO Vᵀ,  dS = P ⊙ (dP − D) (softcap: ⊙ (1 − tanh²)),  dQ = scale·dS K,
//   dK = scale·dSᵀ Q.
// It implements every ABI 1.2 feature but FP8 (a paged cache forward only). Single-threaded and without online
// softmax on purpose: it is the simple baseline "flash" is compared with. Each dot product is summed in order over
// d; the operands are first widened into contiguous rows (K and V transposed), so that the loops vectorize over keys
// without changing a rounding.
#include "common.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <new>
#include <vector>

namespace attncheck::builtin {

namespace {
constexpr const char *kName = "naive";
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
/// Every feature (check_backward refuses PAGED and FP8, which have no backward in the ABI).
constexpr std::uint32_t kFeatures = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI |
                                    ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_VARLEN |
                                    ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_DROPOUT | ATTNCHECK_FEATURE_FP8;

int refuse_dtype(Dtype dt) {
  return fail(ATTNCHECK_UNSUPPORTED,
              std::string(kName) + ": float32 only; got " + std::string(dtype_name(dt)) + " (use \"flash\")");
}

int report(const std::exception &e) { return fail(ATTNCHECK_ERROR, std::string(kName) + ": " + e.what()); }

/// splitmix64's finalizer: a bijection of 64-bit words whose output bits each depend on every input bit.
std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Dropout's factor for (sequence b, head h, row i, key j): 1/(1 − p) when kept, 0 when dropped; 1 without dropout.
/// Kept iff 24 uniform bits of a counter-based hash of the seed and the logical index, as a fraction, are ≥ p: a
/// function of (seed, b, h, i, j) only, so forward and backward (and any layout) agree.
class Dropout {
 public:
  explicit Dropout(const CallFeatures &f)
      : on_(f.has(ATTNCHECK_FEATURE_DROPOUT)), p_(f.dropout_p), seed_(f.dropout_seed),
        kept_(on_ ? 1.0f / (1.0f - f.dropout_p) : 1.0f) {}
  bool on() const { return on_; }
  bool keeps(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    std::uint64_t x = mix64(seed_ ^ 0x5851f42d4c957f2dULL);
    for (const std::int64_t n : {b, h, i, j}) x = mix64(x + 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(n));
    return static_cast<float>(x >> 40) * 0x1p-24f >= p_;
  }
  float factor(bool keep) const { return keep ? kept_ : 0.0f; }

 private:
  bool on_;
  float p_;
  std::uint64_t seed_;
  float kept_;
};

/// Where the rows and keys of sequence b lie: row i at [qb, ·, q0 + i] of q, out, lse, dout, dq; key j at
/// [kb[j], ·, kr[j]] of k, v, dk, dv.
struct Seq {
  std::int64_t b, Lq, Lk, qb, q0;
  std::vector<std::int64_t> kb, kr;
  Seq(const Operands &o, std::int64_t seq)
      : b(seq), Lq(o.seq_rows(seq)), Lk(o.seq_keys(seq)), qb(o.row_batch(seq)), q0(o.row_offset(seq)),
        kb(static_cast<std::size_t>(Lk)), kr(static_cast<std::size_t>(Lk)) {
    for (std::int64_t j = 0; j < Lk; ++j) o.key_at(seq, j, &kb[static_cast<std::size_t>(j)], &kr[static_cast<std::size_t>(j)]);
  }
};

/// The largest float whose std::exp is +0 (found once: exp is monotone). Below it the result is 0 without calling
/// libm, whose underflow path (it sets errno) costs several times a normal call — every far-off key of a long row.
float exp_zero_below() {
  static const float edge = [] {
    // Bisection over the bit patterns of negative floats (ordered by magnitude): exp(−87) is a normal float,
    // exp(−200) is 0.
    const auto bits = [](float x) { return std::bit_cast<std::uint32_t>(x); };
    std::uint32_t nonzero = bits(-87.0f), zero = bits(-200.0f);
    while (zero - nonzero > 1) {
      const std::uint32_t mid = nonzero + (zero - nonzero) / 2;
      (std::exp(std::bit_cast<float>(mid)) == 0.0f ? zero : nonzero) = mid;
    }
    return std::bit_cast<float>(zero);
  }();
  return edge;
}

/// std::exp(x), bit for bit.
inline float exp_or_zero(float x, float zero_edge) { return x <= zero_edge ? 0.0f : std::exp(x); }

/// max_j row[j], a fold of std::max from −∞ (which passes over NaN), in kMaxLanes independent lanes so that it runs
/// at vector speed: the same value, but that of equal maxima +0 and −0 either may come out, and no result of the
/// row depends on which (it is the shift of exp's argument and the addend of log l).
float row_max(const float *row, std::int64_t n) {
  constexpr std::int64_t kMaxLanes = 8;
  float lane[kMaxLanes];
  std::fill(lane, lane + kMaxLanes, kMinusInf);
  std::int64_t j = 0;
  for (; j + kMaxLanes <= n; j += kMaxLanes)
    for (std::int64_t k = 0; k < kMaxLanes; ++k) lane[k] = std::max(lane[k], row[j + k]);
  float m = kMinusInf;
  for (; j < n; ++j) m = std::max(m, row[j]);
  for (const float x : lane) m = std::max(m, x);
  return m;
}

/// The row's softmax, unnormalized, key by key in order: returns l = Σ_j e^{row[j] − m} and adds e^{row[j] − m}·z·v_j
/// to acc for the keys kept (keep null: every key, z = 1; else z = `kept`). V: [n, Dv]. Not inlined: in its own frame
/// l stays in a register (inlined, it went through memory on every key).
[[gnu::noinline]] float accumulate_row(const float *row, std::int64_t n, float m, float zero_edge,
                                       const std::uint8_t *keep, float kept, const float *V, std::int64_t Dv,
                                       float *acc) {
  float l = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    const float p = exp_or_zero(row[j] - m, zero_edge);  // exp(−∞) = 0 for hidden keys
    if (p == 0.0f) continue;  // l + 0 = l: l ≥ +0 from its start, p ≥ +0
    l += p;
    if (!keep || keep[j]) {
      const float pz = keep ? p * kept : p;
      const float *vrow = V + j * Dv;
      for (std::int64_t c = 0; c < Dv; ++c) acc[c] += pz * vrow[c];
    }
  }
  return l;
}

/// Rows [0, n) of a tensor read through `at(r, d)`, widened to float and laid out contiguously, [n, width]: the
/// arithmetic is the same as reading each element where it lies, without the strides and dtype in the inner loops.
template <class At>
void gather_rows(std::vector<float> &dst, std::int64_t n, std::int64_t width, At at) {
  dst.resize(static_cast<std::size_t>(n * width));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t d = 0; d < width; ++d) dst[static_cast<std::size_t>(r * width + d)] = at(r, d);
}

/// Element d of key j of sequence `sq` in kv head hk of K or V.
float key_elem(const View &t, const Seq &sq, std::int64_t hk, std::int64_t j, std::int64_t d) {
  return t.get(sq.kb[static_cast<std::size_t>(j)], hk, sq.kr[static_cast<std::size_t>(j)], d);
}

/// K or V of sequence `sq`, kv head hk: key j's row j of [Lk, width].
void gather_keys(std::vector<float> &dst, const View &t, const Seq &sq, std::int64_t hk, std::int64_t width) {
  gather_rows(dst, sq.Lk, width, [&](std::int64_t j, std::int64_t d) { return key_elem(t, sq, hk, j, d); });
}

/// The same, transposed: [width, Lk], key j in column j.
void gather_keys_t(std::vector<float> &dst, const View &t, const Seq &sq, std::int64_t hk, std::int64_t width) {
  gather_rows(dst, width, sq.Lk, [&](std::int64_t d, std::int64_t j) { return key_elem(t, sq, hk, j, d); });
}

/// Keys per block of dots(): their partial sums stay in the L1 cache.
constexpr std::int64_t kDotBlock = 256;

/// out[j] = Σ_d x[d]·Yt[d·n + j] for keys j in [begin, end), each summed in the order d = 0, 1, …, width − 1 from
/// 0 — the rounding of a dot product taken element by element, with keys rather than d in the vector lanes.
void dots(const float *x, const float *Yt, std::int64_t width, std::int64_t n, std::int64_t begin, std::int64_t end,
          float *out) {
  for (std::int64_t j0 = begin; j0 < end; j0 += kDotBlock) {
    const std::int64_t j1 = std::min(end, j0 + kDotBlock);
    std::fill(out + j0, out + j1, 0.0f);
    for (std::int64_t d = 0; d < width; ++d) {
      const float xd = x[d];
      const float *y = Yt + d * n;
      for (std::int64_t j = j0; j < j1; ++j) out[j] += xd * y[j];
    }
  }
}

/// S[i·Lk + j] = the logit of row i, key j of sequence `sq` in query head h: scale·q_i·k_j, softcapped (its tanh in
/// T[i·Lk + j] when T is given), plus ALiBi and the additive mask; −∞ where the key is hidden. Kt: gather_keys_t of
/// h's kv head (one per group of query heads); Qh: scratch, left holding h's queries [Lq, D].
void scores(const Operands &o, const Seq &sq, std::int64_t h, float scale, std::vector<float> &S,
            std::vector<float> *T, std::vector<float> &Qh, const std::vector<float> &Kt) {
  const CallFeatures &f = o.f;
  const std::int64_t D = o.shape.D;
  gather_rows(Qh, sq.Lq, D, [&](std::int64_t i, std::int64_t d) { return o.q.get(sq.qb, h, sq.q0 + i, d); });
  for (std::int64_t i = 0; i < sq.Lq; ++i) {
    const KeyRange r = key_range(o.mask, f.window_left, f.window_right, sq.Lq, sq.Lk, i);
    float *row = S.data() + i * sq.Lk;  // q_i·k_j first, for the keys in range
    dots(Qh.data() + i * D, Kt.data(), D, sq.Lk, r.begin, r.end, row);
    for (std::int64_t j = 0; j < sq.Lk; ++j) {
      bool visible = j >= r.begin && j < r.end;
      float bias = 0.0f;  // the additive mask's value
      if (visible && f.mask) {
        const std::int64_t at = sq.b * f.mask_s[0] + h * f.mask_s[1] + i * f.mask_s[2] + j * f.mask_s[3];
        if (f.mask_boolean) {
          visible = static_cast<std::uint8_t>(f.mask[at]) != 0;
        } else {
          bias = load_elem(f.mask, Dtype::f32, at);
          visible = bias != kMinusInf;
        }
      }
      const float dot = visible ? row[j] : 0.0f;
      float x = visible ? scale * dot : kMinusInf;
      if (visible && f.softcap > 0) {
        const float t = std::tanh(x / f.softcap);
        x = f.softcap * t;
        if (T) (*T)[static_cast<std::size_t>(i * sq.Lk + j)] = t;
      }
      if (visible && !f.alibi.empty())
        x -= f.alibi[static_cast<std::size_t>(h)] * static_cast<float>(std::llabs(i + sq.Lk - sq.Lq - j));
      if (visible && f.mask && !f.mask_boolean) x += bias;
      row[j] = x;
    }
  }
}
}  // namespace

int naive_forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                  DLTensor *out, DLTensor *lse) try {
  Operands o;
  if (int st = check_forward(kName, kFeatures, params, q, k, v, out, lse, &o)) return st;
  if (o.dtype != Dtype::f32) return refuse_dtype(o.dtype);
  const Shape &s = o.shape;
  const CallFeatures &f = o.f;
  const float scale = static_cast<float>(o.scale);
  const Dropout drop(f);
  const float zero_edge = exp_zero_below();
  std::vector<float> S, acc(static_cast<std::size_t>(s.Dv)), Qh, Kt, Vh;
  std::vector<std::uint8_t> keep;
  for (std::int64_t b = 0; b < o.seqs(); ++b) {
    const Seq sq(o, b);
    S.resize(static_cast<std::size_t>(sq.Lq * sq.Lk));
    keep.resize(static_cast<std::size_t>(sq.Lk));
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t hk = s.kv_head(h);
      if (h == 0 || hk != s.kv_head(h - 1)) {  // a group's query heads are consecutive: its K and V once
        gather_keys_t(Kt, o.k, sq, hk, s.D);
        gather_keys(Vh, o.v, sq, hk, s.Dv);
      }
      scores(o, sq, h, scale, S, nullptr, Qh, Kt);
      for (std::int64_t i = 0; i < sq.Lq; ++i) {
        const std::int64_t qi = sq.q0 + i;
        if (drop.on())
          for (std::int64_t j = 0; j < sq.Lk; ++j) {
            keep[static_cast<std::size_t>(j)] = drop.keeps(b, h, i, j);
            if (f.dropout_mask)
              f.dropout_mask[b * f.dropout_s[0] + h * f.dropout_s[1] + i * f.dropout_s[2] + j * f.dropout_s[3]] =
                  keep[static_cast<std::size_t>(j)];
          }
        float *row = S.data() + i * sq.Lk;  // S may be empty: a sequence without keys (UBSan)
        float m = row_max(row, sq.Lk);
        if (m == kMinusInf) {  // the row sees no key: O = 0, LSE = −∞ (or the sink, the denominator's one term)
          for (std::int64_t c = 0; c < s.Dv; ++c) o.out.set(sq.qb, h, qi, c, 0.0f);
          if (o.lse.data) o.lse.at(sq.qb, h, qi) = f.sinks.empty() ? kMinusInf : f.sinks[static_cast<std::size_t>(h)];
          continue;
        }
        if (!f.sinks.empty()) m = std::max(m, f.sinks[static_cast<std::size_t>(h)]);
        std::fill(acc.begin(), acc.end(), 0.0f);
        float l = accumulate_row(row, sq.Lk, m, zero_edge, drop.on() ? keep.data() : nullptr, drop.factor(true),
                                 Vh.data(), s.Dv, acc.data());
        if (!f.sinks.empty()) l += std::exp(f.sinks[static_cast<std::size_t>(h)] - m);
        for (std::int64_t c = 0; c < s.Dv; ++c) o.out.set(sq.qb, h, qi, c, acc[static_cast<std::size_t>(c)] / l);
        if (o.lse.data) o.lse.at(sq.qb, h, qi) = m + std::log(l);
      }
    }
  }
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

int naive_backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv) try {
  Operands o;
  if (int st = check_backward(kName, kFeatures, params, q, k, v, out, lse, dout, dq, dk, dv, &o)) return st;
  if (o.dtype != Dtype::f32) return refuse_dtype(o.dtype);
  const Shape &s = o.shape;
  const bool softcap = o.f.softcap > 0;
  const float scale = static_cast<float>(o.scale);
  const Dropout drop(o.f);
  const float zero_edge = exp_zero_below();
  const auto at = [](std::vector<float> &a, std::int64_t r, std::int64_t ld, std::int64_t c) -> float & {
    return a[static_cast<std::size_t>(r * ld + c)];
  };
  std::vector<float> S, dS, T, Z, dk_acc, dv_acc, dP, Qh, Kt, Kh, Vt, Oh, dOh;
  std::vector<float> dq_row(static_cast<std::size_t>(s.D));
  for (std::int64_t b = 0; b < o.seqs(); ++b) {
    const Seq sq(o, b);
    const std::size_t n = static_cast<std::size_t>(sq.Lq * sq.Lk);
    S.resize(n), dS.resize(n), T.assign(softcap ? n : 0, 0.0f), Z.resize(drop.on() ? n : 0);
    dk_acc.resize(static_cast<std::size_t>(sq.Lk * s.D)), dv_acc.resize(static_cast<std::size_t>(sq.Lk * s.Dv));
    dP.resize(static_cast<std::size_t>(sq.Lk));
    for (std::int64_t hk = 0; hk < s.Hkv; ++hk) {
      gather_keys(Kh, o.k, sq, hk, s.D);
      gather_keys_t(Kt, o.k, sq, hk, s.D);
      gather_keys_t(Vt, o.v, sq, hk, s.Dv);
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      // dK, dV of a kv head sum over the group of query heads that read it.
      for (std::int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h) {
        scores(o, sq, h, scale, S, softcap ? &T : nullptr, Qh, Kt);
        gather_rows(Oh, sq.Lq, s.Dv, [&](std::int64_t i, std::int64_t c) { return o.out.get(sq.qb, h, sq.q0 + i, c); });
        gather_rows(dOh, sq.Lq, s.Dv,
                    [&](std::int64_t i, std::int64_t c) { return o.dout.get(sq.qb, h, sq.q0 + i, c); });
        for (std::int64_t i = 0; i < sq.Lq; ++i) {
          const std::int64_t qi = sq.q0 + i;
          const float lse_i = o.lse.at(sq.qb, h, qi);
          const float *dorow = dOh.data() + i * s.Dv, *orow = Oh.data() + i * s.Dv;
          float D_i = 0.0f;
          for (std::int64_t c = 0; c < s.Dv; ++c) D_i += dorow[c] * orow[c];
          dots(dorow, Vt.data(), s.Dv, sq.Lk, 0, sq.Lk, dP.data());  // dP_ij = dO_i·v_j
          for (std::int64_t j = 0; j < sq.Lk; ++j) {
            // P = exp(S − LSE); 0 for a hidden key and for a row that sees none (LSE = −∞).
            float &p = at(S, i, sq.Lk, j);
            p = (p == kMinusInf || lse_i == kMinusInf) ? 0.0f : exp_or_zero(p - lse_i, zero_edge);
            float dp = dP[static_cast<std::size_t>(j)];
            if (drop.on()) {
              const float z = drop.factor(drop.keeps(b, h, i, j));
              at(Z, i, sq.Lk, j) = z;
              dp *= z;
            }
            float ds = p * (dp - D_i);
            if (softcap) {
              const float t = at(T, i, sq.Lk, j);
              ds *= 1.0f - t * t;  // d(c·tanh(x/c))/dx
            }
            at(dS, i, sq.Lk, j) = ds;
          }
        }
        for (std::int64_t i = 0; i < sq.Lq; ++i) {
          const std::int64_t qi = sq.q0 + i;
          const float *qrow = Qh.data() + i * s.D, *dorow = dOh.data() + i * s.Dv;
          std::fill(dq_row.begin(), dq_row.end(), 0.0f);
          for (std::int64_t j = 0; j < sq.Lk; ++j) {
            const float p = at(S, i, sq.Lk, j), ds = at(dS, i, sq.Lk, j);
            const float pz = drop.on() ? p * at(Z, i, sq.Lk, j) : p;
            const float *krow = Kh.data() + j * s.D;
            for (std::int64_t d = 0; d < s.D; ++d) {
              dq_row[static_cast<std::size_t>(d)] += ds * krow[d];
              at(dk_acc, j, s.D, d) += ds * qrow[d];
            }
            for (std::int64_t c = 0; c < s.Dv; ++c) at(dv_acc, j, s.Dv, c) += pz * dorow[c];
          }
          for (std::int64_t d = 0; d < s.D; ++d)
            o.dq.set(sq.qb, h, qi, d, scale * dq_row[static_cast<std::size_t>(d)]);
        }
      }
      for (std::int64_t j = 0; j < sq.Lk; ++j) {
        const std::int64_t kb = sq.kb[static_cast<std::size_t>(j)], kr = sq.kr[static_cast<std::size_t>(j)];
        for (std::int64_t d = 0; d < s.D; ++d) o.dk.set(kb, hk, kr, d, scale * at(dk_acc, j, s.D, d));
        for (std::int64_t c = 0; c < s.Dv; ++c) o.dv.set(kb, hk, kr, c, at(dv_acc, j, s.Dv, c));
      }
    }
  }
  return ATTNCHECK_OK;
} catch (const std::exception &e) {
  return report(e);
}

}  // namespace attncheck::builtin
