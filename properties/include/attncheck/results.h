// What a check found, as plain data — the one header the reports (report/) read: per property the cases run, skipped
// and undecided, the verdict, the worst error ÷ bound, and for a failure the shrunk counterexample with its exact
// inputs, seed and reproduce string, its finding, evidence and explanations. Same kernel, options and seed ⇒ the same
// RunReport, whatever the machine's load: nothing time-dependent is kept but the Timing figures, and whether the time
// guard bound (then the cut properties say so). Below the engine: it includes the case, outcome, evidence and coverage
// data and the spec, never the screen, the properties or the error model.
#pragma once

#include "attncheck/case.h"
#include "attncheck/contract.h"
#include "attncheck/coverage.h"
#include "attncheck/evidence.h"
#include "attncheck/features.h"
#include "attncheck/outcome.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// How the declared contract makes a property count.
enum class Tier : std::uint8_t {
  required,  ///< the contract promises it: a counterexample is a failure (exit 1)
  advisory,  ///< beyond the contract: a counterexample is a warning (exit 0 unless --strict)
  off,       ///< the contract leaves nothing for it to check (e.g. `lse` under lse=none): not run
};
/// "required", "advisory", "off".
std::string_view tier_name(Tier t);

/// The id of the property that checks ABI feature `bit` (features.h): the feature's name, but attn_mask for the
/// mask ("mask" alone would read as the causal mask). The registry agrees (a test compares PropertyDef::feature).
inline std::string_view feature_property_id(std::uint32_t bit) {
  return bit == ATTNCHECK_FEATURE_MASK ? std::string_view("attn_mask") : feature_name(bit);
}

/// Where a property's exact values came from (report.json `reference`): elements decided by the screen's fast path
/// (screen.h), elements of cases the MPFR reference judged (the screen could not decide them, or the case did not
/// pass), and screened passes whose exact ratio was asked for (confirmations: MPFR judges them too, for the report's
/// worst values).
struct ReferenceCounts {
  std::int64_t fast_elements = 0;
  std::int64_t mpfr_elements = 0;
  std::int64_t confirmations = 0;
  ReferenceCounts &operator+=(const ReferenceCounts &o) {
    fast_elements += o.fast_elements;
    mpfr_elements += o.mpfr_elements;
    confirmations += o.confirmations;
    return *this;
  }
  friend bool operator==(const ReferenceCounts &, const ReferenceCounts &) = default;
  /// The counts of the checks run on this thread since the last reset (the engine reads them per property).
  static ReferenceCounts &of_this_thread();
};

/// A declaration the contract can make (SPEC.md §3.1) under which a counterexample's minimal case passes: a
/// documented practice the kernel may follow — then it is no bug, and the kernel should declare it.
struct Explanation {
  std::string declaration;  ///< contract tokens: "tanh=approx"
  std::string meaning;      ///< what the kernel then does: "softcap's tanh is the hardware approximation (…)"
  friend bool operator==(const Explanation &, const Explanation &) = default;
};

/// A failure, shrunk: the minimal case found, what it fails, and how to get it back.
struct Counterexample {
  Case minimal;              ///< exact inputs of the minimal failing case
  Outcome outcome;           ///< its outcome (verdict fail, the failing step, the element)
  CaseSpec original;         ///< spec of the case that failed first, before shrinking
  int found_after = 0;       ///< cases run (1-based) when the first failure appeared
  int shrink_steps = 0;      ///< accepted shrinks between the original and the minimal case
  int shrinks_tried = 0;     ///< candidate shrinks evaluated
  std::uint64_t seed = 0;    ///< the RapidCheck seed of this property's run
  /// RapidCheck configuration string that replays this exact case: pass it as CheckOptions::reproduce (with the
  /// same dtype and options) to get the same minimal counterexample back without searching or shrinking.
  std::string reproduce;
  /// The declarations under which the minimal case passes (the diagnosis: properties/src/diagnosis/); empty when none does.
  std::vector<Explanation> explained_by;
  /// The declarations under which the minimal case passes but fresh cases of the property still fail (for another
  /// reason, or for a bug): not an explanation alone, but what a group names when a declaration explains the run's
  /// other counterexamples (reporting::group_failures). Empty when explained_by is not.
  std::vector<std::string> passes_under;
  /// The failing problem's values (the diagnosis, under CheckOptions::evidence), when the check gathered them.
  std::optional<Evidence> evidence;
  /// The content hash of the corpus entry this counterexample was replayed from (CheckOptions::corpus); empty when
  /// the search (or the targeted phase) found it. A corpus case is not shrunk again: it is minimal already.
  std::string corpus_entry;
  bool from_corpus() const { return !corpus_entry.empty(); }
  /// The problem the failing check judged: outcome.failing_case (a modified copy) when the property recorded one,
  /// else the minimal case; and its scale.
  const Case &judged() const { return outcome.failing_case ? *outcome.failing_case : minimal; }
  double judged_scale() const {
    return outcome.failing_case && outcome.failing_scale != 0 ? outcome.failing_scale : judged().spec.scale();
  }
};

