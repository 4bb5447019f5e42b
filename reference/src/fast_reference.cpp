// The fast reference in double with a running-error bound per element: forward (O, LSE) and backward (dQ, dK, dV)
// (fast_reference.h; SPEC.md §5.1).
#include "attncheck/fast_reference.h"

#include "attncheck/products.h"
#include "attncheck/reference.hpp"  // detail::checked_shape: the same validation as reference_forward

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace attncheck {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double u = kDoubleU;
constexpr double eta = kDoubleEta;
// |scale| and softcap within [2⁻²⁰⁰, 2²⁰⁰]: every nonzero product of inputs (a multiple of 2⁻³³⁰ even with FP8
// descales) times them stays a normal double, so the γ model of the logits needs no underflow term.
constexpr double kMinFactor = 0x1p-200;
constexpr double kMaxFactor = 0x1p200;
// expm1(θ) ≤ θ(1 + kExpm1Quadratic·θ) for 0 ≤ θ ≤ kMaxLogSpaceError (Taylor: Σ_{k≥2} θ^{k−2}/k! ≤ 0.595 at θ = 1/2).
constexpr double kExpm1Quadratic = 0.6;
// Softcap's derivative ĝ = 4a/(1 + a)², a = exp(−2|ŷ|): exp's relative error enters three times (a, and twice through
// 1 + a), the sum, the square and the quotient round once each (×4 is exact): θ_g = 2e_y + 3δ_exp + kSech2Roundings·u.
constexpr double kSech2Roundings = 5;  // 3 roundings, each ≤ u/(1 − u) in log space, with margin
// ĝ's absolute error near underflow (|ŷ| > 354: a subnormal): 4·(exp's U·η) + the quotient's and product's η.
constexpr double kSech2AbsEtas = 4 * kLibmExpUlps + 2;
// The backward's elementwise bounds (ΔP, E_dS, E_dS', W, dV's weights) each add kEtaSlack·η: the underflow of the
// value's product and of the bound's own products (≤ η/2 each; at most 8 per bound), which the relative inflation
// kEpsInflation does not cover.
constexpr double kEtaSlack = 4;

/// γ_n = n·u/(1 − n·u) (rounded computation: kEpsInflation covers it); +∞ when n·u ≥ 1.
double gamma(double n) { return n * u >= 1 ? kInf : n * u / (1 - n * u); }

/// A bound on expm1(θ) for 0 ≤ θ ≤ kMaxLogSpaceError, without a libm call.
double expm1_upper(double theta) { return theta * (1 + kExpm1Quadratic * theta); }

/// Δp ≥ |p̂ − e^{d}| for p̂ = exp(d̂), |d − d̂| ≤ θ (d̂ = `d`, θ including exp's relative error δ_exp), exp within
/// kLibmExpUlps (its absolute part `exp_abs`). For θ ≤ kMaxLogSpaceError: (p̂ + Uη)·ρ + Uη + η, ρ ≥ expm1(θ) (the
/// last η: the product's underflow), and θ counts in `theta_max`. Above it the weight is only bounded by
/// 0 ≤ e^{d} ≤ e^{d̂ + θ}: Δp = p̂ + an upper bound of e^{d̂ + θ} (a key far below the max, e.g. by a large negative
/// additive mask, then costs nothing rather than the row).
double weight_error(double p, double d, double theta, double exp_abs, double &theta_max) {
  if (theta <= kMaxLogSpaceError) {
    theta_max = std::max(theta_max, theta);
    return (p + exp_abs) * expm1_upper(theta) + exp_abs + eta;
  }
  constexpr double kMargin = 0x1p-40;  // ≥ the rounding of the argument's sum and exp's relative error (8u)
  const double y = d + theta * (1 + kMargin) + 2 * u * std::fabs(d);
  return p + std::exp(y) * (1 + kMargin) + kLibmExpUlps * eta;
}

/// Values of t times `factor`, row-major; false when one is not finite or the product is not exact in double.
bool load(const Tensor &t, double factor, std::vector<double> &out) {
  // Row-major contiguous storage (the usual case) is read straight; any other layout through to_vector.
  bool contiguous = true;
  std::int64_t stride = 1;
  for (int d = t.rank() - 1; d >= 0; --d) {
    if (t.dim(d) != 1 && t.strides()[static_cast<std::size_t>(d)] != stride) contiguous = false;
    stride *= t.dim(d);
  }
  if (contiguous) {
    out.resize(static_cast<std::size_t>(t.numel()));
    const std::int64_t base = t.offset();
    for (std::size_t n = 0; n < out.size(); ++n) out[n] = t.get_storage(base + static_cast<std::int64_t>(n));
  } else {
    out = t.to_vector();
  }
  for (double &x : out) {
    if (!std::isfinite(x)) return false;
    if (factor != 1) {
      const double y = x * factor;
      if (std::fma(x, factor, -y) != 0 || !std::isfinite(y)) return false;
      x = y;
    }
  }
  return true;
}

bool factor_ok(double x) { return x == 0 || (std::fabs(x) >= kMinFactor && std::fabs(x) <= kMaxFactor); }

/// ε as delivered: inflated (kEpsInflation), scaled by the test knob, and +∞ for NaN or ∞ (or a value that is not
/// finite: an intermediate overflowed).
double finish(double e, double eps_scale, double value = 0) {
  const double r = e * kEpsInflation * eps_scale;
  return r >= 0 && r < kInf && std::isfinite(value) ? r : kInf;
}

/// C = op(A)·op(B), or C += op(A)·op(B) with `accumulate`, into the rows of a row-major C of leading dimension ldc.
template <class A, class B>
void add_product(double *C, std::int64_t ldc, const A &a, bool ta, const B &b, bool tb, bool accumulate = true) {
  const std::int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols(), n = tb ? b.rows() : b.cols();
  gemm(fast_simd_path(), m, n, k, {a.data(), a.cols(), ta}, {b.data(), b.cols(), tb}, C, ldc, accumulate);
}

/// C = op(A)·op(B) for Eigen row-major operands on the fast SIMD path (products.h): any summation order, as every
/// bound here allows. C is resized.
template <class A, class B>
void product(RowMatrix &C, const A &a, bool ta, const B &b, bool tb) {
  C.resize(ta ? a.cols() : a.rows(), tb ? b.rows() : b.cols());
  add_product(C.data(), C.cols(), a, ta, b, tb, false);
}

/// Row 2-norms of a row-major array of rows of `cols` values.
std::vector<double> row_norms(const std::vector<double> &xs, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(cols);
  std::vector<double> out(n == 0 ? 0 : xs.size() / n);
  for (std::size_t r = 0; r < out.size(); ++r) {
    double t = 0;
    for (std::size_t d = 0; d < n; ++d) t += xs[r * n + d] * xs[r * n + d];
    out[r] = std::sqrt(t);
  }
  return out;
}

/// The inputs in double (FP8: descale·stored), with the row norms of q and k.
struct Inputs {
  std::vector<double> q, k, v, dout, qn, kn;
};

/// Why the fast path does not cover p ("" when it does; `what` names the caller); loads p's inputs into `in`.
/// `terms`: the largest count the inflation factor must cover (kMaxFastTerms).
std::string check_and_load(const Problem &p, const char *what, std::int64_t terms, Inputs &in) {
  const Features &f = p.features;
  const std::string w = what;
  if (!factor_ok(p.params.scale)) return w + ": |scale| is outside {0} and [2^-200, 2^200]";
  if (f.softcap > 0 && !factor_ok(f.softcap)) return w + ": softcap is outside [2^-200, 2^200]";
  if (terms > kMaxFastTerms) return w + ": D + Lk (backward: D + Dv + Lk + G·Lq) exceeds kMaxFastTerms";
  if (!load(p.q, descaled_q(f), in.q) || !load(p.k, descaled_k(f), in.k) || !load(p.v, descaled_v(f), in.v))
    return w + ": an input value is not finite, or descale·stored is not exact in double";
  if (p.dout && !load(*p.dout, 1, in.dout)) return w + ": a value of dout is not finite";
  return "";
}

std::int64_t forward_terms(const Shape &s) { return s.D + s.Lk; }
std::int64_t backward_terms(const Shape &s) { return s.D + s.Dv + s.Lk + s.group() * s.Lq; }

/// Query rows per tile of a (b, kv) block: the fast reference holds O(kRowTile × Lk) values per thread, never
/// O(Lq × Lk), so any length fits in memory (a production shape, Lk = 8192: 8 MiB per matrix).
constexpr std::int64_t kRowTile = 128;

/// One tile of a (b, kv) block: R query rows from a row r0 of the block on (block row r = (h = kv·G + r / Lq,
/// i = r mod Lq), contiguous in q, out, lse, dout and dq) and the K keys from j0 on that any of them may see (the
/// union of their key ranges: a causal or windowed tile skips the keys none of its rows sees). weigh() fills it.
struct Block {
  std::int64_t R = 0, j0 = 0, K = 0;
  RowMatrix S, E;  ///< p̂_rj and Δp_rj on visible entries, 0 elsewhere (column j: key j0 + j)
  RowMatrix G, Ge;  ///< softcap, backward: ĝ_rj ≈ sech²(x_rj/c) and e_g ≥ |ĝ − sech²(x/c)| (visible entries)
  std::vector<double> l, el, llo;  ///< l̂, E_l (inflated), l̂ − E_l
  std::vector<double> nt;          ///< n: visible keys (+1 with a sink)
  std::vector<char> live;          ///< 0: fixed values (sees no key), 1: bounded, 2: unbounded (ε = ∞)
  std::vector<char> vis;           ///< [R·K]: row r sees key j0 + j
  std::vector<double> centered;    ///< [K]: one row's Δp_j against the top key's exact logit (weigh())
  void resize(std::int64_t rows, KeyRange keys, bool softcap_g) {
    R = rows;
    j0 = keys.empty() ? 0 : keys.lo;
    K = keys.empty() ? 0 : keys.hi - keys.lo + 1;
    S.resize(rows, K);
    E.resize(rows, K);
    if (softcap_g) {
      G.resize(rows, K);
      Ge.resize(rows, K);
    }
    const auto n = static_cast<std::size_t>(rows);
    l.assign(n, 0);
    el.assign(n, 0);
    llo.assign(n, 0);
    nt.assign(n, 0);
    live.assign(n, 0);
    vis.assign(n * static_cast<std::size_t>(K), 0);
    centered.assign(static_cast<std::size_t>(K), 0);
  }
  bool sees(std::int64_t r, std::int64_t j) const { return vis[static_cast<std::size_t>(r * K + j)] != 0; }
};

/// The keys rows r0 … r0 + rows − 1 of a (b, kv) block may see: the union over the heads the rows span.
KeyRange tile_keys(const Problem &p, const Shape &s, std::int64_t b, std::int64_t r0, std::int64_t rows) {
  KeyRange u{s.Lk, -1};
  for (std::int64_t r = r0; r < r0 + rows;) {  // one head's rows i … at a time
    const std::int64_t i = r % s.Lq, n = std::min(s.Lq - i, r0 + rows - r);
    const KeyRange h = rows_key_range(p.features, p.params.mask, b, i, i + n, s.Lq, s.Lk);
    if (!h.empty()) u = {std::min(u.lo, h.lo), std::max(u.hi, h.hi)};
    r += n;
  }
  return u;
}

/// (ĝ, e_g) for ŷ = fl(x̂/c) with |ŷ − x/c| ≤ e_y: ĝ = 4a/(1 + a)², a = exp(−2|ŷ|), and e_g ≥ |ĝ − sech²(x/c)|.
/// |d ln sech²(y)/dy| = 2|tanh y| ≤ 2, so the argument's error is 2e_y in log space; with the evaluation's θ_g ≤ ½
/// (kMaxLogSpaceError) e_g = (ĝ + A)·expm1(θ_g) + A + η, A = kSech2AbsEtas·η; above it, 0 < g ≤ 1 gives e_g = 1.
void sech2(double y, double e_y, double delta_exp, double &g, double &e_g) {
  const double a = std::exp(-2 * std::fabs(y)), b = 1 + a;
  g = 4 * a / (b * b);
  const double theta = 2 * e_y + 3 * delta_exp + kSech2Roundings * u;
  double unused = 0;
  e_g = theta <= kMaxLogSpaceError ? weight_error(g, 0, theta, kSech2AbsEtas * eta, unused) : 1.0;
}

/// Logits, weights p̂ (S), their bounds Δp (E), row sums and LSE of the tile of block (b, kv) with rows r0 … r0 +
/// rows − 1 — SPEC.md §5.1 steps 1–3 and 5. `lse`, `lse_err`: the forward's outputs (null for the backward); with
/// `softcap_g` also ĝ and e_g (Block::G, Ge).
void weigh(const Problem &p, const Shape &s, const Inputs &in, std::int64_t b, std::int64_t kv, std::int64_t r0,
           std::int64_t rows, double gamma_dot, bool softcap_g, double eps_scale, Block &blk, double *lse,
           double *lse_err) {
  const Features &f = p.features;
  const bool softcap = f.softcap > 0, alibi = !f.alibi_slopes.empty(), sink = !f.sinks.empty(),
             additive = f.mask_kind == MaskKind::additive;
  const double scale = p.params.scale, c = f.softcap;
  // exp's relative error as a log-space term: |ln(1 ± U·2u)| ≤ −ln(1 − 2Uu).
  const double delta_exp = -std::log1p(-2 * kLibmExpUlps * u);
  const double exp_abs = kLibmExpUlps * eta;  // exp's absolute error near underflow
  const std::int64_t G = s.group(), h0 = kv * G;
  blk.resize(rows, tile_keys(p, s, b, r0, rows), softcap_g);
  const std::int64_t j0 = blk.j0, nk = blk.K;  // column j of the tile: key j0 + j
  const ConstMap Q(in.q.data() + ((b * s.Hq + h0) * s.Lq + r0) * s.D, rows, s.D);
  const ConstMap K(in.k.data() + ((b * s.Hkv + kv) * s.Lk + j0) * s.D, nk, s.D);
  RowMatrix &S = blk.S, &E = blk.E;
  product(S, Q, false, K, true);  // t̂_rj, any order: |t̂ − t| ≤ γ_D Σ|q k| ≤ γ_D ‖q_r‖‖k_j‖
  const double *qn = in.qn.data() + (b * s.Hq + h0) * s.Lq + r0, *kn = in.kn.data() + (b * s.Hkv + kv) * s.Lk + j0;

  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t h = h0 + (r0 + r) / s.Lq, i = (r0 + r) % s.Lq;
    const double sink_h = sink ? f.sinks[static_cast<std::size_t>(h)] : 0.0;
    double *srow = S.row(r).data(), *erow = E.row(r).data();
    char *vis = blk.vis.data() + r * nk;
    const std::size_t li = static_cast<std::size_t>(r);
    const RowFrame fr = row_frame(f, p.params.mask, b, i, s.Lq, s.Lk);
    std::int64_t n = 0;
    double m = -kInf, e_top = 0;  // the largest logit and its error (the first key that has it, or the sink)
    std::int64_t top = -1;
    // Visibility from the row's key range; only a mask tensor asks key by key.
    const KeyRange kr = key_range(f, p.params.mask, fr);
    for (std::int64_t j = 0; j < nk; ++j) {
      const std::int64_t key = j0 + j;
      vis[j] = fr.exists && key >= kr.lo && key <= kr.hi &&
               (f.mask_kind == MaskKind::none || sees(f, p.params.mask, fr, s.Lq, s.Lk, b, h, i, key));
    }
    // The additive mask enters relative to its largest visible value M (an exact double, part of the shift): a row
    // whose keys all carry a mask near −10³⁰ keeps its logits' differences instead of losing them in u·10³⁰.
    double mask_shift = 0;
    if (additive) {
      mask_shift = -kInf;
      for (std::int64_t j = 0; j < nk; ++j)
        if (vis[j]) {
          const double mv = mask_value(f, s.Lq, s.Lk, b, h, i, j0 + j);
          if (std::isfinite(mv)) mask_shift = std::max(mask_shift, mv);
        }
      // A sink above every key's mask is the shift instead (keys far below it then weigh nothing, exactly as
      // their bound says), so a sink is never lost under u·|M| either.
      if (sink) mask_shift = std::max(mask_shift, sink_h);
      if (!std::isfinite(mask_shift)) mask_shift = 0;
    }
    for (std::int64_t j = 0; j < nk; ++j) {
      if (!vis[j]) continue;
      ++n;
      const double x = scale * srow[j];
      double e = gamma_dot * (qn[r] * kn[j]);  // |x̂ − x| ≤ γ_{D+1}·|scale|·‖q_r‖‖k_j‖
      double sv = x;
      if (softcap) {
        // c·tanh is c·(1-Lipschitz): the logit's error passes, plus the division, tanh and the product.
        const double y = x / c, t = std::tanh(y);
        if (softcap_g) sech2(y, e / c + u * std::fabs(y), delta_exp, blk.G(r, j), blk.Ge(r, j));
        sv = c * t;
        e += c * (u * std::fabs(y)) + c * (kLibmTanhUlps * (2 * u * std::fabs(t) + eta)) + u * std::fabs(sv);
      }
      if (alibi) {
        sv += alibi_bias(f, fr, h, j0 + j);  // an exact double: only the addition rounds
        e += u * std::fabs(sv);
      }
      if (additive) {
        const double mv = mask_value(f, s.Lq, s.Lk, b, h, i, j0 + j);
        if (std::isfinite(mv)) {
          const double rel = mv - mask_shift;  // ≤ 0; exact when mv is within 2× of M (Sterbenz)
          sv += rel;
          e += u * std::fabs(rel) + u * std::fabs(sv);
        }
      }
      srow[j] = sv;
      erow[j] = e;
      if (sv > m) m = sv, e_top = e, top = j;
    }
    // The sink's logit in the shifted frame: sink_h − M (rounded: its error counts in its θ below).
    const double sink_rel = sink ? sink_h - mask_shift : 0.0;
    const double sink_err = mask_shift == 0 ? 0.0 : u * std::fabs(sink_rel);
    if (sink && sink_rel > m) m = sink_rel, e_top = sink_err, top = -1;
    const std::size_t lo = static_cast<std::size_t>(lse_offset(s, b, h, i));
    if (!fr.exists || n == 0) {  // O = 0, dQ = 0, LSE = −∞ or (only the sink) sink_h: exact
      S.row(r).setZero();
      E.row(r).setZero();
      if (lse && fr.exists && sink) lse[lo] = sink_h;
      continue;
    }
    // p̂_j = exp(fl(ŝ_j − m̂)), θ_j = e_j + u|ŝ_j − m̂|, Δp_j = (p̂_j + Uη)·ρ_j + (U+1)η with ρ_j ≥ expm1(θ_j + δ):
    // the weights against the shift m̂ itself. Centered (SPEC.md §5.1 step 2): against the top key's exact logit,
    // whose error then moves to every other key (θ_j + e_top) and leaves its own weight exact but for exp (θ = δ) —
    // far tighter where one key dominates. The row takes the variant of smaller Σ Δp_j; its LSE adds e_top.
    double l = 0, dsum = 0, theta_max = 0, dsum_c = 0, theta_max_c = 0;
    double *ecen = blk.centered.data();
    for (std::int64_t j = 0; j < nk; ++j) {
      if (!vis[j]) {
        srow[j] = 0;
        erow[j] = 0;
        ecen[j] = 0;
        continue;
      }
      const double d = srow[j] - m;
      const double pj = std::exp(d);
      const double theta = erow[j] + u * std::fabs(d) + delta_exp;
      const double theta_c = j == top ? u * std::fabs(d) + delta_exp : theta + e_top;
      const double dp = weight_error(pj, d, theta, exp_abs, theta_max);
      const double dp_c = weight_error(pj, d, theta_c, exp_abs, theta_max_c);
      srow[j] = pj;
      erow[j] = dp;
      ecen[j] = dp_c;
      l += pj;
      dsum += dp;
      dsum_c += dp_c;
    }
    if (sink) {  // one more term of the row sum, no value
      const double d = sink_rel - m;
      const double pj = std::exp(d);
      const double theta = sink_err + u * std::fabs(d) + delta_exp;
      const double theta_c = top < 0 ? u * std::fabs(d) + delta_exp : theta + e_top;
      l += pj;
      dsum += weight_error(pj, d, theta, exp_abs, theta_max);
      dsum_c += weight_error(pj, d, theta_c, exp_abs, theta_max_c);
    }
    const bool centered = dsum_c < dsum;
    if (centered) {
      std::copy(ecen, ecen + nk, erow);
      dsum = dsum_c;
      theta_max = theta_max_c;
    }
    const double nt = static_cast<double>(n + (sink ? 1 : 0));
    // |l̂ − l| ≤ γ_{n+1}·l̂ + Σ Δp_j (inflated here: it is subtracted below)
    const double E_l = gamma(nt + 1) * l * kEpsInflation + dsum * kEpsInflation;
    const double l_low = l - E_l;
    blk.l[li] = l;
    blk.el[li] = E_l;
    blk.llo[li] = l_low;
    blk.nt[li] = nt;
    const bool bounded = theta_max <= kMaxLogSpaceError && l_low >= l / 2;
    blk.live[li] = bounded ? 1 : 2;  // unbounded: every ε this row touches is +∞
    if (!lse) continue;
    const double logl = std::log(l);
    const double shift = m + mask_shift;  // the whole shift: its rounding counts in the LSE's ε
    lse[lo] = shift + logl;
    // |log l − log l̂| ≤ −log1p(−E_l/l̂); log's error; the addition's rounding.
    lse_err[lo] = bounded ? finish(-std::log1p(-E_l / l) + kLibmLogUlps * (2 * u * std::fabs(logl) + eta) +
                                       u * std::fabs(shift) + u * std::fabs(lse[lo]) + eta +
                                       (centered ? e_top : 0.0),
                                   eps_scale)
                          : kInf;
  }
}

}  // namespace

