// lse: the forward's LSE alone against the reference, within its bound (SPEC.md §4.3) — so that a wrong LSE is
// caught even when O is right (O does not depend on the LSE; backward and split-KV combination do).
#include "attncheck/property.h"
#include "attncheck/screen.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  auto fr = std::make_shared<const ForwardRun>(run_forward(env, p));
  Ladder L;
  if (!L.call(fr->call, "forward") || !L.intact(fr->lse, "LSE")) return L.outcome();
  return judged(env.precision, [p, fr](ExactSource &src) {
    const auto [exact, bound] = src.forward(p);
    Ladder J;
    J.each({{"LSE", fr->lse, exact.lse, bound.lse, Step::sums}});
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &lse_property() {
  static const PropertyDef def{
      .id = "lse",
      .formula = "|L̂SE_i − log Σ_{j∈V(i)} exp(s_ij)| ≤ β_LSE,i; L̂SE_i = −∞ when V(i) = ∅ (SPEC §4.3)",
      .summary = "the log-sum-exp the kernel returns is wrong (whatever its O)",
      // A kernel that declares lse=none returns none.
      .tier = [](const KernelContract &c) { return c.lse == LseOutput::none ? Tier::off : Tier::required; },
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
