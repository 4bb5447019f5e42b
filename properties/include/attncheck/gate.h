// The accuracy gate: every kernel of a plugin against the reference and the error model on random problems.
//
// Example:
//   int32_t n = 0;
//   const attncheck_kernel *ks = attncheck_kernels(&n);
//   auto rows = attncheck::run_gate({ks, static_cast<std::size_t>(n)}, {.cases = 200, .seed = 1});
#pragma once

#include "attncheck/compare.h"
#include "attncheck/dtype.h"
#include "attncheck/kernel_abi.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace attncheck {

struct GateOptions {
  int cases = 200;             ///< random problems per dtype
  std::uint64_t seed = 1;      ///< same seed ⇒ same problems, same verdicts
  bool backward = true;        ///< also check dQ, dK, dV of kernels that have a backward
  std::vector<Dtype> dtypes{Dtype::f32, Dtype::f16, Dtype::bf16};
};

/// One (kernel, dtype) line of the gate's table.
struct GateRow {
  std::string kernel;
  Dtype dtype = Dtype::f32;
  int cases = 0;        ///< problems the kernel ran
  int unsupported = 0;  ///< problems it declined (ATTNCHECK_UNSUPPORTED)
  int errors = 0;       ///< problems where it returned ATTNCHECK_ERROR
  Worst forward, backward;  ///< worst error ÷ bound over O and LSE, over dQ, dK and dV
  std::string worst_case;   ///< the problem and element of the worst ratio, or of the first error
  bool has_backward = false;
  enum class Verdict { pass, fail, unsupported };
  Verdict verdict() const;
};
std::string_view verdict_name(GateRow::Verdict v);

/// Progress: called after each problem with (dtype, done, total).
using GateProgress = std::function<void(Dtype, int, int)>;

std::vector<GateRow> run_gate(std::span<const attncheck_kernel> kernels, const GateOptions &opt,
                              const GateProgress &progress = {});

}  // namespace attncheck
