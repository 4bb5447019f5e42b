// convex_hull: each output row is a convex combination of the values its query sees (softmax weights are ≥ 0 and
// sum to 1), so O[i, c] lies in [min_j v_jc, max_j v_jc] over the visible keys j — up to the element's error bound
// β_O (SPEC.md §4.2). A check of the values step that compares with no reference value, only the hull and the
// bound; rows that see no key must be exactly 0.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

namespace attncheck::props {

namespace {
/// Per output element of `p`: the nearest point of [min_j v_jc, max_j v_jc] over the keys j row i sees (kv head
/// h / G) to `got`; 0 in rows that see no key (their exact O).
std::vector<double> nearest_hull_point(const Problem &p, const std::vector<double> &got) {
  const Shape &s = p.shape;
  std::vector<double> out(got.size(), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const std::int64_t seen = visible_count(p.params.mask, i, s.Lq, s.Lk);  // keys 0 … seen−1 (a prefix)
        if (seen == 0) continue;
        for (std::int64_t x = 0; x < s.Dv; ++x) {
          double lo = std::numeric_limits<double>::infinity(), hi = -lo;
          for (std::int64_t j = 0; j < seen; ++j) {
            const double vj = p.v.get({b, s.kv_head(h), j, x});
            lo = std::min(lo, vj);
            hi = std::max(hi, vj);
          }
          const auto at = static_cast<std::size_t>(out_offset(s, b, h, i, x));
          out[at] = std::clamp(got[at], lo, hi);  // a NaN got stays NaN (and fails the finite step first)
        }
      }
  return out;
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O")) return L.outcome();
  auto called = std::make_shared<const ForwardRun>(std::move(fr));
  return judged(env.precision, [p, called, contract = env.contract](ExactSource &src) {
    src.values_not_compared();  // against the hull of the values
    const auto [exact, bound] = src.forward(p);  // for the bounds (and the finite step) only
    auto run = std::make_shared<ForwardRun>(*called);
    leave_unspecified_rows(contract, p, exact, *run);
    std::vector<double> got = run->out.to_vector();
    for (std::size_t x = 0; x < got.size(); ++x)  // a legitimate overflow (SPEC.md §4.5) counts as its exact value
      if (overflow_within_bound(got[x], exact.out[x], bound.out[x], p.dtype())) got[x] = exact.out[x];
    Ladder L;
    // Each check is a no-op once one has failed: the outcome names the first failing step.
    L.each({{"O", run->out, exact.out, bound.out, Step::mask}});  // finite, masked; its values step:
    L.within(Step::values, "O vs its nearest point of [min_j v_jc, max_j v_jc]", got, nearest_hull_point(p, got),
             bound.out, run->out.shape());
    return L.outcome();
  });
}
}  // namespace

const PropertyDef &convex_hull_property() {
  static const PropertyDef def{
      .id = "convex_hull",
      .formula = "min_{j∈V(i)} v_jc − β_O,ic ≤ Ô_ic ≤ max_{j∈V(i)} v_jc + β_O,ic;  Ô_i = 0 when V(i) = ∅",
      .summary =
          "an output leaves the range of the values its query sees (weights that do not sum to 1 or go "
          "negative, a key the query must not see)",
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
