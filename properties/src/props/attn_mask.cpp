// attn_mask: an arbitrary mask tensor (SPEC.md §2.7), boolean or additive, broadcast over batches and heads or not
// — O, LSE and the gradients within their bounds (rows it hides entirely: O = 0, LSE = −∞), and the relation between
// its two forms: a boolean mask gives the output of the additive mask of 0 and −∞ with the same pattern.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  FeatureRun a, b;
  if (!call_feature(env, c.problem(), L, a, "forward", true)) return L.outcome();
  const bool boolean = a.p.features.mask_kind == MaskKind::boolean;
  std::vector<FeatureRun> runs{std::move(a)};
  if (boolean) {
    Problem additive = c.problem();
    additive.features.mask_kind = MaskKind::additive;
    for (double &m : additive.features.mask) m = m != 0 ? 0.0 : -std::numeric_limits<double>::infinity();
    if (!call_feature(env, std::move(additive), L, b, "forward with the mask as 0 / −∞")) return L.outcome();
    runs.push_back(std::move(b));
  }
  return judged_runs(env, std::move(runs), [](std::vector<FeatureRun> &r, ExactSource &src) {
    Ladder J;
    if (!feature_accuracy(r[0], src, J) || r.size() < 2) return J.outcome();
    rows_agree(J, "O (boolean vs additive mask)", r[0], r[1], [](std::int64_t row) { return row; });
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &attn_mask_property() {
  static const PropertyDef def{
      .id = "attn_mask",
      .formula = "V(i) = {j: mask_bhij} (or s_ij + mask_bhij, −∞ hides): |Ô − O| ≤ β, same for LSE, dQ, dK, dV; "
                 "boolean = additive 0/−∞",
      .summary = "the mask tensor is read at the wrong element (broadcast, transposed, another head or batch), "
                 "inverted, or added where it should hide",
      .require = &with_feature<ATTNCHECK_FEATURE_MASK>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_MASK>,
      .feature = ATTNCHECK_FEATURE_MASK,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
