// accuracy: the forward's O and LSE against the MPFR reference, element by element, within the error model's
// bounds (SPEC.md §4.2–4.3) under the kernel's declared precision profile.
#include "attncheck/property.h"
#include "attncheck/reference.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  const ExactForward exact = reference_forward(p);
  const ForwardBounds bound = forward_bounds(p, exact, env.profile);
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  L.finite("O", fr.out, exact.out, bound.out);
  L.finite("LSE", fr.lse, exact.lse, bound.lse);
  L.masked("O", fr.out, exact.out, bound.out);
  L.masked("LSE", fr.lse, exact.lse, bound.lse);
  L.within(Step::sums, "LSE", fr.lse, exact.lse, bound.lse);  // LSE is the log of the row sum
  L.within(Step::values, "O", fr.out, exact.out, bound.out);
  return L.outcome();
}
}  // namespace

const PropertyDef &accuracy_property() {
  static const PropertyDef def{
      .id = "accuracy",
      .formula = "|Ô_ic − O_ic| ≤ β_O,ic and |L̂SE_i − LSE_i| ≤ β_LSE,i for every element (SPEC §4.2–4.3)",
      .summary = "the forward's O or LSE is farther from the exact value than any correct kernel can be",
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
