// gradient_accuracy: the backward's dQ, dK, dV against the MPFR reference, element by element, within the error
// model's bounds (SPEC.md §4.4). The backward consumes the kernel's own forward O and LSE, which the bounds assume
// within their own bounds: a forward out of bounds fails here too (the gradients are then wrong as well). Where the
// recomputed P may overflow, the error model leaves the gradients unbounded (SPEC.md §4.5): undecided, not failed.
#include "attncheck/property.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  auto fr = std::make_shared<const ForwardRun>(run_forward(env, p));
  Ladder L;
  if (!L.call(fr->call, "forward") || !L.intact(fr->out, "O") || !L.intact(fr->lse, "LSE")) return L.outcome();
  auto br = std::make_shared<const BackwardRun>(run_backward(env, p, *fr));
  if (!L.call(br->call, "backward") || !L.intact(br->dq, "dQ") || !L.intact(br->dk, "dK") || !L.intact(br->dv, "dV"))
    return L.outcome();
  return backward_ladder(env.precision, p, fr, br);
}
}  // namespace

const PropertyDef &gradient_accuracy_property() {
  static const PropertyDef def{
      .id = "gradient_accuracy",
      .formula = "|dQ̂ − dQ| ≤ β_dQ, |dK̂ − dK| ≤ β_dK, |dV̂ − dV| ≤ β_dV for every element (SPEC §4.4)",
      .summary = "a gradient is farther from the exact value than any correct backward can be",
      .needs_backward = true,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
