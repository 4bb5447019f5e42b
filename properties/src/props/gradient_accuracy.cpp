// gradient_accuracy: the backward's dQ, dK, dV against the MPFR reference, element by element, within the error
// model's bounds (SPEC.md §4.4). The backward consumes the kernel's own forward O and LSE, which the bounds assume
// within their own bounds: a forward out of bounds fails here too (the gradients are then wrong as well). Where the
// recomputed P may overflow, the error model leaves the gradients unbounded (SPEC.md §4.5): undecided, not failed.
#include "attncheck/property.h"
#include "attncheck/reference.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  const BackwardRun br = run_backward(env, p, fr);
  if (!L.call(br.call, "backward") || !L.intact(br.dq, "dQ") || !L.intact(br.dk, "dK") || !L.intact(br.dv, "dV"))
    return L.outcome();
  const ExactForward exact = reference_forward(p);
  const ForwardBounds fb = forward_bounds(p, exact, env.precision);
  const ExactBackward grad = reference_backward(p);
  const BackwardBounds bb = backward_bounds(p, exact, env.precision);
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  L.finite("O (forward)", fr.out, exact.out, fb.out);
  if (fr.has_lse) L.finite("LSE (forward)", fr.lse, exact.lse, fb.lse);
  L.finite("dQ", br.dq, grad.dq, bb.dq);
  L.finite("dK", br.dk, grad.dk, bb.dk);
  L.finite("dV", br.dv, grad.dv, bb.dv);
  L.masked("dQ", br.dq, grad.dq, bb.dq);  // rows that see no key, keys no query sees: exactly 0
  L.masked("dK", br.dk, grad.dk, bb.dk);
  L.masked("dV", br.dv, grad.dv, bb.dv);
  L.within(Step::values, "O (forward)", fr.out, exact.out, fb.out);
  if (fr.has_lse) L.within(Step::values, "LSE (forward)", fr.lse, exact.lse, fb.lse);
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
      .targeted = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
