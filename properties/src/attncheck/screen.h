// Where a check's exact values and bounds come from: the fast reference's screen first, MPFR where it cannot decide
// (the adaptive-precision filter of SPEC.md §5.1).
//
// A check written once, as a function of an ExactSource, runs first with the screen: the exact values are the fast
// reference's r̃ (fast_reference.h) and every bound is what is certain of the exact one, β' = β̃·(1 − τ) − ε·(1 + τ),
// where β̃ is the error model's bound from r̃ (BoundsFrom::approximate), ε the fast value's own error bound and τ =
// kScreenMargin. So |got − r̃| ≤ β' implies |got − exact| ≤ β, and every comparison of the ladder and of the
// kernel-against-kernel relations (bounds summed with exact differences) is decided pass only when MPFR would decide
// it pass. An element the screen cannot bound (β̃ infinite, or ε not small against β̃) throws ScreenEscalates. When
// the screened outcome is not a pass — a failure, an undecided element, an escalation — the check runs again under
// the MPFR reference, as before: failures and their details always come from MPFR.
//
// A screened pass reports the fast path's worst ratio |got − r̃|/β'; the exact one is at most that plus ratio_slack
// (max ε/β' over the compared elements). Outcome::confirm() gives the MPFR outcome where the exact ratio matters
// (the property's worst case, the targeted phase's parents, an explanation's fit).
//
// Example (a property's run):
//   auto fr = std::make_shared<const ForwardRun>(run_forward(env, p));
//   ... the shape step on fr ...
//   return judged(env.precision, [p, fr](ExactSource &src) {
//     const auto [exact, bound] = src.forward(p);
//     Ladder L;
//     L.within(Step::values, "O", fr->out, exact.out, bound.out);
//     return L.outcome();
//   });
#pragma once

#include "attncheck/error_model.h"
#include "attncheck/ladder.h"
#include "attncheck/reference.h"
#include "attncheck/results.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

namespace attncheck {

/// τ: the relative margin a screened bound gives up. It covers the error model's dependence on exact values known
/// only within ε (β̃ differs from β by at most a few ε/β̃ ≤ 2⁻²⁸, SPEC.md §5.1) and the rounding of the comparison.
inline constexpr double kScreenMargin = 0x1p-20;

/// Thrown by a screening ExactSource for a problem or an element it cannot decide: the check reruns under MPFR.
struct ScreenEscalates : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether judged() screens on this thread (CheckOptions::screen; the engine sets it per property): true by default.
bool &screen_on_this_thread();

/// Exact values and their bounds under a precision profile: MPFR's, or the screen's (header comment).
class ExactSource {
 public:
  enum class Mode { screen, mpfr };
  ExactSource(Mode mode, const PrecisionProfile &profile) : mode_(mode), profile_(profile) {}

