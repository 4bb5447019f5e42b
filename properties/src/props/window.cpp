// window: sliding-window attention (SPEC.md §2.7) — O, LSE and the gradients within their bounds under a window
// (either side, both, with or without causal, edges on tile boundaries), and the relation a window implies: on the
// rows whose window hides no key the mask shows, the output equals the run without the window.
#include "feature_checks.h"

namespace attncheck::props {

namespace {
Outcome run(const Env &env, const Case &c) {
  Ladder L;
  // The same problem without the window: rows whose window covers every key they see otherwise agree.
  Case plain = c;
  plain.spec.features.bits &= ~static_cast<std::uint32_t>(ATTNCHECK_FEATURE_WINDOW);
  FeatureRun w, o;
  if (!call_feature(env, c.problem(), L, w, "forward", true) ||
      !call_feature(env, plain.problem(), L, o, "forward without the window"))
    return L.outcome();
  return judged_runs(env, {std::move(w), std::move(o)}, [plain](std::vector<FeatureRun> &r, ExactSource &src) {
    const FeatureRun &w = r[0], &o = r[1];
    Ladder J;
    if (!feature_accuracy(w, src, J)) return J.outcome();
    J.judging(plain, "the window removed");
    const Shape &s = w.p.shape;
    const Features &f = w.p.features;
    rows_agree(J, "O (window vs none, rows it does not cut)", w, o, [&](std::int64_t row) -> std::int64_t {
      const std::int64_t i = row % s.Lq, b = row / (s.Lq * s.Hq);
      const RowFrame fr = row_frame(f, w.p.params.mask, b, i, s.Lq, s.Lk);
      const std::int64_t last = is_causal(w.p.params.mask) ? std::min(fr.aligned, fr.Lk_b - 1) : fr.Lk_b - 1;
      const bool left_ok = f.window_left < 0 || fr.aligned - f.window_left <= 0;
      const bool right_ok = f.window_right < 0 || fr.aligned + f.window_right >= last;
      return left_ok && right_ok ? row : -1;
    });
    return J.outcome();
  });
}
}  // namespace

const PropertyDef &window_property() {
  static const PropertyDef def{
      .id = "window",
      .formula = "row i sees keys i' − left ≤ j ≤ i' + right: |Ô − O| ≤ β, same for LSE, dQ, dK, dV; rows the window "
                 "does not cut = no window",
      .summary = "a sliding window shows a key it should hide or hides one it should show (an edge off by one, "
                 "misaligned, a tile skipped)",
      .require = &with_feature<ATTNCHECK_FEATURE_WINDOW>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_WINDOW>,
      .feature = ATTNCHECK_FEATURE_WINDOW,
      .targeted = true,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
