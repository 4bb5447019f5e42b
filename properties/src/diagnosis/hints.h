// evidence_hints: what a counterexample shows about its defect, computed (SPEC.md §3.1, "Hints from evidence").
//
// Each hypothesis is a change to the failing problem — another scale, the causal diagonal moved by one key, keys
// left out, tiles summed without their rescale — whose EXACT result (the reference, with the error model's bounds
// on the changed problem) must reproduce the kernel's O, and the LSE it returned, where the problem's own exact
// result does not. Only a reproduced hypothesis becomes a Hint; a non-finite O is read off the logits instead (exp
// overflow in the accumulation dtype), or traced to the input key whose non-finite values, set to 0, make the
// kernel's row finite (the kernel re-run). Internal to the diagnosis: add_evidence (evidence.cpp) calls it.
#pragma once

#include "attncheck/evidence.h"
#include "attncheck/kernel_abi.h"
#include "attncheck/results.h"

#include <vector>

namespace attncheck::diagnosis {

/// The hints of counterexample `cx` of `report` (its contract and precision), re-running the kernel's forward on the
/// problem the failing check judged: the first verified of, in order, exp overflow, scale, mask shift, NaN source,
/// lost rescale, dropped keys. Empty when a declaration explains the failure (the declaration is the explanation), when the call
/// failed, when the kernel's O and LSE are within their bounds there (the failure is elsewhere: a gradient, a
/// relation between problems), for problems with features, dropout or stretched rows (not modelled), and when no
/// hypothesis reproduces the output. Deterministic: it depends on the kernel's outputs and the case only.
std::vector<Hint> evidence_hints(const Counterexample &cx, const attncheck_kernel &kernel, const RunReport &report);


}  // namespace attncheck::diagnosis
