// bitwise_determinism: the outputs whose contract promises only the error bound (backward-determinism=within-bound,
// the default; forward-determinism=within-bound) are bitwise reproducible anyway — what a careful user wants for
// reproducible training runs and bisecting, beyond what the kernel promises: a warning. Off when everything is
// promised bitwise (determinism checks the bits then).
#include "repeated_calls.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  repeated::Calls calls;
  if (!repeated::run_calls(env, c.problem(), L, calls)) return L.outcome();
  std::vector<const repeated::Triple *> unpromised;
  for (const repeated::Triple &t : calls.outputs)
    if (!repeated::promised_bitwise(env.contract, t)) unpromised.push_back(&t);
  for (const repeated::Triple *t : unpromised) repeated::agree(L, *t, Step::finite, {});
  for (const repeated::Triple *t : unpromised) repeated::agree(L, *t, Step::values, {});
  return L.outcome();
}

Tier tier(const KernelContract &k) {
  return k.forward_determinism == Determinism::bitwise && k.backward_determinism == Determinism::bitwise
             ? Tier::off
             : Tier::advisory;
}
}  // namespace

const PropertyDef &bitwise_determinism_property() {
  static const PropertyDef def{
      .id = "bitwise_determinism",
      .formula = "f(x) ≡ f(x) bitwise for the outputs the contract promises only within 2β",
      .summary = "results differ in their bits from call to call (e.g. atomic accumulation), within the bound",
      .require = &repeated::require,
      .tier = &tier,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
