// Section 5: the flash kernels' accuracy against the reference, in units of the error model's bound.
#include "random.h"
#include "sections.h"

#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/reference.h"

#include <algorithm>
#include <cmath>

namespace attncheck::study {
namespace {
/// MPFR precision of the exact outputs: 2⁻⁶⁴ relative is far below every dtype's error.
constexpr unsigned kAccuracyBits = 64;
constexpr Dtype kDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
}  // namespace

AccuracySection run_accuracy(const Plan &plan, std::uint64_t seed, const std::vector<const attncheck_kernel *> &kernels) {
  AccuracySection sec;
  sec.lengths = plan.accuracy_lengths;
  sec.dims = plan.accuracy_dims;
  sec.reference_bits = kAccuracyBits;
  if (kernels.empty()) {
    sec.note = "no flash kernel in this build";
    return sec;
  }
  sec.available = true;
  for (Dtype dt : kDtypes)
    for (int L : plan.accuracy_lengths)
      for (int D : plan.accuracy_dims) {
        // One problem per (dtype, L, D), shared by the kernels.
        Rng rng(seed, stream_key({kStreamAccuracy, static_cast<std::uint64_t>(dt), static_cast<std::uint64_t>(L),
                                  static_cast<std::uint64_t>(D)}));
        Problem p;
        p.shape = Shape{1, 1, 1, L, L, D, D};
        p.params.scale = default_scale(D);
        const std::vector<std::int64_t> dims{1, 1, L, D};
        p.q = Tensor::contiguous(dt, dims);
        p.k = Tensor::contiguous(dt, dims);
        p.v = Tensor::contiguous(dt, dims);
        for (Tensor *t : {&p.q, &p.k, &p.v}) {
          std::vector<double> x(static_cast<std::size_t>(t->numel()));
          for (auto &xi : x) xi = rng.normal();
          t->assign(x);
        }
        const ExactForward exact = reference_forward(p, kAccuracyBits);
        const ForwardBounds bounds = forward_bounds(p, exact, PrecisionProfile::for_storage(dt));
        for (const auto *k : kernels) {
          AccuracyCell cell;
          cell.kernel = k->name;
          cell.dtype = dt;
          cell.L = L;
          cell.D = D;
          Tensor out = make_out(p.shape, dt), lse = make_lse(p.shape);
          const CallResult cr = call_forward(*k, p, out, &lse);
          if (cr.status == ATTNCHECK_UNSUPPORTED) {
            cell.status = Outcome::unsupported;
          } else if (!cr.ok()) {
            cell.status = Outcome::failed;
          } else {
            const std::vector<double> got = out.to_vector();
            cell.elements = static_cast<std::int64_t>(got.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
              cell.max_ratio = std::max(cell.max_ratio, error_ratio(got[i], exact.out[i], bounds.out[i]));
              cell.max_abs_err = std::max(cell.max_abs_err, std::abs(got[i] - exact.out[i]));
            }
            cell.status = cell.max_ratio <= 1 ? Outcome::correct : Outcome::inaccurate;
          }
          sec.cells.push_back(cell);
        }
      }
  return sec;
}

}  // namespace attncheck::study
