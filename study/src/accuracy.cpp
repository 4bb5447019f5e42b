// Section 5: the flash kernels' accuracy against the reference, in units of the error model's bound.
#include "sections.h"

namespace attncheck::study {

AccuracySection run_accuracy(const Plan &plan, std::uint64_t, const std::vector<const attncheck_kernel *> &kernels) {
  AccuracySection sec;
  sec.lengths = plan.accuracy_lengths;
  sec.dims = plan.accuracy_dims;
  sec.available = false;
  sec.note = kernels.empty() ? "no flash kernel available in this build" : "error model not available in this build";
  return sec;
}

}  // namespace attncheck::study
