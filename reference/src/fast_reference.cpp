// The fast forward reference in double with a running-error bound per element (fast_reference.h; SPEC.md §5.1).
#include "attncheck/fast_reference.h"

#include "attncheck/reference.hpp"  // detail::checked_shape: the same validation as reference_forward

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
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

/// ε as delivered: inflated (kEpsInflation), scaled by the test knob, and +∞ for NaN or ∞.
double finish(double e, const FastForwardKnobs &knobs) {
  const double r = e * kEpsInflation * knobs.eps_scale;
  return r >= 0 && r < kInf ? r : kInf;
}

}  // namespace

std::string fast_forward_declines(const Problem &p) {
  const Shape &s = p.shape;
  const Features &f = p.features;
  if (!factor_ok(p.params.scale)) return "fast_forward: |scale| is outside {0} and [2^-200, 2^200]";
  if (f.softcap > 0 && !factor_ok(f.softcap)) return "fast_forward: softcap is outside [2^-200, 2^200]";
  if (s.D + s.Lk > kMaxFastTerms) return "fast_forward: D + Lk exceeds kMaxFastTerms";
  std::vector<double> scratch;
  if (!load(p.q, descaled_q(f), scratch) || !load(p.k, descaled_k(f), scratch) || !load(p.v, descaled_v(f), scratch))
    return "fast_forward: an input value is not finite, or descale·stored is not exact in double";
  return "";
}

