// Replay of a recorded counterexample: its exact inputs (report.json) re-run on a kernel, judged under the report's
// contract or one given instead. The one implementation behind `attncheck replay` and the Python Report.replay.
//
// Example:
//   const gate::ReplayTarget t = gate::replay_target(doc, 1);            // the first counterexample
//   const gate::ReplayResult r = gate::replay(t, kernel, std::nullopt);  // under the report's contract
//   return gate::replay_exit_code(r, doc.strict);
#pragma once

#include "attncheck/report_io.h"

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace attncheck::gate {

/// Why a replay cannot start, in one line: no counterexample, one out of range, a property this attncheck lacks.
struct ReplayError : std::invalid_argument {
  ReplayError(const std::string &what, bool out_of_range_)
      : std::invalid_argument(what), out_of_range(out_of_range_) {}
  bool out_of_range;  ///< the report has no counterexample of that number (Python: IndexError)
};

/// A recorded counterexample chosen for replay; points into the Document it came from.
struct ReplayTarget {
  std::size_t failure = 0, of = 0;  ///< its number (1-based, Document::failures order) and how many there are
  const reporting::Run *run = nullptr;
  const PropertyReport *property = nullptr;
  const Counterexample &counterexample() const { return *property->counterexample; }
};

/// Counterexample `failure` (1-based) of `doc`. Throws ReplayError when there is none such.
ReplayTarget replay_target(const reporting::Document &doc, std::size_t failure);

/// What a replay found.
struct ReplayResult {
  KernelContract contract;  ///< judged under: the report's, or the one given
  Tier tier = Tier::required;  ///< the property's under that contract; off: not run (the contract asks nothing of it)
  Outcome outcome;          ///< the property's outcome, as the check would report it
  /// The verdict as report.json spells a tier's: a fail of an advisory property is Verdict::warn.
  Verdict verdict() const {
    return outcome.verdict == Verdict::fail && tier == Tier::advisory ? Verdict::warn : outcome.verdict;
  }
};

/// What a replay of `target` under `contract` (nullopt: the report's own) is judged by, before any kernel is needed:
/// the contract and the property's tier under it. Under tier off it is the whole replay — nothing runs, verdict
/// undecided, the detail says why — so a front that sees tier off loads no kernel.
///
/// Example:
///   if (gate::replay_plan(t, judged).tier == Tier::off) …  // "off": no kernel to load, no process to start
ReplayResult replay_plan(const ReplayTarget &target, const std::optional<KernelContract> &contract);

/// Runs `target`'s minimal case on `kernel`, judged under `contract` (nullopt: the report's own contract and
/// precision profile; else the profile that contract gives the run's dtype). Under a contract that turns the
/// property off nothing runs: replay_plan's result.
ReplayResult replay(const ReplayTarget &target, const attncheck_kernel &kernel,
                    const std::optional<KernelContract> &contract);

/// The replay's exit code (gate.h): 1 when it still fails (a warning only under `strict`), 0 when it passes, warns or
/// is off, 3 when it could not decide.
int replay_exit_code(const ReplayResult &result, bool strict);

}  // namespace attncheck::gate