/// Where a property's time went. Not part of a report's content: the same seed gives the same report whatever the
/// load, except these figures (report.json keeps them apart, in its top-level `timing` object).
struct Timing {
  double seconds = 0;         ///< wall time of the property's run
  double kernel_seconds = 0;  ///< of it, inside the kernel's calls (the rest is attncheck's: reference, bounds)
};

/// What the targeted phase (check.h) did for a property: its mutants, and the error ÷ bound it climbed from (the
/// search's highest) and to (the highest of its passing mutants; a failure's is its counterexample's).
struct TargetedSearch {
  int cases = 0;     ///< mutants run: the kernel was called and the checks ran
  int declined = 0;  ///< mutants the kernel declined
  double from = 0, to = 0;
  bool ran() const { return cases + declined > 0; }
  friend bool operator==(const TargetedSearch &, const TargetedSearch &) = default;
};

/// One declared production shape (CheckOptions::shapes) as a property ran it.
struct ShapeRun {
  std::string shape;  ///< DeclaredShape::describe()
  /// pass, fail, undecided, error; unsupported: the kernel declined the case, or the property cannot take the shape
  Verdict verdict = Verdict::unsupported;
  double ratio = 0;   ///< the case's worst error ÷ bound (pass, fail)
  std::string spec;   ///< the case's spec line (layout, values, features drawn); empty when none was drawn
  std::string note;   ///< why it was not taken, declined or undecided
  friend bool operator==(const ShapeRun &, const ShapeRun &) = default;
};

/// The corpus cases a property replayed before its search (CheckOptions::corpus).
struct CorpusReplay {
  int replayed = 0;  ///< corpus cases judged (the one that failed included)
  int passed = 0;    ///< of them, those that passed
  friend bool operator==(const CorpusReplay &, const CorpusReplay &) = default;
};

/// One property's line of the report.
struct PropertyReport {
  std::string id, formula;
  std::string summary;  ///< what a failure of this property means
  Verdict verdict = Verdict::undecided;
  Tier tier = Tier::required;  ///< how the contract made this property count (advisory: a counterexample is a warning)
  int cases = 0;        ///< cases run: the kernel was called and the checks ran
  int unsupported = 0;  ///< cases skipped because the kernel declined them
  int undecided = 0;    ///< cases run that could not be decided (e.g. an infinite bound)
  double worst_ratio = 0;   ///< worst error ÷ bound over the decided cases of the search
  std::string worst;        ///< the case and element of worst_ratio
  bool budget_exhausted = false;  ///< the time guard (CheckOptions::time_budget) cut the search or the shrinking
  /// Cases not run because their shape is at or above one that hung or hit the memory limit (every dimension ≥
  /// that counterexample's): another call would only wait for its timeout, or crash, again. The note names the
  /// shape, and the largest case that ran.
  int skipped = 0;
  bool interrupted = false;       ///< a cancellation (SIGINT, SIGTERM) stopped the property: what ran is kept
  std::uint64_t seed = 0;         ///< the RapidCheck seed of this property's run
  std::string note;               ///< why the verdict is unsupported or undecided, or what a reproduce run found
  /// Present when verdict is fail or warn — but a fail whose case could not be kept (the kernel killed the process
  /// in it: Python's crash record, whose note names the case).
  std::optional<Counterexample> counterexample;
  /// The corners (coverage.h) the search's cases reached: decided and declined, per corner.
  Coverage coverage;
  TargetedSearch targeted;  ///< the targeted phase (not run: ran() false)
  std::vector<ShapeRun> shapes;  ///< the declared shapes, in CheckOptions::shapes' order (none declared: empty)
  /// Where the property's exact values came from: elements the fast reference decided, elements MPFR judged,
  /// screened passes confirmed under MPFR for the report's worst values. Deterministic, like the cases.
  ReferenceCounts reference;
  CorpusReplay corpus;      ///< the corpus cases replayed first (none: replayed 0)
  Timing timing;