std::optional<FastForward> fast_forward(const Problem &p, const FastForwardKnobs &knobs) {
  using Drop = FastForwardKnobs::Drop;
  const Shape s = detail::checked_shape(p, kMinReferenceBits, false);
  const Features &f = p.features;
  if (!factor_ok(p.params.scale) || (f.softcap > 0 && !factor_ok(f.softcap)) || s.D + s.Lk > kMaxFastTerms)
    return std::nullopt;
  std::vector<double> qd, kd, vd;
  if (!load(p.q, descaled_q(f), qd) || !load(p.k, descaled_k(f), kd) || !load(p.v, descaled_v(f), vd))
    return std::nullopt;

  const bool softcap = f.softcap > 0, alibi = !f.alibi_slopes.empty(), sink = !f.sinks.empty(),
             additive = f.mask_kind == MaskKind::additive, dropout = f.dropout_p > 0;
  const double scale = p.params.scale, c = f.softcap, abs_scale = std::fabs(scale);
  const double keep = 1 - f.dropout_p;  // z = 1/(1 − p): |keep − (1 − p)| ≤ u·keep
  const bool drop_dot = knobs.drop == Drop::dot_product;
  // exp's relative error as a log-space term: |ln(1 ± U·2u)| ≤ −ln(1 − 2Uu).
  const double delta_exp = -std::log1p(-2 * kLibmExpUlps * u);
  const double exp_abs = kLibmExpUlps * eta;  // exp's absolute error near underflow
  const double gamma_dot = drop_dot ? 0 : gamma(static_cast<double>(s.D + 1)) * abs_scale;

  FastForward r;
  const auto n_out = static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv), n_lse = static_cast<std::size_t>(s.B * s.Hq * s.Lq);
  r.out.assign(n_out, 0.0);
  r.out_err.assign(n_out, 0.0);
  r.lse.assign(n_lse, -kInf);
  r.lse_err.assign(n_lse, 0.0);

  // Σ_d |q_id k_jd| ≤ ‖q_i‖₂‖k_j‖₂ (Cauchy–Schwarz): the dot products' bound from 2 norms per pair, no second GEMM.
  std::vector<double> va(vd.size()), qn(static_cast<std::size_t>(s.B * s.Hq * s.Lq)),
      kn(static_cast<std::size_t>(s.B * s.Hkv * s.Lk));
  std::transform(vd.begin(), vd.end(), va.begin(), [](double x) { return std::fabs(x); });
  auto norms = [&](const std::vector<double> &xs, std::vector<double> &out) {
    for (std::size_t r2 = 0; r2 < out.size(); ++r2) {
      double t = 0;
      for (std::int64_t d = 0; d < s.D; ++d) t += xs[r2 * static_cast<std::size_t>(s.D) + static_cast<std::size_t>(d)] *
                                                 xs[r2 * static_cast<std::size_t>(s.D) + static_cast<std::size_t>(d)];
      out[r2] = std::sqrt(t);
    }
  };
  norms(qd, qn);
  norms(kd, kn);

  RowMatrix S(s.Lq, s.Lk), E(s.Lq, s.Lk);  // logits and their bounds, then p̂ and Δp (then W) in place
  RowMatrix N(s.Lq, s.Dv), Bm(s.Lq, s.Dv);
  // Per row: l̂, E_l, l̂ − E_l, and whether the row is computed here (0: fixed values).
  std::vector<double> lhat(static_cast<std::size_t>(s.Lq)), el(lhat.size()), llo(lhat.size());
  std::vector<char> live(lhat.size());
  std::vector<char> vis(static_cast<std::size_t>(s.Lk));

  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h) {
      const std::int64_t kv = s.kv_head(h);
      const std::size_t qo = static_cast<std::size_t>((b * s.Hq + h) * s.Lq * s.D);
      const std::size_t ko = static_cast<std::size_t>((b * s.Hkv + kv) * s.Lk * s.D);
      const std::size_t vo = static_cast<std::size_t>((b * s.Hkv + kv) * s.Lk * s.Dv);
      const ConstMap Q(qd.data() + qo, s.Lq, s.D), K(kd.data() + ko, s.Lk, s.D);
      const ConstMap V(vd.data() + vo, s.Lk, s.Dv), Va(va.data() + vo, s.Lk, s.Dv);
      S.noalias() = Q * K.transpose();  // t̂_ij, any order: |t̂ − t| ≤ γ_D Σ|q k| ≤ γ_D ‖q_i‖‖k_j‖
      const double *qn_h = qn.data() + (b * s.Hq + h) * s.Lq, *kn_h = kn.data() + (b * s.Hkv + kv) * s.Lk;
      const double sink_h = sink ? f.sinks[static_cast<std::size_t>(h)] : 0.0;

      for (std::int64_t i = 0; i < s.Lq; ++i) {
        double *srow = S.row(i).data(), *erow = E.row(i).data();
        const std::size_t li = static_cast<std::size_t>(i);
        live[li] = 0;
        const RowFrame fr = row_frame(f, p.params.mask, b, i, s.Lq, s.Lk);
        std::int64_t n = 0;
        double m = -kInf;
        for (std::int64_t j = 0; j < s.Lk; ++j)
          vis[static_cast<std::size_t>(j)] = fr.exists && sees(f, p.params.mask, fr, s.Lq, s.Lk, b, h, i, j);
        // The additive mask enters relative to its largest visible value M (an exact double, part of the shift): a row
        // whose keys all carry a mask near −10³⁰ keeps its logits' differences instead of losing them in u·10³⁰.
        double mask_shift = 0;
        if (additive) {
          mask_shift = -kInf;
          for (std::int64_t j = 0; j < s.Lk; ++j)
            if (vis[static_cast<std::size_t>(j)]) {
              const double mv = mask_value(f, s.Lq, s.Lk, b, h, i, j);
              if (std::isfinite(mv)) mask_shift = std::max(mask_shift, mv);
            }
          // A sink above every key's mask is the shift instead (keys far below it then weigh nothing, exactly as
          // their bound says), so a sink is never lost under u·|M| either.
          if (sink) mask_shift = std::max(mask_shift, f.sinks[static_cast<std::size_t>(h)]);
          if (!std::isfinite(mask_shift)) mask_shift = 0;
        }
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!vis[static_cast<std::size_t>(j)]) continue;
          ++n;
          const double x = scale * srow[j];
          double e = gamma_dot * (qn_h[i] * kn_h[j]);  // |x̂ − x| ≤ γ_{D+1}·|scale|·‖q_i‖‖k_j‖
          double sv = x;
          if (softcap) {
            // c·tanh is c·(1-Lipschitz): the logit's error passes, plus the division, tanh and the product.
            const double y = x / c, t = std::tanh(y);
            sv = c * t;
            e += c * (u * std::fabs(y)) + c * (kLibmTanhUlps * (2 * u * std::fabs(t) + eta)) + u * std::fabs(sv);
          }
          if (alibi) {
            sv += alibi_bias(f, fr, h, j);  // an exact double: only the addition rounds
            e += u * std::fabs(sv);
          }
          if (additive) {
            const double mv = mask_value(f, s.Lq, s.Lk, b, h, i, j);
            if (std::isfinite(mv)) {
              const double rel = mv - mask_shift;  // ≤ 0; exact when mv is within 2× of M (Sterbenz)
              sv += rel;
              e += u * std::fabs(rel) + u * std::fabs(sv);
            }
          }
          srow[j] = sv;
          erow[j] = e;
          m = std::max(m, sv);
        }
        // The sink's logit in the shifted frame: sink_h − M (rounded: its error counts in its θ below).
        const double sink_rel = sink ? sink_h - mask_shift : 0.0;
        const double sink_err = mask_shift == 0 ? 0.0 : u * std::fabs(sink_rel);
        if (sink) m = std::max(m, sink_rel);
        if (!fr.exists || (n == 0 && !sink)) {  // O = 0, LSE = −∞: exact
          S.row(i).setZero();
          E.row(i).setZero();
          continue;
        }
        const std::size_t lo = static_cast<std::size_t>(lse_offset(s, b, h, i));
        if (n == 0) {  // only the sink: O = 0, LSE = sink_h exactly
          r.lse[lo] = sink_h;
          S.row(i).setZero();
          E.row(i).setZero();
          continue;
        }
        // p̂_j = exp(fl(ŝ_j − m̂)), θ_j = e_j + u|ŝ_j − m̂|, Δp_j = (p̂_j + Uη)·ρ_j + (U+1)η with ρ_j ≥ expm1(θ_j + δ).
        double l = 0, dsum = 0, theta_max = 0;
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!vis[static_cast<std::size_t>(j)]) {
            srow[j] = 0;
            erow[j] = 0;
            continue;
          }
          const double d = srow[j] - m;
          const double pj = std::exp(d);
          const double theta = erow[j] + u * std::fabs(d) + delta_exp;
          const double dp = weight_error(pj, d, theta, exp_abs, theta_max);
          srow[j] = pj;
          erow[j] = dp;
          l += pj;
          dsum += dp;
        }
        if (sink) {  // one more term of the row sum, no value
          const double d = sink_rel - m;
          const double pj = std::exp(d);
          const double theta = sink_err + u * std::fabs(d) + delta_exp;
          l += pj;
          dsum += weight_error(pj, d, theta, exp_abs, theta_max);
        }
        const double nt = static_cast<double>(n + (sink ? 1 : 0));
        // |l̂ − l| ≤ γ_{n+1}·l̂ + Σ Δp_j (inflated here: it is subtracted below)
        const double E_l = gamma(nt + 1) * l * kEpsInflation + dsum * kEpsInflation;
        const double l_low = l - E_l;
        lhat[li] = l;
        el[li] = E_l;
        llo[li] = l_low;
        live[li] = 1;
        const double logl = std::log(l);
        const double shift = m + mask_shift;  // the whole shift: its rounding counts in the LSE's ε
        const double lse = shift + logl;
        r.lse[lo] = lse;
        if (!(theta_max <= kMaxLogSpaceError) || !(l_low >= l / 2)) {
          r.lse_err[lo] = kInf;
          live[li] = 2;  // unbounded row: O gets ε = ∞ below
        } else {
          // |log l − log l̂| ≤ −log1p(−E_l/l̂); log's error; the addition's rounding.
          r.lse_err[lo] = finish(-std::log1p(-E_l / l) + kLibmLogUlps * (2 * u * std::fabs(logl) + eta) +
                                     u * std::fabs(shift) + u * std::fabs(lse) + eta,
                                 knobs);
        }
        if (dropout)  // dropped weights stay in the row sum, not in O's numerator
          for (std::int64_t j = 0; j < s.Lk; ++j)
            if (vis[static_cast<std::size_t>(j)] && dropout_factor(f, s.Hq, s.Lq, s.Lk, b, h, i, j) == 0) {
              srow[j] = 0;
              erow[j] = 0;
            }
        // W_ij = γ_{n+1}·p̂_ij + Δp_ij: O's numerator error γ Σ p̂|v| + Σ Δp|v| is then one product W·|V|.
        const double g = gamma(nt + 1);
        for (std::int64_t j = 0; j < s.Lk; ++j) erow[j] += g * srow[j];
      }

      N.noalias() = S * V;    // Σ_j p̂_j v_jc
      Bm.noalias() = E * Va;  // Σ_j (γ p̂_j + Δp_j) |v_jc|
      // Products that underflow lose ≤ η/2 each in N and Bm: an absolute allowance per row.
      const double tiny = (4 * static_cast<double>(s.Lk) + 4) * eta;
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const std::size_t li = static_cast<std::size_t>(i);
        if (!live[li]) continue;
        for (std::int64_t c2 = 0; c2 < s.Dv; ++c2) {
          const std::size_t oo = static_cast<std::size_t>(out_offset(s, b, h, i, c2));
          double o = N(i, c2) / lhat[li];
          // |N/l − N̂/l̂| ≤ (|N − N̂| + |N̂/l̂|·|l − l̂|)/l, l ≥ l̂ − E_l; the division's rounding (2u|Ô| ≥ u|N̂/l̂| + u|Ô|).
          double e = (Bm(i, c2) + std::fabs(o) * el[li] + tiny) / llo[li] + 2 * u * std::fabs(o) + eta;
          if (dropout) {  // O = (Σ kept p v / l)/(1 − p): keep's rounding and the division's, 4u|Ô| with margin
            o /= keep;
            e = e / keep + 4 * u * std::fabs(o) + eta;
          }
          r.out[oo] = o;
          r.out_err[oo] = live[li] == 2 ? kInf : finish(e, knobs);
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
