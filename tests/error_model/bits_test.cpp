// The bounds' bits depend on the problem only: not on the number of threads, nor on the SIMD target the element-wise
// sums run on (column_sums.h), nor, for exact values, on the CPU (products.h: the baseline path).
#include "attncheck/error_model.h"
#include "attncheck/fast_reference.h"
#include "random_problems.h"

#include <catch2/catch.hpp>
#include <hwy/targets.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

using namespace attncheck;

namespace {

/// A problem large enough for the bounds to spread over threads (B·Hq·Lq·Lk·(D + Dv) ≥ 2²²), with GQA and causal.
Problem threaded_problem() {
  std::mt19937_64 rng(55'0001);
  return make_problem(rng, Shape{2, 4, 2, 200, 256, 64, 48}, Dtype::f16, Values::normal, Mask::causal);
}

struct AllBounds {
  std::vector<double> out, lse, dq, dk, dv;
  bool operator==(const AllBounds &o) const {
    auto same = [](const std::vector<double> &a, const std::vector<double> &b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
    };
    return same(out, o.out) && same(lse, o.lse) && same(dq, o.dq) && same(dk, o.dk) && same(dv, o.dv);
  }
};

AllBounds bounds(const Problem &p, BoundsFrom from) {
  const auto fast = fast_forward(p);
  REQUIRE(fast);
  const ExactForward values{.out = fast->out, .lse = fast->lse};
  const PrecisionProfile prof = PrecisionProfile::for_storage(p.dtype());
  const ForwardBounds f = forward_bounds(p, values, prof, from);
  const BackwardBounds g = backward_bounds(p, values, prof, from);
  return {f.out, f.lse, g.dq, g.dk, g.dv};
}

}  // namespace

TEST_CASE("bounds have the same bits on one thread and on two", "[bits]") {
  const Problem p = threaded_problem();
  const int before = omp_get_max_threads();
  for (BoundsFrom from : {BoundsFrom::exact, BoundsFrom::approximate}) {
    omp_set_num_threads(1);
    const AllBounds one = bounds(p, from);
    omp_set_num_threads(2);
    const AllBounds two = bounds(p, from);
    REQUIRE(one == two);
  }
  omp_set_num_threads(before);
}

TEST_CASE("bounds have the same bits on the best SIMD target and on the baseline one", "[bits]") {
  const Problem p = threaded_problem();
  const AllBounds best = bounds(p, BoundsFrom::exact);
  const std::int64_t targets = hwy::SupportedTargets();
  // Every target above SSSE3 (the lowest x86-64 one Highway compiles) and the portable ones.
  hwy::DisableTargets(targets & ~(HWY_SSSE3 | HWY_EMU128 | HWY_SCALAR));
  const bool changed = hwy::SupportedTargets() != targets;
  const AllBounds baseline = bounds(p, BoundsFrom::exact);
  hwy::DisableTargets(0);
  REQUIRE(best == baseline);
  // On a CPU with more than the baseline the comparison crossed targets (else it compared one with itself).
  if (targets & (HWY_AVX2 | HWY_AVX3)) REQUIRE(changed);
}
