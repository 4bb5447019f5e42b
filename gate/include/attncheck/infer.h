// `attncheck infer` (cli/) and attncheck.infer (python/): the contract a kernel satisfies, found by checking it.
//
// A correct kernel that follows a documented practice (a top-left causal mask, an LSE in the storage dtype, a row
// sum of the rounded P, …) fails the defaults, and the gate already names the declaration that explains each of its
// counterexamples (the diagnosis, properties/src/diagnosis/). infer turns that into a search: check the kernel under a
// starting contract; while the run fails and every failure some declaration explains, adopt the declaration that
// explains the most of them (the narrowest among equals, as the diagnosis orders them) and check again under the
// accumulated contract. A run that passes gives the contract. A failure no declaration explains is a bug: infer says
// so, with the counterexample, and the best contract it found. So is a failure that the declaration adopted for it
// explained on its minimal case but that persists, unexplained, under it: that declaration is dropped.
//
// A dtype whose every case the kernel declined, while another dtype ran, is left out: `dtypes=` names the others, and
// the checks after that leave its runs off.
//
// Then what a passing run cannot show but the contract can promise more strongly, where a property gives the
// evidence: an advisory property that passed on every dtype is the required property of a stronger declaration
// (bitwise_determinism → determinism=bitwise, batch_invariance → batch-invariant=bitwise, masked_nonfinite →
// hidden-keys=any), and grad-sum=auto on a float16/bfloat16 run is probed as
// grad-sum=exact. The stronger contract is checked like any other (a failure it explains adopts the looser value
// back); infer keeps it only when that check passes. The contract infer prints is the one its last passing check ran
// under, with the same plan and seed: `attncheck check --contract <line>` gets the same verdicts.
//
// Example:
//   gate::InferRequest rq;
//   rq.check.profile = gate::find_profile("quick");
//   rq.dtypes = {Dtype::f16};
//   gate::InferResult r = gate::infer(kernel, rq, source);
//   r.contract.describe_changes();   // "rowsum=rounded-p backward-determinism=bitwise"
//   fmt::print("{}", gate::infer_text(r));
#pragma once

#include "attncheck/gate.h"

#include <optional>
#include <string>
#include <vector>

namespace attncheck::gate {

/// What infer is asked: the check it runs (plan, seed, properties), on which dtypes, from which contract.
struct InferRequest {
  Request check;                 ///< the plan of each check (InferRequest's default: the quick profile)
  std::vector<Dtype> dtypes;     ///< one contract for all of them
  KernelContract start;          ///< the contract the first check runs under
  KernelContract declared;       ///< what the kernel declares (shown next to what infer finds)
  /// Why the search starts from `start` rather than from `declared`, when the front chose it (Python: "fn returns
  /// out alone (no LSE): the search starts from lse=none"); a line of the text under its header. "" for none.
  std::string start_reason;
  bool quiet = false;            ///< no progress bar
  const std::atomic<bool> *cancel = nullptr;
  InferRequest() { check.profile = find_profile("quick"); }
};

/// One check of the search.
struct InferRound {
  KernelContract contract;              ///< what it ran under
  std::string purpose;                  ///< "start", "adopt rowsum=rounded-p", "stronger: determinism=bitwise"
  Verdict verdict = Verdict::undecided; ///< the roll-up over the dtypes
  std::vector<std::string> failing;     ///< "lse (f16)", … : the required properties that failed
  std::optional<std::string> adopted;   ///< the declaration this round's failures led to
  double seconds = 0;                   ///< wall time (not part of what a seed fixes)
};

/// A failure no contract value explains.
struct NoFit {
  std::string property;  ///< its id
  Dtype dtype = Dtype::f32;
  std::string caption;   ///< its root-cause group's caption (reporting::FailureGroup), one line
  std::string counterexample;  ///< "accuracy — f32 B=1 Hq=1 … (step values): O[0,0,0,0]: got …", one line
};

/// A declaration stronger than the contract that the checks support.
struct Strengthening {
  std::string declaration;  ///< "determinism=bitwise"
  std::string evidence;     ///< "bitwise_determinism passed on f32 (15 cases)"
};

struct InferResult {
  std::string kernel;
  std::vector<Dtype> dtypes;
  std::string profile;
  std::uint64_t seed = 1;
  KernelContract declared;
  std::string start_reason;  ///< InferRequest::start_reason
  /// The contract found: the last one a check passed under, or (no fit, undecided) the best one reached.
  KernelContract contract;
  int exit_code = kExitInconclusive;  ///< kExitPass, kExitCounterexample (no fit), kExitInconclusive
  std::vector<InferRound> rounds;
  std::vector<Strengthening> stronger;        ///< kept: the final check passed with them
  std::vector<Strengthening> not_confirmed;   ///< proposed by the evidence, dropped: their check did not pass
  /// dtypes= without the dtypes whose every case the kernel declined while another dtype ran (FlashAttention's
  /// float32): adopted from the check that showed it, so later checks leave those runs off.
  std::optional<Strengthening> declined_dtypes;
  /// Properties that warned under the final contract (advisory: beyond it), "bitwise_determinism (f16)".
  std::vector<std::string> advisory_warnings;
  std::optional<NoFit> no_fit;
  /// A declaration adopted and then dropped: a failure it explained still failed under it, unexplained ("…: under it
  /// window (f32) still fails, and nothing explains that"); `contract` is then the one before it.
  std::optional<std::string> dropped;
  std::string note;  ///< why the result is undecided, when it is
  /// The last check's report: under `contract`, but when a declaration was dropped (under it, with the failure).
  reporting::Document last;
};

/// The search. Runs at most kMaxRounds checks of the kernel (each a gate::check_serially of the dtypes). Throws what
/// check() throws (std::invalid_argument for an unknown property).
InferResult infer(const attncheck_kernel &kernel, const InferRequest &rq, const reporting::KernelSource &source);
/// The contract keys no probe can find (features, accumulate-pv, round-p, tanh, exp, and lse=none: a kernel without an
/// LSE output cannot be asked for one) and dtypes of `declared`, the rest the defaults (accumulate-qk follows
/// accumulate-pv):
/// where infer starts unless told to start from the declaration.
KernelContract search_start(const KernelContract &declared);

/// Checks a search runs at most: each adopted declaration changes a key the candidates name, so a search that
/// does not end by then is going round in circles.
inline constexpr int kMaxRounds = 16;

/// For people: the rounds, then "contract: <line>" (KernelContract::describe_changes()), the advisory warnings, and
/// for no fit "no contract value fits: <property> (<dtype>) — <caption> — that is a bug" with the counterexample.
std::string infer_text(const InferResult &r);
/// For machines: one JSON object (README, "Infer a kernel's contract").
std::string infer_json(const InferResult &r);

}  // namespace attncheck::gate