std::string fast_forward_declines(const Problem &p) {
  Inputs in;
  return check_and_load(p, "fast_forward", forward_terms(p.shape), in);
}

std::optional<FastForward> fast_forward(const Problem &p, const FastForwardKnobs &knobs) {
  using Drop = FastForwardKnobs::Drop;
  const Shape s = detail::checked_shape(p, kMinReferenceBits, false);
  const Features &f = p.features;
  Inputs in;
  if (!check_and_load(p, "fast_forward", forward_terms(s), in).empty()) return std::nullopt;
  // Σ_d |q_id k_jd| ≤ ‖q_i‖₂‖k_j‖₂ (Cauchy–Schwarz): the dot products' bound from 2 norms per pair, no second GEMM.
  in.qn = row_norms(in.q, s.D);
  in.kn = row_norms(in.k, s.D);
  const std::vector<double> va = magnitudes(in.v);

  const bool dropout = f.dropout_p > 0;
  const double keep = 1 - f.dropout_p;  // z = 1/(1 − p): |keep − (1 − p)| ≤ u·keep
  const double gamma_dot = knobs.drop == Drop::dot_product ? 0 : gamma(static_cast<double>(s.D + 1)) *
                                                                      std::fabs(p.params.scale);

  FastForward r;
  const auto n_out = static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), n_lse = static_cast<std::size_t>(s.B * s.Hq * s.Lq);
  r.out.assign(n_out, 0.0);
  r.out_err.assign(n_out, 0.0);
  r.lse.assign(n_lse, -kInf);
  r.lse_err.assign(n_lse, 0.0);

  const std::int64_t G = s.group(), R = G * s.Lq, tiles = (R + kRowTile - 1) / kRowTile;
  // One tile of a (b, kv) block at a time on each of OpenMP's threads: a tile writes its own rows, so the bits do not
  // depend on the thread count.
