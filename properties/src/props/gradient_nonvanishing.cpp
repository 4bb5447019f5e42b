// gradient_nonvanishing: for N(0,1) inputs the gradients reaching q and k keep the size the 1/√D scale gives them.
// Without the scale the logits have variance D, the softmax saturates (P one-hot, dS = P(dP − D) → 0) and
// ‖dQ‖/‖dO‖, ‖dK‖/‖dO‖ collapse; with 1/D they flatten instead. Both are compared with the reference on the SAME
// inputs, which makes the check deterministic (a band over random draws would have to be wider than the spread of
// ‖dQ‖/‖dO‖ across draws, and so weaker; its false-alarm rate here is 0 given the error model's soundness):
//
//   with a backward:   |‖dQ̂‖ − ‖dQ‖| ≤ ‖dQ̂ − dQ‖₂ ≤ ‖β_dQ‖₂   (triangle inequality; β element-wise, SPEC §4.4)
//                      and the same for dK, all divided by ‖dO‖ (1 when dO = 0), plus the rounding of the norms.
//   forward only:      the gradient autodiff would give through this forward is the reference's at the kernel's
//                      effective scale. The integer probe of variance_normalization encloses that scale in
//                      [s_lo, s_hi]; if 1/√D is inside, the gradients are the contract's. Otherwise the reference
//                      gradient norms at s_lo and s_hi must both be out of the contract's band
//                      [‖dQ‖ − ‖β_dQ‖₂, ‖dQ‖ + ‖β_dQ‖₂] (on the same side) to fail — a gradient no correct backward of
//                      a correct forward could produce. The interval [s_lo, s_hi] itself comes from the bounds of
//                      the probe at the kernel's estimated scale ŝ = (log P̂_0 − log P̂_1)/g (the model "this
//                      forward is correct attention at some scale"): the contract's bounds would be loose for
//                      weights far from the contract's. A probe weight that underflowed to 0 is undecided.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"
#include "../effective_scale.h"

#include <cmath>
#include <memory>
#include <string>

