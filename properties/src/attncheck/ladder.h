// The ladder: a property's checks of one case, run in ladder order (outcome.h: shape → finite → mask → sums →
// values), accumulating its Outcome. The engine's; reports read only the Outcome.
//
// Example (inside a property):
//   Ladder L;
//   if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O")) return L.outcome();
//   L.finite("O", fr.out, exact.out);
//   L.within(Step::values, "O", fr.out, exact.out, bounds.out);
//   return L.outcome();
#pragma once

#include "attncheck/compare.h"
#include "attncheck/kernel_call.h"
#include "attncheck/outcome.h"
#include "attncheck/tensor.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// One output's checks for Ladder::each: `got` against `exact` within `bound`, as Ladder::finite, masked and within
/// take them, from step finite up to `up_to`. It refers to its arrays, which must outlive the call.
struct TensorCheck {
  std::string_view name;
  const Tensor &got;
  const std::vector<double> &exact;
  const std::vector<double> &bound;
  /// The highest step it climbs: finite, mask (finite and masked: the property compares its values its own way
  /// afterwards), or the step of its within check, sums (an LSE: the log of the row sum) or values.
  Step up_to = Step::values;
  bool masked = true;  ///< false: no mask step (finite, then within)
  /// Called before each of its checks, e.g. [&] { L.judging(copy, what); }: the problem they judge (a failure
  /// records it). Empty: the ladder's judging as it stands.
  std::function<void()> judging = {};
};

/// Runs a property's checks in ladder order and accumulates an Outcome. Every check returns false once the case
/// has failed (or turned out unsupported), so a property can stop at the first false.
class Ladder {
 public:
  /// Step shape: the kernel call returned OK. ATTNCHECK_UNSUPPORTED makes the case unsupported; any other status
  /// is a failure. `what` names the call ("forward", "backward").
  bool call(const CallResult &r, std::string_view what);
  /// Step shape: the padding of an output tensor (filled with NaN before the call) is still NaN.
  bool intact(const Tensor &t, std::string_view name);
  /// Step finite: `got` is finite wherever `exact` is finite, and equal to it where `exact` is ±∞ (an exact −∞
  /// LSE must come back −∞). A NaN exact value makes the case undecided.
  bool finite(std::string_view name, const Tensor &got, const std::vector<double> &exact);
  /// Same, but an infinite result is accepted where the bound lets the exact value round past the dtype's largest
  /// finite value (|exact| + bound ≥ the overflow threshold, same sign): a correct kernel may overflow there; and
  /// where the bound is +∞ (the model cannot decide, SPEC §4.5) a non-finite result makes the case undecided.
  bool finite(std::string_view name, const Tensor &got, const std::vector<double> &exact,
              const std::vector<double> &bound);
  /// Step mask: every element whose bound is 0 (a value the contract fixes) equals the exact value.
  bool masked(std::string_view name, const Tensor &got, const std::vector<double> &exact,
              const std::vector<double> &bound);
  /// Any step: |got − exact| ≤ bound element-wise. An element whose bound or exact value is not finite is not
  /// decided (the case becomes undecided unless it fails elsewhere); an infinite result where the bound reaches
  /// the overflow threshold (see finite) counts as within.
  bool within(Step step, std::string_view name, const Tensor &got, const std::vector<double> &exact,
              const std::vector<double> &bound);
  /// Same on plain values of a row-major `shape`: `got[x]` against `exact[x]` and `bound[x]`.
  bool within(Step step, std::string_view name, const std::vector<double> &got, const std::vector<double> &exact,
              const std::vector<double> &bound, const std::vector<std::int64_t> &shape);
  /// Steps finite to values over several outputs at once, as a property would write them per output: finite on
  /// every check of `checks`, then masked on those that climb to mask or higher (and are `masked`), then within on
  /// those that climb to sums, then on those that climb to values — each step in list order, so that the step
  /// reported is the first that fails on any of them. Every check is made (a no-op once the case has failed, as any
  /// check); false once the case has failed.
  ///   std::vector<TensorCheck> checks{{"O", fr.out, exact.out, bound.out}};
  ///   if (fr.has_lse) checks.push_back({"LSE", fr.lse, exact.lse, bound.lse, Step::sums});
  ///   L.each(checks);  // finite O, LSE; masked O, LSE; within LSE (sums), O (values)
  bool each(std::initializer_list<TensorCheck> checks);
  bool each(std::span<const TensorCheck> checks);
  /// Any step: a failure the property detected itself: `finding` as data, `detail` its rendering.
  bool fail(Step step, std::string detail, Finding finding);
  /// Any step: the case cannot be decided (kept unless a later check fails).
  void undecided(Step step, std::string detail);
  /// Records a ratio into worst_ratio / worst (for checks that compute their own ratios).
  void note(double ratio, std::string where);
  /// The checks that follow judge results of `c` (scale `scale`, 0 = default): a modified copy of the generated
  /// case. A failure among them records it (Outcome::failing_case) so that reports show the problem that failed.
  /// judging_original() returns to the generated case.
  void judging(const Case &c, std::string what, double scale = 0);
  void judging_original();

  bool failed() const { return out_.verdict == Verdict::fail || out_.verdict == Verdict::unsupported; }
  /// The outcome so far: fail if a check failed; else unsupported if a call was declined; else undecided if
  /// some element could not be decided; else pass.
  Outcome outcome() const;

 private:
  bool check_order(Step s);
  Outcome out_;
  std::optional<Step> last_;
  std::optional<Case> judged_;
  double judged_scale_ = 0;
  std::string judged_what_;
  bool undecided_ = false;
  std::optional<Step> undecided_step_;
  std::string undecided_detail_;
};

/// True when `got` is the ±∞ that rounding a value within `bound` of `exact` to dtype `dt` can give: same sign,
/// and |exact| + bound reaches the overflow threshold (largest finite value plus half an ulp).
bool overflow_within_bound(double got, double exact, double bound, Dtype dt);

/// Bitwise equality of two results (+0 and −0 differ; a NaN equals only the same NaN bits): what "unchanged"
/// means for the properties that compare a kernel with itself.
bool same_bits(double a, double b);

}  // namespace attncheck
