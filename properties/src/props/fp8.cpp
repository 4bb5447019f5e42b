// fp8: FP8 storage with per-tensor descale factors (SPEC.md §2.7) — q, k, v sent as e4m3fn or e5m2 bits (values up
// to the format's largest), each standing for descale · stored: O and LSE within their bounds (the descales are
// float32 values that do not cancel), and the relation that the logits see descale_q and descale_k only through
// their product: swapping the two gives the same output.
#include "feature_checks.h"

#include <utility>

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  Problem swapped = c.problem();
  std::swap(swapped.features.descale_q, swapped.features.descale_k);
  FeatureRun a, b;
  if (!call_feature(env, c.problem(), L, a) ||
      !call_feature(env, std::move(swapped), L, b, "forward with descale_q and descale_k swapped"))
    return L.outcome();
  return judged_runs(env, {std::move(a), std::move(b)}, [](std::vector<FeatureRun> &r, ExactSource &src) {
    Ladder J;
    if (!feature_accuracy(r[0], src, J)) return J.outcome();
    rows_agree(J, "O (descale_q and descale_k swapped)", r[0], r[1], [](std::int64_t row) { return row; });
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &fp8_property() {
  static const PropertyDef def{
      .id = "fp8",
      .formula = "q, k, v = descale · float8 (e4m3fn, e5m2): |Ô − O| ≤ β, |L̂SE − LSE| ≤ β; descale_q ↔ descale_k "
                 "gives the same O",
      .summary = "FP8 inputs decoded wrongly, a descale forgotten or applied to the wrong tensor, or values at the "
                 "format's largest mishandled",
      .require = &with_feature<ATTNCHECK_FEATURE_FP8>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_FP8>,
      .feature = ATTNCHECK_FEATURE_FP8,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
