// The study's sections, each a function of the seed and its sample sizes (study.cpp picks them).
#pragma once

#include "attncheck/study.h"

#include <cstdint>
#include <vector>

namespace attncheck::study {

/// Sample sizes and grids of one run (default or --quick).
struct Plan {
  std::vector<int> dks;
  std::int64_t variance_samples = 0;        ///< section 1: q·k samples per d_k
  std::vector<int> lengths;                 ///< section 2: sequence lengths
  std::int64_t saturation_rows = 0;         ///< section 2: rows per (d_k, L)
  int gradient_L = 0;                       ///< section 3: Lq = Lk
  std::int64_t gradient_problems = 0;       ///< section 3: problems per (d_k, scaling)
  int gradient_crosscheck_points = 0;       ///< section 3: problems recomputed with the reference
  std::vector<int> accuracy_lengths, accuracy_dims;  ///< section 5 grid
};

/// Random-stream identifiers: one per section.
enum Stream : std::uint64_t { kStreamVariance = 1, kStreamSaturation, kStreamGradient, kStreamAccuracy };

VarianceSection run_variance(const Plan &plan, std::uint64_t seed, double z);
SaturationSection run_saturation(const Plan &plan, std::uint64_t seed, double z);
GradientSection run_gradient(const Plan &plan, std::uint64_t seed, double z);
OverflowSection run_overflow(const std::vector<const attncheck_kernel *> &kernels);
AccuracySection run_accuracy(const Plan &plan, std::uint64_t seed,
                             const std::vector<const attncheck_kernel *> &kernels);
std::vector<ClaimCheck> check_claims(const StudyResult &r);

/// The kernels whose name starts with "flash" (the ones the study measures).
std::vector<const attncheck_kernel *> flash_kernels(const std::vector<const attncheck_kernel *> &kernels);
/// The bundled kernels (attncheck_builtin), or none when the study library was built without them.
std::vector<const attncheck_kernel *> bundled_kernels();

}  // namespace attncheck::study
