// gradient_accuracy: the backward's dQ, dK, dV against the MPFR reference, element by element, within the error
// model's bounds (SPEC.md §4.4). The backward consumes the kernel's own forward O and LSE, which the bounds assume
// within their own bounds: a forward out of bounds fails here too (the gradients are then wrong as well).
#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <algorithm>
#include <cmath>

namespace attncheck::props {

namespace {
/// Largest |s_ij| = |scale·q_i·k_j| over the problem (every pair; masking only lowers it).
double max_logit(const Problem &p) {
  const Shape &s = p.shape;
  double m = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i)
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < s.D; ++d) dot += p.q.get({b, h, i, d}) * p.k.get({b, s.kv_head(h), j, d});
          m = std::max(m, std::abs(p.params.scale * dot));
        }
  return m;
}

/// The backward recomputes P = exp(ŝ − L̂SE), whose argument errs by up to u_a(|s| + |LSE|) ≤ u_a(2·max|s| + ln Lk).
/// When that error alone can reach the accumulation dtype's exp overflow (ln of its largest finite value), P̂ may
/// be +∞ and ∞·0 = NaN in a correct kernel: the error model (finite arithmetic) does not cover the case.
bool recomputed_p_may_overflow(const Problem &p, const PrecisionProfile &profile) {
  const double u = unit_roundoff(profile.accumulate);
  const double argument_error = u * (2 * max_logit(p) + std::log(static_cast<double>(p.shape.Lk)));
  return argument_error >= std::log(max_finite(profile.accumulate));
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  const BackwardRun br = run_backward(env, p, fr);
  if (!L.call(br.call, "backward") || !L.intact(br.dq, "dQ") || !L.intact(br.dk, "dK") || !L.intact(br.dv, "dV"))
    return L.outcome();
  if (recomputed_p_may_overflow(p, env.profile)) {
    L.undecided(Step::shape, "logits up to " + hex_and_decimal(max_logit(p)) +
                                 ": the backward's recomputed P may overflow, outside the error model");
    return L.outcome();
  }
  const ExactForward exact = reference_forward(p);
  const ForwardBounds fb = forward_bounds(p, exact, env.profile);
  const ExactBackward grad = reference_backward(p);
  const BackwardBounds bb = backward_bounds(p, exact, env.profile);
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  L.finite("O (forward)", fr.out, exact.out, fb.out);
  L.finite("LSE (forward)", fr.lse, exact.lse, fb.lse);
  L.finite("dQ", br.dq, grad.dq, bb.dq);
  L.finite("dK", br.dk, grad.dk, bb.dk);
  L.finite("dV", br.dv, grad.dv, bb.dv);
  L.masked("dQ", br.dq, grad.dq, bb.dq);  // rows that see no key, keys no query sees: exactly 0
  L.masked("dK", br.dk, grad.dk, bb.dk);
  L.masked("dV", br.dv, grad.dv, bb.dv);
  L.within(Step::values, "O (forward)", fr.out, exact.out, fb.out);
  L.within(Step::values, "LSE (forward)", fr.lse, exact.lse, fb.lse);
  L.within(Step::values, "dQ", br.dq, grad.dq, bb.dq);
  L.within(Step::values, "dK", br.dk, grad.dk, bb.dk);
  L.within(Step::values, "dV", br.dv, grad.dv, bb.dv);
  return L.outcome();
}
}  // namespace

const PropertyDef &gradient_accuracy_property() {
  static const PropertyDef def{
      .id = "gradient_accuracy",
      .formula = "|dQ̂ − dQ| ≤ β_dQ, |dK̂ − dK| ≤ β_dK, |dV̂ − dV| ≤ β_dV for every element (SPEC §4.4)",
      .summary = "a gradient is farther from the exact value than any correct backward can be",
      .needs_backward = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
