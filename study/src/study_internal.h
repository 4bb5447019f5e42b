// Shared helpers of the study's sections (internal).
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/problem.h"

namespace attncheck::study {

/// Verdict rule for a claimed range ±a: "right" when the measured central-99.7% half-width is within a factor
/// kRangeRight of a, "wrong" beyond a factor kRangeWrong, "misleading" in between.
inline constexpr double kRangeRight = 1.25, kRangeWrong = 2;

/// γ_n(u) = n·u / (1 − n·u) (Higham); +∞ when n·u ≥ 1.
double gamma_n(double n, double u);

/// Error allowed to a naive softmax·V over `keys` keys in dtype dt: γ_{2·keys+4}(u)·|O| — the exp, the sum,
/// the division and the P·V dot product, each with one rounding per operation.
double naive_tolerance(Dtype dt, int keys, double exact_out);

/// Error allowed to a kernel's output element `index` of problem p: the error model's bound
/// (PrecisionProfile::for_storage), around attncheck::reference_forward's exact output.
double kernel_tolerance(const Problem &p, std::size_t index);

}  // namespace attncheck::study
