// nonfinite_output: finite inputs whose exact O and LSE are finite and representable give finite Ô and L̂SE — even
// where the error model lets an intermediate overflow (SPEC.md §4.5: a q·k or Σ p·v accumulated in float16, a
// result within its error of the storage dtype's largest value), where the accuracy properties must leave the
// element undecided. A kernel may return Inf or NaN there within its contract; a careful user still wants to know
// (the NaN reaches the loss): a warning. An Inf that is the correct rounding of an exact value past the storage
// dtype's range is no finding. Cases are drawn from the large-magnitude families.
#include "attncheck/compare.h"
#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <algorithm>
#include <cmath>

namespace attncheck::props {

namespace {
void require(CaseOptions &o) {
  o.family = Family::extremes;  // ±65504, subnormals: overflow a float16 accumulator, not a float32 one
}

Tier tier(const KernelContract &) { return Tier::advisory; }

/// Step finite: every element whose exact value rounds to a finite value of the tensor's dtype is finite, unless
/// it is an Inf that a value within the bound rounds to (overflow_within_bound).
bool finite_where_representable(Ladder &L, std::string_view name, const Tensor &got, const std::vector<double> &exact,
                                const std::vector<double> &bound) {
  const std::vector<double> g = got.to_vector();
  const Dtype dt = got.dtype();
  for (std::size_t x = 0; x < g.size(); ++x) {
    if (!std::isfinite(exact[x]) || !std::isfinite(round_to(dt, exact[x])) || std::isfinite(g[x]) ||
        overflow_within_bound(g[x], exact[x], bound[x], dt))
      continue;
    return L.fail(Step::finite,
                  element_name(name, got.shape(), static_cast<std::int64_t>(x)) + ": got " + hex_and_decimal(g[x]) +
                      ", exact " + hex_and_decimal(exact[x]) + " (finite inputs, a finite exact value)",
                  element_finding(Finding::Kind::value, name, got.shape(), static_cast<std::int64_t>(x), g[x],
                                  exact[x]));
  }
  return true;
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  const ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  // Only an element the kernel returned non-finite can fail: the exact values and bounds are needed there alone.
  const auto finite = [](const Tensor &t) {
    const std::vector<double> v = t.to_vector();
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (finite(fr.out) && (!fr.has_lse || finite(fr.lse))) return L.outcome();
  const ExactForward exact = reference_forward(p);
  const ForwardBounds bound = forward_bounds(p, exact, env.precision);
  finite_where_representable(L, "O", fr.out, exact.out, bound.out);
  if (fr.has_lse) finite_where_representable(L, "LSE", fr.lse, exact.lse, bound.lse);
  return L.outcome();
}
}  // namespace

const PropertyDef &nonfinite_output_property() {
  static const PropertyDef def{
      .id = "nonfinite_output",
      .formula = "q, k, v finite, fl(O), fl(LSE) finite ⇒ Ô, L̂SE finite, even where the error model allows an "
                 "overflow (SPEC §4.5)",
      .summary = "the kernel returns Inf or NaN for finite inputs whose exact result is representable (an "
                 "intermediate overflowed its accumulation dtype)",
      .require = &require,
      .tier = &tier,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
