// sinks: attention sinks (SPEC.md §2.7), a per-head logit in every row's denominator with no value — O, LSE and
// the gradients within their bounds, and the limit: a sink far below every logit gives the output without one.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
/// e^(−kFarBelow) relative to the row's largest term: far below any bound.
constexpr double kFarBelow = 200;

Outcome run(const Env &env, const Case &c) {
  Ladder L;
  Problem low = c.problem();
  // The largest |logit| any row can have: |scale|·D·max|q|·max|k| (softcap: at most c), plus ALiBi's largest bias
  // (the largest slope times the farthest distance, < Lq + Lk) — every sink goes kFarBelow under it.
  double qmax = 0, kmax = 0, slope = 0;
  for (double x : c.q) qmax = std::max(qmax, std::fabs(x));
  for (double x : c.k) kmax = std::max(kmax, std::fabs(x));
  for (double x : low.features.alibi_slopes) slope = std::max(slope, std::fabs(x));
  double top = std::fabs(low.params.scale) * qmax * kmax * static_cast<double>(c.spec.shape.D);
  if (low.features.softcap > 0) top = std::min(top, low.features.softcap);
  top += slope * static_cast<double>(c.spec.shape.Lq + c.spec.shape.Lk);
  for (double &s : low.features.sinks) s = round_to(Dtype::f32, -(top + kFarBelow));
  Case none = c;
  none.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_SINKS);
  FeatureRun a, l, n;
  if (!call_feature(env, c.problem(), L, a, "forward", true) ||
      !call_feature(env, std::move(low), L, l, "forward with every sink far below the logits") ||
      !call_feature(env, none.problem(), L, n, "forward without sinks"))
    return L.outcome();
  return judged_runs(env, {std::move(a), std::move(l), std::move(n)}, [](std::vector<FeatureRun> &r, ExactSource &src) {
    Ladder J;
    if (!feature_accuracy(r[0], src, J)) return J.outcome();
    rows_agree(J, "O (sinks far below vs none)", r[1], r[2], [](std::int64_t row) { return row; });
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &sinks_property() {
  static const PropertyDef def{
      .id = "sinks",
      .formula = "O_i = Σ_j e^{s_ij} v_j / (Σ_j e^{s_ij} + e^{sink_h}), LSE_i = log(Σ_j e^{s_ij} + e^{sink_h}) within β; "
                 "sink → −∞ = no sink",
      .summary = "the sink is missing from the denominator or the LSE, counted with a value, or read from another head",
      .require = &with_feature<ATTNCHECK_FEATURE_SINKS>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_SINKS>,
      .feature = ATTNCHECK_FEATURE_SINKS,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