  /// The worst error ÷ bound the property saw: the search's, or its counterexample's when larger (worst_ratio
  /// covers the cases that passed; +∞ for a NaN or a broken exact value).
  double worst_ratio_overall() const;
};

/// What check() found for one kernel and dtype: a run of report.json (reporting::Document holds the runs of a whole
/// check; Python's attncheck.Report is that document).
struct RunReport {
  std::string kernel;
  Dtype dtype = Dtype::f32;
  KernelContract contract;  ///< what the kernel was checked against: the one source of its precision profile
  std::uint64_t seed = 0;
  int cases = 0;  ///< target cases per property
  std::vector<PropertyReport> properties;

  /// fail if any property failed (or warned, when `strict`); else error if attncheck's own check failed on any;
  /// else undecided if any is undecided; else warn if any warned; else unsupported if every property is; else pass
  /// (unsupported properties do not spoil a pass).
  Verdict verdict(bool strict = false) const;
  /// The precision profile the run was judged with: the contract's for its dtype (report.json stores it too, as a
  /// derived field that must agree).
  PrecisionProfile precision() const { return contract.precision(dtype); }
  const PropertyReport *find(std::string_view id) const;
  /// What the run's cases reached: run_coverage(*this).
  RunCoverage coverage() const { return run_coverage(*this); }
  /// The full report: a header, one line per property, and every counterexample with its inputs (hex and
  /// decimal), failing step and element, seed and reproduce string.
  std::string text() const;
};

/// One tensor a kernel returned, given to attncheck.judge (given.h), held against its exact values: how many elements
/// exceed their bound, how many the model cannot decide (SPEC.md §4.5), and the element of the largest error ÷ bound.
struct TensorJudgment {
  std::string tensor;  ///< "O", "LSE", "dQ", "dK", "dV"
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0, exceeding = 0, undecided = 0;
  std::vector<std::int64_t> worst_index;  ///< empty when no element was decided
  double got = 0, exact = 0, bound = 0;
  double ratio = 0;  ///< |got − exact| ÷ bound at worst_index (+∞ for NaN or a broken exact value)
};

/// The judgment of given outputs under a contract (given.h: judge_given).
struct Judgment {
  Shape shape;
  Dtype dtype = Dtype::f32;
  KernelContract contract;  ///< judged under
  double scale = 0;
  Mask mask = Mask::none;   ///< as judged: a causal mask aligned as the contract declares
  Features features;        ///< the features the kernel was called with
  Outcome forward;                  ///< accuracy's ladder on O (and LSE)
  std::optional<Outcome> backward;  ///< gradient_accuracy's on dQ, dK, dV, when given and the contract asks for it
  Tier backward_tier = Tier::required;  ///< the gradients' tier under the contract (advisory: a failure warns)
  std::vector<TensorJudgment> tensors;  ///< each given tensor, in the order O, LSE, dQ, dK, dV
  /// On a failure: the declarations under which these outputs pass (the candidates a check's diagnosis tries, SPEC.md
  /// §3.1), narrowest first; empty when none does. Evidence for a practice, not proof: no fresh case confirms it.
  std::vector<Explanation> explained_by;
  /// On a forward failure no declaration explains: what O shows of its defect (a hint from evidence, SPEC.md §3.1:
  /// another scale, a shifted diagonal, dropped keys, a lost rescale, exp overflow), verified on these outputs; empty
  /// when none reproduces them, or the problem is too large for the hypotheses' reference calls.
  std::vector<Hint> hints;
  std::vector<std::string> notes;  ///< what was not judged, and why
  /// fail when a required ladder failed, else warn when an advisory one did, else undecided when one could not
  /// decide, else pass.
  Verdict verdict() const;
};

}  // namespace attncheck
