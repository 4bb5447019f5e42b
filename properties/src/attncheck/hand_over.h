// Hand-over: an advisory property's counterexample that a required property's ladder fails too is that required
// property's failure (SPEC.md §7). nonfinite_output draws the float16 extremes more often than accuracy does; where
// the kernel returns NaN or ±Inf and the exact value and its bound are finite, the case is accuracy's (or its
// feature's) failure whichever property drew it — nonfinite_output keeps only what the model cannot decide.
//
// The property's own search escalates its line (tier required, verdict fail, the required ladder's outcome); once
// the run's report holds the required property's line too (assemble_run), settle_hand_overs() gives that line the
// failure and returns the advisory line to its warning.
#pragma once

#include "attncheck/check.h"
#include "attncheck/property.h"

#include <cstddef>
#include <vector>

namespace attncheck {

/// The required property that judges `c`'s values under `contract`: accuracy for a case without features, else the
/// property of its first feature; nullptr when that property is not required.
const PropertyDef *required_judge(const Case &c, const KernelContract &contract);

/// A hand-over settled: line `from` (the advisory property's) gave its counterexample to line `to`.
struct HandOver {
  std::size_t from = 0, to = 0;
};

/// For each escalated line of `r` (an advisory property's line that its hand-over made required) whose required
/// property's line is in `r` without a counterexample of its own: that line fails with a copy of the
/// counterexample, and the advisory line is a warning again. What was moved, for the caller's per-line data
/// (evidence). An escalated line whose required property is not in `r` stays a required failure.
std::vector<HandOver> settle_hand_overs(RunReport &r);

}  // namespace attncheck
