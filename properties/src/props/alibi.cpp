// alibi: ALiBi biases −slope_h·|i' − j| (SPEC.md §2.7), slopes 2^(−8(h+1)/Hq) — O, LSE and the gradients within
// their bounds, and the relation per head: a head whose slope is 0 gives the output without ALiBi.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  // Slopes 0 on every other head (even ones): those heads must match the run without ALiBi.
  Problem zeroed = c.problem();
  for (std::size_t h = 0; h < zeroed.features.alibi_slopes.size(); h += 2) zeroed.features.alibi_slopes[h] = 0;
  Case none = c;
  none.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_ALIBI);
  FeatureRun a, z, n;
  if (!call_feature(env, c.problem(), L, a, "forward", true) ||
      !call_feature(env, std::move(zeroed), L, z, "forward with slope 0 on even heads") ||
      !call_feature(env, none.problem(), L, n, "forward without ALiBi"))
    return L.outcome();
  const std::int64_t Lq = c.spec.shape.Lq, Hq = c.spec.shape.Hq;
  return judged_runs(env, {std::move(a), std::move(z), std::move(n)},
                     [Lq, Hq](std::vector<FeatureRun> &r, ExactSource &src) {
                       Ladder J;
                       if (!feature_accuracy(r[0], src, J)) return J.outcome();
                       rows_agree(J, "O (slope 0 vs no ALiBi, even heads)", r[1], r[2],
                                  [&](std::int64_t row) -> std::int64_t { return (row / Lq) % Hq % 2 == 0 ? row : -1; });
                       return J.outcome();
                     });
}
}  // namespace

const PropertyDef &alibi_property() {
  static const PropertyDef def{
      .id = "alibi",
      .formula = "s_ij = scale·q_i·k_j − slope_h·|i' − j|: |Ô − O| ≤ β, same for LSE, dQ, dK, dV; slope 0 = no ALiBi",
      .summary = "ALiBi biases are wrong: slopes of another head (reversed order), distances from the wrong "
                 "alignment, or a sign flipped",
      .require = &with_feature<ATTNCHECK_FEATURE_ALIBI>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_ALIBI>,
      .feature = ATTNCHECK_FEATURE_ALIBI,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
