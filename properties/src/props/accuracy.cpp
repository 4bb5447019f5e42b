// accuracy: the forward's O and LSE against the MPFR reference, element by element, within the error model's
// bounds (SPEC.md §4.2–4.3) under the kernel's declared precision profile.
#include "attncheck/property.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) { return forward_accuracy(env, c.problem()); }
}  // namespace

const PropertyDef &accuracy_property() {
  static const PropertyDef def{
      .id = "accuracy",
      .formula = "|Ô_ic − O_ic| ≤ β_O,ic and |L̂SE_i − LSE_i| ≤ β_LSE,i for every element (SPEC §4.2–4.3)",
      .summary = "the forward's O or LSE is farther from the exact value than any correct kernel can be",
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
