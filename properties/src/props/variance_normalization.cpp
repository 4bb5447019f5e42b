// variance_normalization: the kernel divides q·k by √D — read off its own softmax weights, in two parts.
//
// (a) Effective scale, deterministic. An integer probe (effective_scale.h: one query of ones, keys 0 and −g spread
//     over D entries, v = identity so that O = P) has q·(k_0 − k_1) = g exactly, so s_eff = (log P_0 − log P_1)/g.
//     A correct kernel returns P̂ with |P̂ − P| ≤ β_O (the error model), hence
//        log P ∈ [log(P̂ − β), log(P̂ + β)]   (≈ log P̂ ± β/P̂, plus 2 ulps of double for each log)
//     and s_eff lies in the interval those give; 1/√D outside it is a failure. At the contract scale the probe's
//     weights are ≈ (0.88, 0.12), so the interval's relative half-width is ≈ (β_0/P_0 + β_1/P_1)/2 — about u_s.
//
// (b) Unit variance of the effective logits, statistical (false alarm ≤ kFalseAlarm). A Gaussian probe of H heads,
//     each one query and L keys (i.i.d. N(0,1) entries rounded to the storage dtype, drawn from a generator seeded
//     by the case's hash; v = identity) gives m = H·L/2 logit differences d = s_eff·q̃·(k_a − k_b) over disjoint key
//     pairs. Given the rounded queries q̃ and exactly Gaussian keys k, d ~ N(0, 2 s_eff² |q̃|²) independently, so
//        T = Σ d² / (2 scale² |q̃|²)  ~  (s_eff/scale)² · χ²_m,      scale = 1/√D,
//     i.e. T/m estimates the logit variance of a query of typical norm (|q|² = D) in units of 1. The Chernoff
//     bounds P(χ²_m ≥ m(1+t)) ≤ ((1+t)e^{−t})^{m/2} and P(χ²_m ≤ m(1−t)) ≤ ((1−t)e^{t})^{m/2}, each set to
//     kFalseAlarm/2, give a rigorous acceptance region [m(1−t₋), m(1+t₊)] (m = 1024: T/m ∈ [0.72, 1.28]).
//     The d each pair of returned weights allows (the interval of (a), widened by the keys' storage rounding
//     scale·Σ|q̃|·|k̃ − k|) gives [T_lo, T_hi] ∋ T; the case fails when T_lo or T_hi leaves the region.
//     The probe's L makes Dv ≠ D by a factor ≥ 2 (L = 2 for D ≥ 4, L = 8 below), so scale 1 (variance D),
//     1/D (1/D) and 1/√Dv (D/Dv) all leave the region for every D ≥ 2. At D = 1 they coincide with 1/√D.
//     A case with Dv = D ≥ 2 (what a kernel that declines Dv ≠ D is given: CaseOptions::tie_head_dims) keeps it in
//     both probes (L = Dv = D; effective_scale.h): 1/√Dv is then 1/√D, and scale 1 and 1/D still leave the region.
//
// The case supplies D, the dtype, the layout and (through its hash) the Gaussian draws; it is itself never run.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"
#include "../effective_scale.h"
#include "../slack.h"

#include <cmath>
#include <memory>
#include <sstream>
#include <string>