#pragma omp parallel for schedule(dynamic, 1) if (s.work() >= kThreadedWork)
  for (std::int64_t task = 0; task < s.B * s.Hkv * tiles; ++task) {
    const std::int64_t b = task / (s.Hkv * tiles), kv = task / tiles % s.Hkv, r0 = task % tiles * kRowTile;
    Block blk;
    RowMatrix N, Bm;
    weigh(p, s, in, b, kv, r0, std::min(kRowTile, R - r0), gamma_dot, false, knobs.eps_scale, blk, r.lse.data(),
          r.lse_err.data());
    RowMatrix &S = blk.S, &E = blk.E;
    for (std::int64_t row = 0; row < blk.R; ++row) {
      if (!blk.live[static_cast<std::size_t>(row)]) continue;
      if (dropout) {  // dropped weights stay in the row sum, not in O's numerator
        const std::int64_t h = kv * G + (r0 + row) / s.Lq, i = (r0 + row) % s.Lq;
        for (std::int64_t j = 0; j < blk.K; ++j)
          if (blk.sees(row, j) && dropout_factor(f, s.Hq, s.Lq, s.Lk, b, h, i, blk.j0 + j) == 0) {
            S(row, j) = 0;
            E(row, j) = 0;
          }
      }
      // W_rj = γ_{n+1}·p̂_rj + Δp_rj: O's numerator error γ Σ p̂|v| + Σ Δp|v| is then one product W·|V|.
      E.row(row) += gamma(blk.nt[static_cast<std::size_t>(row)] + 1) * S.row(row);
    }
    const std::size_t vo = static_cast<std::size_t>(((b * s.Hkv + kv) * s.Lk + blk.j0) * s.Dv);
    product(N, S, false, ConstMap(in.v.data() + vo, blk.K, s.Dv), false);  // Σ_j p̂_j v_jc
    product(Bm, E, false, ConstMap(va.data() + vo, blk.K, s.Dv), false);  // Σ_j (γ p̂_j + Δp_j) |v_jc|
    // Products that underflow lose ≤ η/2 each in N and Bm: an absolute allowance per row.
    const double tiny = (4 * static_cast<double>(s.Lk) + 4) * eta;
    const std::size_t o0 = static_cast<std::size_t>(out_offset(s, b, kv * G, 0, 0) + r0 * s.Dv);
    for (std::int64_t row = 0; row < blk.R; ++row) {
      const std::size_t li = static_cast<std::size_t>(row);
      if (!blk.live[li]) continue;
      for (std::int64_t c2 = 0; c2 < s.Dv; ++c2) {
        const std::size_t oo = o0 + static_cast<std::size_t>(row * s.Dv + c2);
        double o = N(row, c2) / blk.l[li];
        // |N/l − N̂/l̂| ≤ (|N − N̂| + |N̂/l̂|·|l − l̂|)/l, l ≥ l̂ − E_l; the division's rounding (2u|Ô| ≥ u|N̂/l̂| + u|Ô|).
        double e = (Bm(row, c2) + std::fabs(o) * blk.el[li] + tiny) / blk.llo[li] + 2 * u * std::fabs(o) + eta;
        if (dropout) {  // O = (Σ kept p v / l)/(1 − p): keep's rounding and the division's, 4u|Ô| with margin
          o /= keep;
          e = e / keep + 4 * u * std::fabs(o) + eta;
        }
        r.out[oo] = o;
        r.out_err[oo] = blk.live[li] == 2 ? kInf : finish(e, knobs.eps_scale);
      }
    }
  }
  return r;
}