  /// O and LSE of p and their bounds: reference_forward and forward_bounds, or the screen's r̃ and β'.
  std::pair<ExactForward, ForwardBounds> forward(const Problem &p);
  /// A rearrangement of a forward's per-element arrays (O: [B,Hq,Lq,Dv], LSE: [B,Hq,Lq]) into another problem's.
  struct Rearrange {
    using Map = std::function<std::vector<double>(const std::vector<double> &)>;
    static std::vector<double> same(const std::vector<double> &x) { return x; }
    Map out = &same, lse = &same;  ///< default: the same arrays (q computes p's values in another way)
  };
  /// forward(q) for a problem q whose exact O and LSE are those of the last forward(p) rearranged by `map` (q's
  /// inputs are p's, permuted or repeated exactly): the reference runs once, the bounds are q's own. Requires a
  /// forward(p) before.
  std::pair<ExactForward, ForwardBounds> forward_rearranged(const Problem &q, const Rearrange &map);
  /// dQ, dK, dV of p (p.dout required) and their bounds; `fwd` is forward(p).first.
  std::pair<ExactBackward, BackwardBounds> backward(const Problem &p, const ExactForward &fwd);
  /// The screen's own error bounds ε of the last backward's values, as its arrays (|r̃ − exact| ≤ ε element-wise);
  /// nullptr under MPFR, whose values are the exact ones. For a check that compares an aggregate of the values (a
  /// norm), which the element-wise β' does not cover.
  const ExactBackward *backward_errors() const { return mode_ == Mode::screen ? &last_grad_err_ : nullptr; }
  /// Elements this source has given out.
  std::int64_t elements() const { return elements_; }
  /// max ε/β' over the screened elements (0 under MPFR).
  double ratio_slack() const { return slack_; }
  /// An upper bound on the exact bound β of each element of the last forward's O, given the bounds `bound` that
  /// forward gave: under the screen β ≤ β̃(1 + τ) with β̃ = (β' + ε(1 + τ))/(1 − τ) (the same premise as β' ≤ β,
  /// SPEC.md §5.1), rounded up; under MPFR `bound` itself. For a check whose ratios fall as its bounds grow: the exact
  /// ratio lies between the ratio from `bound` and the one from this.
  std::vector<double> out_bound_upper(const std::vector<double> &bound) const;
  /// Widens ratio_slack() to at least `slack`: what a check comparing an aggregate knows of how far its screened
  /// ratio may be from the exact one.
  void widen_slack(double slack) { slack_ = std::max(slack_, slack); }
  /// Declares that no comparison of this judgement measures a kernel result's distance to an exact value this source
  /// gave (kernel against kernel, or against values the math fixes; the exact values feed only the finite and mask
  /// steps and the bounds): a screened pass's exact worst ratio is then at most its screened one, and ranking it
  /// needs no MPFR even where it is 0.
  void values_not_compared() { values_compared_ = false; }
  bool values_compared() const { return values_compared_; }

 private:
  /// β' from β̃ and ε, element by element; throws ScreenEscalates where it cannot be certain.
  void certain(std::vector<double> &bound, const std::vector<double> &value, const std::vector<double> &err);

  Mode mode_;
  PrecisionProfile profile_;
  /// The last forward's values and (screen) their own error bounds, for forward_rearranged.
  ExactForward last_;
  std::vector<double> last_out_err_, last_lse_err_;
  ExactBackward last_grad_err_;  ///< the last backward's ε (screen)
  std::int64_t elements_ = 0;
  double slack_ = 0;
  bool values_compared_ = true;
};

/// A check of kernel results that are already in hand, as a function of where the exact values come from. It must
/// not call the kernel (it may run twice: screened, then under MPFR) and must own what it reads (confirm() may call it
/// after the caller returned).
using Judgement = std::function<Outcome(ExactSource &)>;

/// The judgement's outcome: the screened one when it passes (with Outcome::confirm and ratio_slack set), else the
/// MPFR one (the only one when screen_on_this_thread() is false). Counts go to ReferenceCounts::of_this_thread().
Outcome judged(const PrecisionProfile &profile, Judgement judgement);

/// `o`, or its MPFR confirmation when `o` is a screened pass whose exact worst ratio may be ≥ `threshold`.
Outcome exact_if_at_least(const Outcome &o, double threshold);

/// How finely the engine ranks passing cases by error ÷ bound (the property's worst case, the targeted phase's
/// parents and its highest ratio): to this many significant bits. Coarse enough that a screened pass's exact ratio,
/// known within about 2τ relative plus ratio_slack, almost always has a single rank — its rank needs no MPFR.
inline constexpr int kRankBits = 11;
/// `r` rounded to kRankBits significant bits (0, ∞ and NaN as they are); non-decreasing in r.
double ranked_ratio(double r);
/// The rank of `o`'s exact worst ratio, where it can exceed `floor`. For a screened pass it comes from the range that
/// ratio lies in, [s(1 − 2τ) − (1 + 2τ)(s·bound_slack + ratio_slack), s + ratio_slack] (s its worst ratio), when the
/// range has one rank, or when no rank of the range exceeds `floor` (then its lowest: a caller comparing it with
/// `floor` or anything above decides as it would from the exact rank); otherwise `o` becomes its MPFR confirmation
/// (counted), ranked from that.
double exact_rank(Outcome &o, double floor = -std::numeric_limits<double>::infinity());

}  // namespace attncheck