namespace attncheck::props {

namespace {
using probe::Interval;

/// m: key pairs in the Gaussian probe (degrees of freedom of the χ² statistic).
constexpr std::int64_t kStatPairs = 1024;
/// Below this D the Gaussian probe uses kWideProbeKeys keys per head (Dv = 8 ≥ 2·D), from it on 2 (Dv ≤ D/2).
constexpr std::int64_t kWideProbeMaxD = 3;
constexpr std::int64_t kWideProbeKeys = 8, kNarrowProbeKeys = 2;
/// Bisection steps for the Chernoff thresholds (each halves a bracket of width ≤ 1 + log(2/α)).
constexpr int kBisectionSteps = 200;

void require(CaseOptions &o) {
  o.family = Family::normal;
  o.mask = Mask::none;
  o.dv_equals_lk = true;
  o.draw_v = false;  // the case's values only seed the probes
  o.tied_min_keys = 2;  // under tie_head_dims, D = Lk ≥ 2: probes with Dv = D (probe_dv_equals_d)
  o.reach = false;      // the case only seeds the probes (D, dtype, hash): its long rows would be drawn for nothing
}

/// The t > 0 with (m/2)·f(t) = log(2/α) for an increasing f on (0, t_max): the Chernoff threshold of one tail.
template <class F>
double chernoff_t(double m, F f, double t_max) {
  const double target = std::log(2 / kFalseAlarm) * 2 / m;
  double lo = 0, hi = t_max;
  for (int n = 0; n < kBisectionSteps; ++n) {
    const double mid = (lo + hi) / 2;
    (f(mid) < target ? lo : hi) = mid;
  }
  return hi;  // f(hi) ≥ target: the tail beyond is at most α/2
}

/// Acceptance region of T for m degrees of freedom: [m(1 − t₋), m(1 + t₊)].
Interval acceptance(double m) {
  const double t_plus = chernoff_t(m, [](double t) { return t - std::log1p(t); }, 1 + 4 * std::log(2 / kFalseAlarm));
  const double t_minus = chernoff_t(m, [](double t) { return -t - std::log1p(-t); }, 1);
  return Interval{probe::down(m * (1 - t_minus)), probe::up(m * (1 + t_plus))};
}

/// The Gaussian probe of part (b) and the unrounded key draws.
struct GaussProbe {
  Case c;
  std::vector<double> k_drawn;  ///< k before rounding to the storage dtype: the exactly Gaussian keys
};
GaussProbe gauss_probe(const Case &base) {
  GaussProbe g;
  Case &c = g.c;
  c.spec = base.spec;
  c.spec.mask = Mask::none;
  const std::int64_t D = base.spec.shape.D;
  const std::int64_t L = probe::probe_dv_equals_d(base.spec.shape) ? D
                         : D <= kWideProbeMaxD                     ? kWideProbeKeys
                                                                   : kNarrowProbeKeys;
  const std::int64_t H = 2 * kStatPairs / L;
  c.spec.shape = Shape{.B = 1, .Hq = H, .Hkv = H, .Lq = 1, .Lk = L, .D = D, .Dv = L};
  c.resize_values(false);
  probe::Normal normal(probe::case_hash(base));
  for (double &x : c.q) x = round_to(c.spec.dtype, normal());
  g.k_drawn.resize(c.k.size());
  for (std::size_t n = 0; n < c.k.size(); ++n) c.k[n] = round_to(c.spec.dtype, g.k_drawn[n] = normal());
  probe::set_identity_v(c);
  return g;
}

/// T's enclosure [T_lo, T_hi] and its point value from the returned weights (see the file comment).
struct Statistic {
  Interval T;
  double point = 0;
  double m = 0;
};
Statistic statistic(const GaussProbe &g, double scale, const std::vector<double> &p_hat,
                    const std::vector<double> &beta) {
  const Shape &s = g.c.spec.shape;
  const auto D = static_cast<std::size_t>(s.D), L = static_cast<std::size_t>(s.Lk);
  Statistic st;
  double lo = 0, hi = 0;
  for (std::size_t h = 0; h < static_cast<std::size_t>(s.Hq); ++h) {
    const double *q = g.c.q.data() + h * D;
    double q2 = 0;
    for (std::size_t d = 0; d < D; ++d) q2 += q[d] * q[d];
    if (q2 == 0) continue;  // d = 0 whatever the scale: no information
    const double var = 2 * scale * scale * q2;  // of d under the contract
    for (std::size_t a = 0; a + 1 < L; a += 2) {
      const std::size_t b = a + 1, pa = h * L + a, pb = h * L + b;
      Interval d = probe::log_ratio(p_hat[pa], beta[pa], p_hat[pb], beta[pb]);
      // The kernel's exact logits use the rounded keys k̃; the χ² law is that of the drawn keys k.
      double e = 0;
      for (std::size_t x = 0; x < D; ++x) {
        const std::size_t ka = (h * L + a) * D + x, kb = (h * L + b) * D + x;
        e += std::abs(q[x]) * (std::abs(g.c.k[ka] - g.k_drawn[ka]) + std::abs(g.c.k[kb] - g.k_drawn[kb]));
      }
      e = probe::up(scale * e * (1 + static_cast<double>(2 * D + 2) * kDoubleRoundoff));
      d = Interval{probe::down(d.lo - e), probe::up(d.hi + e)};
      const Interval d2 = probe::square(d);
      lo += d2.lo / var;
      hi += d2.hi / var;
      const double point = std::log(p_hat[pa]) - std::log(p_hat[pb]);
      st.point += point * point / var;
      st.m += 1;
    }
  }
  // Rounding of these sums of non-negative terms (and of var): relative (m + D + 4)·u at most.
  const double slack = (st.m + static_cast<double>(D) + 4) * kDoubleRoundoff;
  st.T = Interval{probe::down(lo * (1 - slack)), probe::up(hi * (1 + slack))};
  return st;
}

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(4);
  os << x;
  return os.str();
}

/// The notes of parts (a) and (b) — how far the probes are from failing — from the effective-scale interval and the
/// statistic that bounds of the two probes' weights give: each is non-increasing in the bounds (wider bounds, wider
/// intervals).
struct Notes {
  double scale = 0, variance = 0;
};

Outcome run(const Env &env, const Case &c) {
  auto sp = std::make_shared<const probe::ScaleProbe>(probe::scale_probe(c.spec));
  auto gp = std::make_shared<const GaussProbe>(gauss_probe(c));
  const Problem pa = sp->c.problem(), pb = gp->c.problem();
  const ForwardRun fa = run_forward(env, pa), fb = run_forward(env, pb);
  Ladder L;
  // The case itself is never run: every check judges one of the two probes; a failure records it.
  const auto judge_integer = [sp](Ladder &J) {
    J.judging(sp->c, "integer probe: q = 1, keys 0 and −g, v = I (O = P)");
  };
  const auto judge_gauss = [gp](Ladder &J) {
    J.judging(gp->c, "Gaussian probe: N(0,1) q, k seeded by the case, v = I (O = P)");
  };
  judge_integer(L);
  if (!L.call(fa.call, "forward (integer probe)")) return L.outcome();
  judge_gauss(L);
  if (!L.call(fb.call, "forward (Gaussian probe)")) return L.outcome();
  judge_integer(L);
  if (!L.intact(fa.out, "O(integer probe)")) return L.outcome();
  judge_gauss(L);
  if (!L.intact(fb.out, "O(Gaussian probe)")) return L.outcome();
  // Judged through the screen (screen.h): the exact weights feed only the finite step and the bounds, and a pass under
  // the screen's narrower bounds β' ≤ β is a pass under β (both parts fail only when an interval that grows with the
  // bounds excludes the contract). Its notes lie between those from β' and from an upper bound of β.
  auto outs = std::make_shared<const std::pair<Tensor, Tensor>>(fa.out, fb.out);
  const double root_d = std::sqrt(static_cast<double>(c.spec.shape.D));
  const std::int64_t D = c.spec.shape.D;
  return judged(env.precision, [sp, gp, pa, pb, outs, root_d, D, judge_integer, judge_gauss](ExactSource &src) {
    const Tensor &out_a = outs->first, &out_b = outs->second;
    src.values_not_compared();
    const auto [ea, ba] = src.forward(pa);
    const std::vector<double> ba_upper = src.out_bound_upper(ba.out);
    const auto [eb, bb] = src.forward(pb);
    const std::vector<double> bb_upper = src.out_bound_upper(bb.out);
    Ladder J;
    judge_integer(J);
    if (!J.finite("O(integer probe)", out_a, ea.out, ba.out)) return J.outcome();
    judge_gauss(J);
    if (!J.finite("O(Gaussian probe)", out_b, eb.out, bb.out)) return J.outcome();
    for (const std::vector<double> *bound : {&ba.out, &bb.out})
      for (double x : *bound)
        if (!std::isfinite(x)) {
          J.undecided(Step::values, "the error model cannot bound a probe weight (infinite β_O)");
          return J.outcome();
        }
    const double scale = pa.params.scale;
    const std::vector<double> p_int = out_a.to_vector(), p_gauss = out_b.to_vector();
    const double est = (std::log(p_int[0]) - std::log(p_int[1])) / sp->gap;
    const Interval s = probe::effective_scale(*sp, p_int, ba.out);
    const Statistic st = statistic(*gp, pb.params.scale, p_gauss, bb.out);
    const Interval accept = acceptance(st.m);  // m counts the key pairs, whatever the bounds
    const auto notes = [&](const Interval &si, const Statistic &sti) {
      const double half = std::max(si.hi - est, est - si.lo);
      return Notes{std::abs(est - scale) / half, std::max(sti.T.lo / accept.hi, accept.lo / sti.T.hi)};
    };
    const Notes n = notes(s, st);
    if (ba_upper != ba.out || bb_upper != bb.out) {  // the screen: its ratio may exceed the exact one (screen.h)
      const Notes lo = notes(probe::effective_scale(*sp, p_int, ba_upper),
                             statistic(*gp, pb.params.scale, p_gauss, bb_upper));
      const double worst = std::max(n.scale, n.variance), least = std::max(lo.scale, lo.variance);
      if (worst > 0) src.widen_slack(std::max(0.0, (worst * (1 - 2 * kScreenMargin) - least) /
                                                       (worst * (1 + 2 * kScreenMargin))));
    }

    // (a) the effective scale of the integer probe.
    judge_integer(J);
    J.note(n.scale, "scale_eff " + hex_and_decimal(est) + " vs 1/√D " + hex_and_decimal(scale));
    if (!s.contains(scale))
      J.fail(Step::values, "effective logit scale " + hex_and_decimal(est) + " (" + fmt(est * root_d) +
                               "/√D) ∉ [" + hex_and_decimal(s.lo) + ", " + hex_and_decimal(s.hi) +
                               "] allowed by the error model, 1/√D = " + hex_and_decimal(scale) +
                               ": integer probe q = 1, q·(k_0 − k_1) = " + fmt(sp->gap) + ", P̂ = (" +
                               hex_and_decimal(p_int[0]) + ", " + hex_and_decimal(p_int[1]) + ")",
             aggregate_finding("effective logit scale"));
    if (J.failed()) return J.outcome();

    // (b) the variance of the effective logits of N(0, 1) q, k.
    judge_gauss(J);
    J.note(n.variance, "Gaussian probe: T/m = " + fmt(st.point / st.m));
    if (st.T.lo > accept.hi || st.T.hi < accept.lo)
      J.fail(Step::values, "effective logits of N(0,1) q, k have variance " + fmt(st.point / st.m) + " (at least " +
                               fmt(st.T.lo / st.m) + ", at most " + fmt(st.T.hi / st.m) +
                               ") for |q|² = D, outside the acceptance region [" + fmt(accept.lo / st.m) + ", " +
                               fmt(accept.hi / st.m) + "] of a correct kernel (false alarm ≤ 1e-6, m = " +
                               fmt(st.m) + " key pairs, D = " + std::to_string(D) + ", Dv = " +
                               std::to_string(gp->c.spec.shape.Dv) + ")",
             aggregate_finding("effective logit variance"));
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &variance_normalization_property() {
  static const PropertyDef def{
      .id = "variance_normalization",
      .formula = "(log P_ij − log P_ik)/(q_i·(k_j − k_k)) = 1/√D;  q, k ~ N(0,1) ⇒ Var(s_eff·q·k) = 1 (false alarm ≤ 1e-6)",
      .summary = "the kernel scales q·k by something other than 1/√D, so its logits do not have unit variance",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