namespace attncheck::props {

namespace {
using probe::Interval;

void require(CaseOptions &o) {
  o.family = Family::normal;  // the setting of the 1/√D argument
  o.backward = true;          // dout: the reference gradient is needed even for forward-only kernels
}

/// ‖x‖₂ computed in double, and an upper bound on its rounding error: relative (n/2 + 2)·u for the sum of squares
/// and the square root, taken as (n + 4)·u.
struct Norm {
  double value = 0, rounding = 0;
};
Norm norm2(const std::vector<double> &x) {
  double s = 0;
  for (double v : x) s += v * v;
  const double n = std::sqrt(s);
  return Norm{n, n * (static_cast<double>(x.size()) + 4) * kDoubleRoundoff};
}

/// The contract's band for one gradient: its exact norm and the bound on a correct kernel's norm (∞ when the error
/// model cannot bound an element).
struct Band {
  double exact = 0, bound = 0;
};
Band band(const std::vector<double> &exact, const std::vector<double> &beta) {
  const Norm e = norm2(exact), b = norm2(beta);
  return Band{e.value, probe::up((b.value + b.rounding + e.rounding) * (1 + 2 * kDoubleRoundoff))};
}

/// The band from the screen's values r̃ (within ε of the exact ones) and bounds β' (β' + ε ≤ β): the bound narrowed
/// so that a norm within it of ‖r̃‖ is within the exact band of ‖dQ‖. As |‖r̃‖ − ‖dQ‖| ≤ ‖ε‖ and ‖β'‖ ≤ ‖β‖, taking
/// 3‖ε‖ off (one for each: the norms, and ‖r̃‖'s rounding term) and the screen's margin τ (the rounding of the
/// norms and of the comparison) leaves a bound below the exact one by more than ‖ε‖. The exact ratio then lies within
/// ‖ε‖/bound of the screened one (screen.h: the source's slack widens for it); a bound not left positive escalates.
Band screened_band(const std::vector<double> &value, const std::vector<double> &beta, const std::vector<double> &eps,
                   ExactSource &src) {
  Band b = band(value, beta);
  const Norm e = norm2(eps);
  const double e_norm = probe::up(e.value + e.rounding);
  b.bound = probe::down(b.bound * (1 - kScreenMargin) - 3 * e_norm);
  if (!(b.bound > 0)) throw ScreenEscalates("a gradient norm's bound the screen's error leaves no room for");
  src.widen_slack(4 * e_norm / b.bound);
  return b;
}

/// ‖dO‖ (1 when dO = 0): the unit the norms are reported in.
double unit(const Case &c) {
  const double n = norm2(c.dout).value;
  return n > 0 ? n : 1.0;
}

/// The norm ratios of the backward path: kernel vs reference, each ÷ ‖dO‖, bound included.
void compare_norms(Ladder &L, const char *name, const std::vector<double> &got, const Band &b, double per) {
  const Norm g = norm2(got);
  L.within(Step::values, std::string(name) + "/‖dO‖", std::vector<double>{g.value / per},
           std::vector<double>{b.exact / per}, std::vector<double>{(b.bound + g.rounding) / per}, {1});
}

Outcome with_backward(const Env &env, const Case &c, const Problem &p) {
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  auto br = std::make_shared<const BackwardRun>(run_backward(env, p, fr));
  if (!L.call(br->call, "backward") || !L.intact(br->dq, "dQ") || !L.intact(br->dk, "dK")) return L.outcome();
  const double per = unit(c);
  return judged(env.precision, [p, br, per](ExactSource &src) {
    const ExactForward exact = src.forward(p).first;
    const auto [grad, bb] = src.backward(p, exact);
    const ExactBackward *eps = src.backward_errors();
    const auto band_of = [&](const std::vector<double> &value, const std::vector<double> &beta,
                             std::vector<double> ExactBackward::*field) {
      return eps ? screened_band(value, beta, (*eps).*field, src) : band(value, beta);
    };
    Ladder J;
    J.finite("dQ", br->dq, grad.dq, bb.dq);
    J.finite("dK", br->dk, grad.dk, bb.dk);
    if (!J.failed()) compare_norms(J, "‖dQ‖", br->dq.to_vector(), band_of(grad.dq, bb.dq, &ExactBackward::dq), per);
    if (!J.failed()) compare_norms(J, "‖dK‖", br->dk.to_vector(), band_of(grad.dk, bb.dk, &ExactBackward::dk), per);
    return J.outcome();
  });
}

Outcome forward_only(const Env &env, const Case &c, const Problem &p) {
  const probe::ScaleProbe sp = probe::scale_probe(c.spec);
  const Problem pp = sp.c.problem();
  const ForwardRun fr = run_forward(env, pp);
  Ladder L;
  if (!L.call(fr.call, "forward (integer probe)") || !L.intact(fr.out, "O(integer probe)")) return L.outcome();
  const ExactForward ep = reference_forward(pp);
  const ForwardBounds bp = forward_bounds(pp, ep, env.precision);
  if (!L.finite("O(integer probe)", fr.out, ep.out, bp.out)) return L.outcome();
  const std::vector<double> p_hat = fr.out.to_vector();
  const Interval s = probe::effective_scale(sp, p_hat, bp.out);
  if (s.contains(p.params.scale)) return L.outcome();  // the contract's gradients
  // 1/√D is excluded. The contract's bounds are a correct kernel's, and loose for weights far from the contract's
  // (a saturated weight below them leaves the interval open): re-enclose the scale with the bounds of a kernel that
  // is correct at its own estimated scale — the model "this forward is attention at some scale s".
  const double est = (std::log(p_hat[0]) - std::log(p_hat[1])) / sp.gap;
  Interval own{-probe::kInf, probe::kInf};
  if (std::isfinite(est) && est > 0) {
    Problem at = pp;
    at.params.scale = est;
    own = probe::effective_scale(sp, p_hat, forward_bounds(at, reference_forward(at), env.precision).out);
  }
  if (!own.finite() || own.lo <= 0) {
    L.undecided(Step::values, "the probe's weights (" + hex_and_decimal(p_hat[0]) + ", " +
                                  hex_and_decimal(p_hat[1]) + ") pin no finite effective scale: no gradient to compare");
    return L.outcome();
  }
  const ExactForward exact = reference_forward(p);
  const ExactBackward grad = reference_backward(p);
  const BackwardBounds bb = backward_bounds(p, exact, env.precision);
  const Band bq = band(grad.dq, bb.dq), bk = band(grad.dk, bb.dk);
  const double per = unit(c);
  // The reference gradient at each end of the scale interval, as a forward-only kernel's autodiff gradient.
  std::vector<ExactBackward> at;
  for (double scale : {own.lo, own.hi}) {
    Problem q = p;
    q.params.scale = scale;
    at.push_back(reference_backward(q));
  }
  auto check = [&](const char *name, const Band &b, std::vector<double> ExactBackward::*field) {
    // Fail only if both ends lie outside the band on the same side; else report the nearer end.
    double got[2];
    for (int e = 0; e < 2; ++e) got[e] = norm2(at[static_cast<std::size_t>(e)].*field).value;
    const bool above = got[0] > b.exact + b.bound && got[1] > b.exact + b.bound;
    const bool below = got[0] < b.exact - b.bound && got[1] < b.exact - b.bound;
    const double nearer = std::abs(got[0] - b.exact) < std::abs(got[1] - b.exact) ? got[0] : got[1];
    const double reported = (above || below) ? nearer : b.exact;
    L.within(Step::values, std::string(name) + "/‖dO‖ at the effective scale", std::vector<double>{reported / per},
             std::vector<double>{b.exact / per}, std::vector<double>{b.bound / per}, {1});
  };
  check("‖dQ‖", bq, &ExactBackward::dq);
  if (!L.failed()) check("‖dK‖", bk, &ExactBackward::dk);
  if (L.failed()) {
    Outcome o = L.outcome();
    o.detail += "; effective scale in [" + hex_and_decimal(own.lo) + ", " + hex_and_decimal(own.hi) +
                "], 1/√D = " + hex_and_decimal(p.params.scale) + " (forward-only kernel)";
    return o;
  }
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  return env.kernel.backward != nullptr ? with_backward(env, c, p) : forward_only(env, c, p);
}
}  // namespace

const PropertyDef &gradient_nonvanishing_property() {
  static const PropertyDef def{
      .id = "gradient_nonvanishing",
      .formula = "q, k ~ N(0,1): |‖dQ̂‖ − ‖dQ‖| ≤ ‖β_dQ‖₂ and |‖dK̂‖ − ‖dK‖| ≤ ‖β_dK‖₂ (÷‖dO‖); forward only: at s_eff",
      .summary = "the gradients reaching q and k collapse (saturated softmax) or blow up because the logits are "
                 "not scaled by 1/√D",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
