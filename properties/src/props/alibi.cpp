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
  if (!run_feature(env, c.problem(), L, a, "forward", true) ||
      !run_feature(env, std::move(zeroed), L, z, "forward with slope 0 on even heads") ||
      !run_feature(env, none.problem(), L, n, "forward without ALiBi") || !feature_accuracy(a, env.precision, L))
    return L.outcome();
  const std::int64_t Lq = c.spec.shape.Lq, Hq = c.spec.shape.Hq;
  rows_agree(L, "O (slope 0 vs no ALiBi, even heads)", z, n,
             [&](std::int64_t row) -> std::int64_t { return (row / Lq) % Hq % 2 == 0 ? row : -1; });
  return L.outcome();
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
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
