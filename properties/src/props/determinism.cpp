// determinism: the same inputs give the same results, whatever the outputs held before (SPEC.md §3). Each output
// is held to what the kernel's contract promises (repeated_calls.h): bitwise (forward-determinism=bitwise, the
// default for the forward) or within the error bound (backward-determinism=within-bound, the default for the
// backward: FlashAttention-2 accumulates dQ with atomics). Where only the bound is promised, the bits are
// bitwise_determinism's (a warning).
//
// A difference where one result is NaN and the other is not fails the finite step (typically an output accumulated
// onto, or never written over, what the buffer held); any other difference fails the values step.
#include "repeated_calls.h"

#include "attncheck/reference.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  Ladder L;
  repeated::Calls calls;
  if (!repeated::run_calls(env, p, L, calls)) return L.outcome();

  // Bounds only for what is promised within them.
  std::vector<std::vector<double>> bounds(calls.outputs.size());
  bool any_bound = false;
  for (const repeated::Triple &t : calls.outputs) any_bound |= !repeated::promised_bitwise(env.contract, t);
  if (any_bound) {
    const ExactForward exact = reference_forward(p);
    const ForwardBounds fb = forward_bounds(p, exact, env.precision);
    std::optional<BackwardBounds> bb;
    for (std::size_t n = 0; n < calls.outputs.size(); ++n) {
      const repeated::Triple &t = calls.outputs[n];
      if (repeated::promised_bitwise(env.contract, t)) continue;
      if (t.backward && !bb) bb = backward_bounds(p, exact, env.precision);
      bounds[n] = t.name == "O" ? fb.out : t.name == "LSE" ? fb.lse : t.name == "dQ" ? bb->dq
                                                                     : t.name == "dK" ? bb->dk : bb->dv;
    }
  }
  for (const repeated::Triple &t : calls.outputs) repeated::agree(L, t, Step::finite, {});
  for (std::size_t n = 0; n < calls.outputs.size(); ++n)
    repeated::agree(L, calls.outputs[n], Step::values, bounds[n]);
  return L.outcome();
}
}  // namespace

const PropertyDef &determinism_property() {
  static const PropertyDef def{
      .id = "determinism",
      .formula = "f(x) ≡ f(x) for O, LSE (and dQ, dK, dV) across calls and whatever the outputs held before: "
                 "bitwise, or within 2β where the contract promises only the bound",
      .summary = "the kernel's results change from call to call beyond its contract, or depend on what the output "
                 "buffers held",
      .require = &repeated::require,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
