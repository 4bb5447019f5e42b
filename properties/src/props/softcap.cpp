// softcap: logit softcapping s → c·tanh(s/c) (SPEC.md §2.7), applied to scale·q·k before ALiBi and the mask — O,
// LSE and the gradients within their bounds, and the limit it implies: as c → ∞ the cap is the identity, so a cap far
// above every logit gives the output without one.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
/// A cap this far above the largest |logit| changes each by less than (s/c)²/3 relative: far below any bound.
constexpr double kFarCap = 0x1p40;

Outcome run(const Env &env, const Case &c) {
  Ladder L;
  Case far = c;
  far.spec.features.softcap = kFarCap;
  Case none = c;
  none.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_SOFTCAP);
  FeatureRun capped, a, b;
  if (!call_feature(env, c.problem(), L, capped, "forward", true) ||
      !call_feature(env, far.problem(), L, a, "forward with softcap 2^40") ||
      !call_feature(env, none.problem(), L, b, "forward without softcap"))
    return L.outcome();
  return judged_runs(env, {std::move(capped), std::move(a), std::move(b)},
                     [far](std::vector<FeatureRun> &r, ExactSource &src) {
                       Ladder J;
                       if (!feature_accuracy(r[0], src, J)) return J.outcome();
                       J.judging(far, "softcap = 2^40");
                       rows_agree(J, "O (softcap 2^40 vs none)", r[1], r[2], [](std::int64_t row) { return row; });
                       return J.outcome();
                     });
}
}  // namespace

const PropertyDef &softcap_property() {
  static const PropertyDef def{
      .id = "softcap",
      .formula = "s_ij = c·tanh(scale·q_i·k_j / c) + bias: |Ô − O| ≤ β, same for LSE, dQ, dK, dV; c → ∞ gives no cap",
      .summary = "the softcap is applied wrongly (after the mask or ALiBi, to the unscaled logit, without its chain "
                 "rule in backward) or not at all",
      .require = &with_feature<ATTNCHECK_FEATURE_SOFTCAP>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_SOFTCAP>,
      .feature = ATTNCHECK_FEATURE_SOFTCAP,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
