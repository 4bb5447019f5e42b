// The outcome of checking one case, as data: the verdict, the ladder step that failed, what it found (Finding) and
// the worst error ÷ bound. The Ladder that produces it is the engine's (ladder.h); reports read this.
//
// Checks run as an ordered ladder (as in Alive2): shape → finite → mask → sums → values. A property climbs it in
// that order; the first failing step ends the climb and is recorded, so a report says what kind of wrong the kernel
// got first (it declined or wrote outside its outputs; produced NaN/Inf; broke a contract-fixed value; broke a sum;
// or merely a value out of its bound).
//
// Verdicts keep three things apart: "fail" (a counterexample: the kernel is wrong), "undecided" (the checks could
// not decide, e.g. a bound is infinite or the reference is not finite) and "unsupported" (the kernel declined).
#pragma once

#include "attncheck/case.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// warn: a property the kernel's contract does not promise (Tier::advisory) found a counterexample — behaviour a
/// careful user wants to know about, not a failure of the contract (exit 0 unless --strict).
/// error: attncheck's own check failed (it threw): no evidence for or against the kernel, and never "undecided",
/// which means the kernel gave too little to decide (exit 4 with the message).
enum class Verdict : std::uint8_t { pass, fail, undecided, unsupported, warn, error };
/// "pass", "FAIL", "undecided", "unsupported", "WARN", "ERROR": for people (the gate's table, replay's lines).
std::string_view verdict_name(Verdict v);
/// "pass", "fail", "undecided", "unsupported", "warn", "error": for machines (report.json, HTML classes, Python).
std::string_view verdict_id(Verdict v);

/// The steps of the ladder, in order.
enum class Step : std::uint8_t {
  shape,   ///< "shape": the call returned OK and wrote nothing outside its outputs
  finite,  ///< "finite": results are finite wherever the exact values are (NaN also marks unwritten output)
  mask,    ///< "mask": values the contract fixes (rows that see no key, keys no query sees) are exact
  sums,    ///< "sums": sums the math fixes (softmax rows sum to 1, LSE = log of the row sum) hold within bounds
  values,  ///< "values": every element within its error bound
};
/// The short id: "shape", "finite", "mask", "sums", "values".
std::string_view step_id(Step s);

/// What a failing check found, as data — made where the comparison happens (the Ladder, or a property's own check)
/// and kept in report.json. Outcome::detail is its rendering for people; grouping, evidence and headlines read
/// these fields, never the text.
struct Finding {
  enum class Kind : std::uint8_t {
    call,           ///< a call returned an error status (`what`: "forward", "backward", …)
    wrote_input,    ///< a call wrote into its input `tensor` (`index`: the storage offset)
    wrote_padding,  ///< a call wrote outside its output `tensor` (`index`: the storage offset)
    value,          ///< an element against its exact value (and bound): `got`, `exact`, `bound`
    changed,        ///< an element that must not change did: `exact` what it was, `got` what it became
    aggregate,      ///< a statement about many elements (a rate, a variance, a whole mask): `what` names it
  };
  Kind kind = Kind::aggregate;
  /// The output the element belongs to: "O", "LSE", "dQ", "dK", "dV" (an input's name for wrote_input); "" for a
  /// quantity derived from several ("Σ_c O(v=I)") or none.
  std::string tensor;
  std::string name;                 ///< the quantity as the check names it: "O(k+u) vs O"; "" for none
  std::vector<std::int64_t> index;  ///< the element's multi-index (a storage offset for writes); empty for none
  std::optional<double> got, exact, bound;
  bool empty_row = false;  ///< the check knows the element is in a row that sees no key
  std::string what;        ///< call and aggregate: what was called or judged ("dropout mask")
  friend bool operator==(const Finding &, const Finding &) = default;
};
/// "call", "wrote_input", "wrote_padding", "value", "changed", "aggregate" (report.json).
std::string_view finding_kind_id(Finding::Kind k);

/// The output tensor a check's name for a quantity starts with: "O(k+u) vs O" → "O", "LSE (a second call)" →
/// "LSE", "dQ" → "dQ"; "" for a derived quantity ("Σ_c O(v=I)", "min(O(v=I), 0)").
std::string output_of(std::string_view name);

/// The finding of element `flat` (row-major in `shape`) of the quantity `name`.
Finding element_finding(Finding::Kind kind, std::string_view name, const std::vector<std::int64_t> &shape,
                        std::int64_t flat, std::optional<double> got, std::optional<double> exact = std::nullopt,
                        std::optional<double> bound = std::nullopt);

/// A finding about many elements, or none in particular: `what` names the quantity judged.
Finding aggregate_finding(std::string what);

/// The result of one case.
struct Outcome {
  Verdict verdict = Verdict::pass;
  std::optional<Step> step;  ///< fail: the first failing step; undecided: the step that could not decide
  std::string detail;        ///< fail/undecided/unsupported: what and where, floats as hex and decimal
  std::optional<Finding> finding;  ///< fail: what the failing check found, as data (detail renders it)
  double worst_ratio = 0;    ///< worst error ÷ bound over the decided elements (+∞ for NaN or a broken exact value)
  std::string worst;         ///< where worst_ratio was found: "O[0,0,1,2]: got …, exact …, bound …"
  /// The modified problem the failing check judged, when it is not the generated case itself (a shifted, permuted,
  /// poisoned or rescaled copy): reports show its inputs and heatmaps. Empty for checks on the case itself.
  std::optional<Case> failing_case;
  double failing_scale = 0;  ///< the scale of failing_case's problem; 0 = its default 1/√D
  std::string failing_what;  ///< what the modification was: "k + 1 on every key", "params.scale = 1"
  /// A pass the fast reference screened (screen.h): worst_ratio and worst are the fast path's, and the exact worst
  /// ratio is at most worst_ratio + ratio_slack; (*confirm)() judges the same kernel results under MPFR.
  std::shared_ptr<const std::function<Outcome()>> confirm;
  double ratio_slack = 0;
  /// The screened bounds' own uncertainty, max ε/β' (screen.h): the exact bounds are at most (1 + 2τ)(1 + bound_slack)
  /// times the screened ones. Equal to ratio_slack unless the check compared no kernel result with an exact value.
  double bound_slack = 0;
};

/// "name[0,1,2,3]": the multi-index of row-major element `index` of a tensor of `shape`.
std::string element_name(std::string_view name, const std::vector<std::int64_t> &shape, std::int64_t index);
/// "name[0,1,2,3]": element `index` (a multi-index) of `name`.
std::string element_name(std::string_view name, const std::vector<std::int64_t> &index);
/// The multi-index of row-major element `flat` of a tensor of `shape`.
std::vector<std::int64_t> element_index(const std::vector<std::int64_t> &shape, std::int64_t flat);

}  // namespace attncheck
