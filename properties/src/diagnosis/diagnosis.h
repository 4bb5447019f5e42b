// The diagnosis: what a failure means, computed by the engine for the reports to render (SPEC.md §3.1). Private to
// properties/; the engine (check.cpp, and given.cpp for judged tensors) is its one caller, and tests reach it through
// properties/src on their include path (tests/report/CMakeLists.txt).
//
// Two entries for a check, because they run at two moments of it (and explain_given for the judge of given tensors):
//   diagnose      — per counterexample, as it is made (check.cpp, make_counterexample), right after shrinking and
//                   under the run's guard: the declarations that would explain it (explain.cpp). It re-judges the
//                   case and fresh cases of the property under changed contracts, inside the property's run.
//   add_evidence  — once over the whole report, after every property ran and the hand-overs settled, only when
//                   reports are written (CheckOptions::evidence) and the check was not cancelled: each
//                   counterexample's values and metamorphic evidence (evidence.cpp) and its verified hypotheses
//                   (hints.cpp). It re-runs the kernel, so it must come after the search's calls, never between them.
#pragma once

#include "attncheck/case.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/outcome.h"
#include "attncheck/property.h"
#include "attncheck/results.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attncheck::diagnosis {

/// What diagnose() finds of a counterexample (its fields of the same names).
struct Diagnosis {
  std::vector<Explanation> explained_by;  ///< Counterexample::explained_by
  std::vector<std::string> passes_under;  ///< Counterexample::passes_under
};

/// The declarations that explain `minimal` failing property `def` with outcome `o` under env's contract
/// (Diagnosis::explained_by): each candidate re-judges the case under the contract it changes, and is kept when the
/// case (as the kernel received it: a causal case takes the other alignment under causal=top-left) then passes —
/// and, for a declaration that loosens the precision, the kernel's error uses a fair share of the bound it grants (a
/// declaration that would pass anything excuses, it does not explain). The candidates, narrowest first, are the
/// practices of production kernels the contract keys can declare (SPEC.md §3.1: tanh=approx, causal=top-left,
/// empty-rows=unspecified, …, lse=storage, accumulate-qk=f16, lse=none for an LSE left unwritten). A failed call or a
/// write outside the outputs is explained by none. A declaration that explains the case must also hold on a few
/// fresh cases of the property drawn under it (from `co`, the property's case options, and `seed`): minimal cases
/// are small enough to be ambiguous. `stop` (the run's guard or a cancellation) ends the search before the next
/// kernel call: the declarations confirmed by then are kept. When none is confirmed, Diagnosis::passes_under holds
/// the single declarations under which the minimal case passes though fresh cases fail.
Diagnosis diagnose(const PropertyDef &def, const Env &env, const CaseOptions &co, std::uint64_t seed,
                   const Case &minimal, const Outcome &o, const std::function<bool()> &stop = {});

/// The declarations under which outputs a kernel already returned (given.h) pass where they fail `o` under
/// `contract` on a run of storage dtype `dt`: each candidate of diagnose(), narrowest first, judged again through
/// `rejudge` under the contract it changes — kept when the outputs then pass (or are undecided by design) and, for a
/// looser precision, the error uses a fair share of the bound it grants. With no kernel to call there are no fresh
/// cases to confirm on: one input is evidence for a practice, not proof of it (the judgment says so).
std::vector<Explanation> explain_given(const Outcome &o, const KernelContract &contract, Dtype dt,
                                       const std::function<Outcome(const KernelContract &)> &rejudge);

/// What outputs a kernel already returned (given.h: judge_given) show of their defect: add_evidence's hints
/// (SPEC.md §3.1, "Hints from evidence") on `out` and `lse` (nullptr, or ignored under lse=none) of problem `p` under
/// `precision` — but the two that re-run the kernel (the NaN source, the scale probe). Empty for problems with
/// features, too large for the hypotheses' reference calls, or where no hypothesis reproduces the outputs.
std::vector<Hint> given_hints(const Problem &p, const PrecisionProfile &precision, const KernelContract &contract,
                              const Tensor &out, const Tensor *lse);

/// Re-runs each counterexample of `r` on `kernel` (forward, and backward for gradient properties) under the
/// report's contract and keeps in Counterexample::evidence the failing tensor's values, the exact values, the bounds
/// (error model, the report's profile) and the exact probabilities. The case re-run is the problem that failed: the
/// outcome's failing_case (a shifted, permuted, rescaled … copy, at failing_scale when ≠ 0) when the property
/// recorded one, else the minimal case. With a failing_case it also re-runs the minimal case (Evidence::original)
/// and marks the rows that differ between the two beyond what the property allows, and the failing element's row.
/// For a counterexample no declaration explains, it also computes Evidence::hints (SPEC.md §3.1, "Hints from
/// evidence": changed problems whose exact result reproduces the kernel's O; the kernel's forward re-run on the failing
/// problem, and on the scale probe or without a key's NaN where those are tried). check() calls it under
/// CheckOptions::evidence.
void add_evidence(RunReport &r, const attncheck_kernel &kernel);

}  // namespace attncheck::diagnosis
