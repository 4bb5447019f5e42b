// What the feature properties (window, softcap, alibi, sinks, attn_mask, varlen, paged, dropout, fp8; SPEC.md §2.7, §7)
// share: their tier (declared features only), the accuracy ladder under a feature — forward and, where the kernel
// and the layout have one, backward — and the comparison of two runs of the kernel row by row (the metamorphic
// relations), within both problems' bounds and the exact difference between them.
#pragma once

#include "attncheck/property.h"
#include "attncheck/screen.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace attncheck::props {

/// Required when the kernel's contract declares the feature (`features=…`); off otherwise: the kernel is never sent
/// it, and the report lists the property as declined.
template <std::uint32_t Bit>
Tier feature_tier(const KernelContract &c) {
  return (c.features & Bit) ? Tier::required : Tier::off;
}

/// Cases with the feature, and dout drawn (the backward is checked when the kernel has one).
template <std::uint32_t Bit>
void with_feature(CaseOptions &o) {
  o.features = Bit;
  o.backward = true;
}

/// One side of a comparison: a problem, the kernel's forward (and backward) on it, its exact values and bounds.
struct FeatureRun {
  Problem p;
  ForwardRun fr;
  ExactForward exact;
  ForwardBounds bound;
  std::optional<BackwardRun> br;  ///< the backward, when asked for and the kernel did not decline it
};

/// The kernel's forward on `p` (its dropout mask taken into the problem, so that the reference applies it) and, with
/// `backward`, when the kernel has one and the problem a dout, its backward — up to the shape step of `L` (every
/// call of a property comes before its checks: the ladder climbs once). False when the ladder stopped. The exact
/// values come later, from judged_runs (or run_feature).
inline bool call_feature(const Env &env, Problem p, Ladder &L, FeatureRun &out, std::string_view what = "forward",
                         bool backward = false) {
  out.fr = run_forward(env, p);
  if (!L.call(out.fr.call, what) || !L.intact(out.fr.out, "O") || !L.intact(out.fr.lse, "LSE")) return false;
  if (p.features.dropout_p > 0) p.features.dropout_keep = out.fr.dropout_keep;
  out.p = std::move(p);
  if (backward && env.kernel.backward && out.p.dout && out.fr.has_lse) {
    BackwardRun br = run_backward(env, out.p, out.fr);
    if (br.call.status != ATTNCHECK_UNSUPPORTED) {  // else forward-only for this feature: nothing more to check
      if (!L.call(br.call, "backward") || !L.intact(br.dq, "dQ") || !L.intact(br.dk, "dK") ||
          !L.intact(br.dv, "dV"))
        return false;
      out.br = std::move(br);
    }
  }
  return true;
}

/// The exact values and bounds of a run from `src`, and the rows the contract `c` leaves to the kernel taken out of
/// its comparisons (leave_unspecified_rows; then its backward too). Windows, masks and empty sequences make such rows.
inline void take_exact(FeatureRun &r, ExactSource &src, const KernelContract &c) {
  std::tie(r.exact, r.bound) = src.forward(r.p);
  if (leave_unspecified_rows(c, r.p, r.exact, r.fr)) r.br.reset();
}

/// call_feature, then the exact values and bounds from the MPFR reference (for checks that are not judged_runs).
inline bool run_feature(const Env &env, Problem p, Ladder &L, FeatureRun &out, std::string_view what = "forward",
                        bool backward = false) {
  if (!call_feature(env, std::move(p), L, out, what, backward)) return false;
  ExactSource mpfr(ExactSource::Mode::mpfr, env.precision);
  take_exact(out, mpfr, env.contract);
  return true;
}

/// The checks `body(runs, src)` of runs already called, judged with the screen first (screen.h): each run gets its
/// exact values and bounds from the source before `body` sees it. `body` must own what it reads (capture by value).
template <class Body>
Outcome judged_runs(const Env &env, std::vector<FeatureRun> runs, Body body) {
  auto called = std::make_shared<const std::vector<FeatureRun>>(std::move(runs));
  return judged(env.precision, [contract = env.contract, called, body](ExactSource &src) {
    std::vector<FeatureRun> r = *called;  // a copy: take_exact changes the outputs it judges
    for (FeatureRun &x : r) take_exact(x, src, contract);
    return body(r, src);
  });
}

/// The accuracy ladder of a run: O, LSE (and dQ, dK, dV when it has a backward, their exact values from `src`)
/// against the reference, step by step (finite, mask, sums, values). False once the ladder stopped.
inline bool feature_accuracy(const FeatureRun &r, ExactSource &src, Ladder &L) {
  std::optional<ExactBackward> grad;
  std::optional<BackwardBounds> bb;
  if (r.br) std::tie(grad, bb) = src.backward(r.p, r.exact);
  std::vector<TensorCheck> checks{{"O", r.fr.out, r.exact.out, r.bound.out}};
  if (r.fr.has_lse) checks.push_back({"LSE", r.fr.lse, r.exact.lse, r.bound.lse, Step::sums});
  if (r.br) {
    checks.push_back({"dQ", r.br->dq, grad->dq, bb->dq});
    checks.push_back({"dK", r.br->dk, grad->dk, bb->dk});
    checks.push_back({"dV", r.br->dv, grad->dv, bb->dv});
  }
  return L.each(checks);
}

/// Step values, kernel against kernel on the rows `row_of_a` maps (row r of a's O [B, Hq, Lq, Dv], as an lse
/// offset, to the row of b's, or −1 to skip it): |Ô_a − Ô_b| ≤ β_a + β_b + |O_a − O_b| (the triangle inequality
/// through both exact values). `name` says what b is.
template <class RowMap>
bool rows_agree(Ladder &L, std::string_view name, const FeatureRun &a, const FeatureRun &b, RowMap row_of_a) {
  const std::vector<double> got_a = a.fr.out.to_vector(), got_b = b.fr.out.to_vector();
  const std::int64_t Dv = a.p.shape.Dv;
  std::vector<double> ga, gb, bound;
  for (std::size_t x = 0; x < got_a.size(); ++x) {
    const std::int64_t rb = row_of_a(static_cast<std::int64_t>(x) / Dv);
    if (rb < 0) continue;
    const std::size_t y = static_cast<std::size_t>(rb * Dv + static_cast<std::int64_t>(x) % Dv);
    ga.push_back(got_a[x]);
    gb.push_back(got_b[y]);
    bound.push_back(a.bound.out[x] + b.bound.out[y] + std::fabs(a.exact.out[x] - b.exact.out[y]));
  }
  if (ga.empty()) return true;
  return L.within(Step::values, name, gb, ga, bound, {static_cast<std::int64_t>(ga.size())});
}

}  // namespace attncheck::props