std::string fast_backward_declines(const Problem &p) {
  if (!p.dout) return "fast_backward: the problem has no dout";
  Inputs in;
  return check_and_load(p, "fast_backward", backward_terms(p.shape), in);
}

std::optional<FastBackward> fast_backward(const Problem &p, const FastBackwardKnobs &knobs) {
  using Drop = FastBackwardKnobs::Drop;
  const Shape s = detail::checked_shape(p, kMinReferenceBits, true);
  const Features &f = p.features;
  Inputs in;
  if (!check_and_load(p, "fast_backward", backward_terms(s), in).empty()) return std::nullopt;
  in.qn = row_norms(in.q, s.D);
  in.kn = row_norms(in.k, s.D);
  const std::vector<double> dn = row_norms(in.dout, s.Dv), vn = row_norms(in.v, s.Dv);
  const std::vector<double> qa = magnitudes(in.q), ka = magnitudes(in.k), da = magnitudes(in.dout);

  const bool softcap = f.softcap > 0, dropout = f.dropout_p > 0;
  const double scale = p.params.scale, keep = 1 - f.dropout_p;
  const std::int64_t G = s.group(), R = G * s.Lq;
  const double gamma_dot = gamma(static_cast<double>(s.D + 1)) * std::fabs(scale);
  const double gamma_dp = gamma(static_cast<double>(s.Dv));                  // dP̂ = dO·Vᵀ
  const double gamma_delta = gamma(static_cast<double>(s.Lk));               // Δ̂ = Σ_j P̂ dP̂
  const double gamma_ds = gamma(static_cast<double>(std::max(s.Lk, R)));     // dS·K and dSᵀ·Q
  const double gamma_dv = gamma(static_cast<double>(R));                    // Pᵀ·dO
  // Products that underflow lose ≤ η/2 each: the GEMMs' absolute allowances (value and bound) per output.
  const double tiny_dq = (4 * static_cast<double>(s.Lk) + 4) * eta, tiny_dkv = (4 * static_cast<double>(R) + 4) * eta;

  FastBackward r;
  for (auto [x, e, n] : {std::tuple{&r.dq, &r.dq_err, s.B * s.Hq * s.Lq * s.D},
                         std::tuple{&r.dk, &r.dk_err, s.B * s.Hkv * s.Lk * s.D},
                         std::tuple{&r.dv, &r.dv_err, s.B * s.Hkv * s.Lk * s.Dv}}) {
    x->assign(static_cast<std::size_t>(n), 0.0);
    e->assign(static_cast<std::size_t>(n), 0.0);
  }
  // value = factor·x̂ [÷ fl(1 − p)] with |x̂ − x| ≤ bx: its bound, the product's and the division's rounding included.
  auto put = [&](double x, double bx, double factor, double &value, double &err) {
    double v = factor * x, e = std::fabs(factor) * bx + (factor == 1 ? 0 : u * std::fabs(v) + eta);
    if (dropout) {  // (1/keep)·(…): keep's rounding and the division's, 4u|v| with margin (as O's)
      v /= keep;
      e = e / keep + 4 * u * std::fabs(v) + eta;
    }
    value = v;
    err = finish(e, knobs.eps_scale, v);
  };

  // A (b, kv) block's tiles dealt round-robin to its parts (products.h: backward_parts), one task each on OpenMP's
  // threads: a part writes its tiles' rows of dQ and sums its share of the block's dK and dV (values and bounds),
  // and which keys its rows see; the shares are added in part order after. The bits do not depend on the thread count.
  const std::int64_t tiles = (R + kRowTile - 1) / kRowTile, parts = backward_parts(s.B * s.Hkv, tiles);
  struct KeySums {
    RowMatrix XK, BK, XV, BV;
    std::vector<char> seen;
  };
  std::vector<KeySums> key_sums(static_cast<std::size_t>(s.B * s.Hkv * parts));
#pragma omp parallel for schedule(dynamic, 1) if (s.work() >= kThreadedWork)
  for (std::int64_t task = 0; task < s.B * s.Hkv * parts; ++task) {
    const std::int64_t b = task / (s.Hkv * parts), kv = task / parts % s.Hkv, part = task % parts;
    const std::int64_t q0 = (b * s.Hq + kv * G) * s.Lq;  // the block's first row in q, dout, dq
    const std::int64_t k0 = (b * s.Hkv + kv) * s.Lk;     // its first key in k, v, dk, dv
    Block blk;
    RowMatrix DP, W, X, BX;
    KeySums &ks = key_sums[static_cast<std::size_t>(task)];
    RowMatrix &XK = ks.XK, &BK = ks.BK, &XV = ks.XV, &BV = ks.BV;
    XK.setZero(s.Lk, s.D), BK.setZero(s.Lk, s.D), XV.setZero(s.Lk, s.Dv), BV.setZero(s.Lk, s.Dv);
    std::vector<char> &seen = ks.seen;
    seen.assign(static_cast<std::size_t>(s.Lk), 0);
    for (std::int64_t tile = part; tile < tiles; tile += parts) {
      const std::int64_t r0 = tile * kRowTile, rows = std::min(kRowTile, R - r0);
      weigh(p, s, in, b, kv, r0, rows, gamma_dot, softcap, knobs.eps_scale, blk, nullptr, nullptr);
      RowMatrix &S = blk.S, &E = blk.E;
      const std::int64_t t0 = q0 + r0, j0 = blk.j0, nk = blk.K;  // the tile's first row and key
      const ConstMap Q(in.q.data() + t0 * s.D, rows, s.D), Qa(qa.data() + t0 * s.D, rows, s.D);
      const ConstMap dO(in.dout.data() + t0 * s.Dv, rows, s.Dv), dOa(da.data() + t0 * s.Dv, rows, s.Dv);
      const ConstMap K(in.k.data() + (k0 + j0) * s.D, nk, s.D), Ka(ka.data() + (k0 + j0) * s.D, nk, s.D);
      const ConstMap V(in.v.data() + (k0 + j0) * s.Dv, nk, s.Dv);
      product(DP, dO, false, V, true);  // dP̂_rj = Σ_c dO_rc v_jc (before dropout's factor)
      W.setZero(rows, nk);
      for (std::int64_t row = 0; row < rows; ++row) {
        const std::size_t li = static_cast<std::size_t>(row);
        if (!blk.live[li]) {  // sees no key: dS = 0 (S and E are 0 here)
          DP.row(row).setZero();
          continue;
        }
        const std::int64_t h = kv * G + (r0 + row) / s.Lq, i = (r0 + row) % s.Lq;
        const bool unbounded = blk.live[li] == 2;
        const double l = blk.l[li], el = blk.el[li], llo = blk.llo[li];
        const double dO_norm = dn[static_cast<std::size_t>(t0 + row)];
        auto kept = [&](std::int64_t j) {
          return !dropout || dropout_factor(f, s.Hq, s.Lq, s.Lk, b, h, i, j0 + j) != 0;
        };
        // P̂ = fl(p̂/l̂) with ΔP ≥ |P̂ − P| (S, E); dP̂ (0 where hidden or dropped) with E_dP (in W for now); Δ̂, E_Δ.
        double delta = 0, t_weights = 0, t_dp = 0, t_round = 0, n = 0;
        for (std::int64_t j = 0; j < nk; ++j) {
          if (!blk.sees(row, j)) {
            DP(row, j) = 0;
            continue;
          }
          seen[static_cast<std::size_t>(j0 + j)] = 1;
          ++n;
          const double P = S(row, j) / l;
          // |p̂/l̂ − w/l| ≤ (Δp + (p̂/l̂)·E_l)/(l̂ − E_l); the division's rounding; its own products' underflow.
          const double dPw = (E(row, j) + P * el) / llo + 2 * u * P + kEtaSlack * eta;
          S(row, j) = P;
          E(row, j) = dPw;
          double dp = 0, edp = 0;
          if (kept(j)) {
            dp = DP(row, j);
            edp = gamma_dp * (dO_norm * vn[static_cast<std::size_t>(k0 + j0 + j)]);  // γ_Dv ‖dO_r‖‖v_j‖
          }
          DP(row, j) = dp;
          W(row, j) = edp;
          delta += P * dp;
          t_weights += dPw * (std::fabs(dp) + edp);  // Σ |P̂ − P|·|dP|
          t_dp += P * edp;                           // Σ P̂·|dP̂ − dP|
          t_round += P * std::fabs(dp);              // the sum's rounding: γ_Lk Σ P̂|dP̂|
        }
        // |Δ̂ − Δ| ≤ E_Δ: the three sums, and the products' underflow (value and bound, ≤ η/2 each).
        const double e_delta =
            knobs.drop == Drop::delta ? 0 : t_weights + t_dp + gamma_delta * t_round + (3 * n + kEtaSlack) * eta;
        for (std::int64_t j = 0; j < nk; ++j) {
          if (!blk.sees(row, j)) continue;
          const double P = S(row, j), dPw = E(row, j);
          // â = fl(dP̂ − Δ̂), |â − (dP − Δ)| ≤ E_a = E_dP + E_Δ + u|â|;
          // dŜ = fl(P̂·â), |dŜ − P(dP − Δ)| ≤ E_dS = ΔP|â| + (P̂ + ΔP)E_a + u|dŜ|.
          const double a = DP(row, j) - delta, e_a = W(row, j) + e_delta + u * std::fabs(a);
          double ds = P * a, e_ds = dPw * std::fabs(a) + (P + dPw) * e_a + u * std::fabs(ds) + kEtaSlack * eta;
          if (softcap) {  // dS' = dS·g: |dŜ·ĝ − dS·g| ≤ E_dS·(ĝ + e_g) + |dŜ|·e_g, and the product's rounding
            const double g = blk.G(row, j), e_g = blk.Ge(row, j), ds_g = ds * g;
            e_ds = e_ds * (g + e_g) + std::fabs(ds) * e_g + u * std::fabs(ds_g) + kEtaSlack * eta;
            ds = ds_g;
          }
          DP(row, j) = ds;
          // W = E_dS' + γ|dŜ'|: dQ's and dK's error, Σ E_dS'|k| + γ Σ|dŜ'||k|, is then one product W·|K| (W·|Q|).
          W(row, j) = unbounded ? kInf : e_ds + gamma_ds * std::fabs(ds) + eta;
          // dV's weights: P̂ and ΔP + γ_R P̂ where kept (0 where dropped: z = 0 exactly).
          if (kept(j)) {
            E(row, j) = unbounded ? kInf : (knobs.drop == Drop::dv_weights ? 0 : dPw) + gamma_dv * P + eta;
          } else {
            S(row, j) = 0;
            E(row, j) = 0;
          }
        }
      }
      // dQ = scale·dS'·K [÷ (1 − p)], error scale·(W·|K| + tiny) + the product's rounding (put).
      product(X, DP, false, K, false);
      product(BX, W, false, Ka, false);
      for (std::int64_t row = 0; row < rows; ++row) {
        if (!blk.live[static_cast<std::size_t>(row)]) continue;  // dQ = 0 exactly
        for (std::int64_t d = 0; d < s.D; ++d) {
          const auto o = static_cast<std::size_t>((t0 + row) * s.D + d);
          put(X(row, d), BX(row, d) + tiny_dq, scale, r.dq[o], r.dq_err[o]);
        }
      }
      // dK += dS'ᵀ·Q (the group's rows: GQA's sum over heads) with Wᵀ·|Q|; dV += P̂ᵀ·dO over kept entries with
      // (ΔP + γ_R P̂)ᵀ·|dO|. Each is a sum over the block's R rows, in any order: γ_R bounds it, tiles and all.
      add_product(XK.data() + j0 * s.D, s.D, DP, true, Q, false);
      add_product(BK.data() + j0 * s.D, s.D, W, true, Qa, false);
      add_product(XV.data() + j0 * s.Dv, s.Dv, S, true, dO, false);
      add_product(BV.data() + j0 * s.Dv, s.Dv, E, true, dOa, false);
    }
  }
  // Each block's shares added in part order; dK = scale·XK [÷ (1 − p)], error scale·(BK + tiny); dV = XV [÷ (1 − p)],
  // error BV + tiny.
#pragma omp parallel for schedule(dynamic, 1) if (s.work() >= kThreadedWork)
  for (std::int64_t block = 0; block < s.B * s.Hkv; ++block) {
    const std::int64_t k0 = block * s.Lk;  // the block's first key in k, v, dk, dv
    KeySums &ks = key_sums[static_cast<std::size_t>(block * parts)];
    for (std::int64_t part = 1; part < parts; ++part) {
      KeySums &more = key_sums[static_cast<std::size_t>(block * parts + part)];
      ks.XK += more.XK, ks.BK += more.BK, ks.XV += more.XV, ks.BV += more.BV;
      for (std::size_t j = 0; j < ks.seen.size(); ++j) ks.seen[j] |= more.seen[j];
      more = KeySums{};
    }
    const RowMatrix &XK = ks.XK, &BK = ks.BK, &XV = ks.XV, &BV = ks.BV;
    const std::vector<char> &seen = ks.seen;
    for (std::int64_t j = 0; j < s.Lk; ++j) {
      if (!seen[static_cast<std::size_t>(j)]) continue;  // no row sees key j: dK = dV = 0 exactly
      for (std::int64_t d = 0; d < s.D; ++d) {
        const auto o = static_cast<std::size_t>((k0 + j) * s.D + d);
        put(XK(j, d), BK(j, d) + tiny_dkv, scale, r.dk[o], r.dk_err[o]);
      }
      for (std::int64_t c = 0; c < s.Dv; ++c) {
        const auto o = static_cast<std::size_t>((k0 + j) * s.Dv + c);
        put(XV(j, c), BV(j, c) + tiny_dkv, 1, r.dv[o], r.dv_err[o]);
      }
    }
  }
  return r;
}

FilterVerdict fast_filter(double k, double beta, double r, double eps) {
  constexpr double kSlack = 0x1p-50;  // ≥ the relative rounding of |k − r̃| and of the sums and products below
  if (eps == 0 && k == r && beta >= 0) return FilterVerdict::pass;  // exact values, −∞ = −∞ included
  if (!std::isfinite(k) || !std::isfinite(beta) || !std::isfinite(r) || !std::isfinite(eps) || eps < 0 || beta < 0)
    return FilterVerdict::escalate;
  const double d = std::fabs(k - r);  // within (1 ± u) of |k − r̃|
  if ((d + eps) * (1 + kSlack) <= beta) return FilterVerdict::pass;
  if (d * (1 - kSlack) - eps > beta * (1 + kSlack)) return FilterVerdict::fail;
  return FilterVerdict::escalate;
}

}  // namespace attncheck
