// The error model is sound (correct kernels of every summation order never exceed it) and tight (a precision
// shortcut does).
#include "attncheck/compare.h"
#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "random_problems.h"
#include "attncheck/reference.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <map>
#include <random>

using namespace attncheck;
using support::Bug;
using support::Variant;

namespace {

/// Small problems keep the MPFR reference fast enough for thousands of cases.
constexpr std::int64_t kSmallWork = 6000;
constexpr std::uint64_t kSeed = 20261129;

struct Check {
  Worst fwd, bwd;
};

PrecisionProfile profile_of(Dtype storage, const Variant &v) {
  PrecisionProfile prof = PrecisionProfile::for_storage(storage);
  prof.accumulate = v.accumulate;
  return prof;
}

/// Runs one kernel on one problem and compares forward and backward with the bounds of `prof`.
Check run(const attncheck_kernel &k, const Problem &p, const ExactForward &ef, const ExactBackward &eb,
          const PrecisionProfile &prof) {
  Check c;
  Tensor out = make_out(p.shape, p.dtype()), lse = make_lse(p.shape);
  REQUIRE(call_forward(k, p, out, &lse).ok());
  const ForwardBounds fb = forward_bounds(p, ef, prof);
  c.fwd = compare(out, ef.out, fb.out);
  c.fwd.merge(compare(lse, ef.lse, fb.lse));
  Tensor dq = Tensor::contiguous(p.dtype(), p.q.shape()), dk = Tensor::contiguous(p.dtype(), p.k.shape()),
         dv = Tensor::contiguous(p.dtype(), p.v.shape());
  REQUIRE(call_backward(k, p, out, &lse, dq, dk, dv).ok());
  const BackwardBounds bb = backward_bounds(p, ef, prof);
  c.bwd = compare(dq, eb.dq, bb.dq);
  c.bwd.merge(compare(dk, eb.dk, bb.dk));
  c.bwd.merge(compare(dv, eb.dv, bb.dv));
  return c;
}

/// Every correct variant within its profile's bound on `p`; returns the worst ratio seen.
double check_sound(const Problem &p, std::map<std::string, double> &worst_by_variant) {
  const ExactForward ef = reference_forward(p);
  const ExactBackward eb = reference_backward(p);
  double worst = 0;
  for (const Variant &v : support::correct_variants()) {
    const Check c = run(support::variant_kernel(v), p, ef, eb, profile_of(p.dtype(), v));
    INFO(v.name() << " on " << p.shape.describe() << " " << mask_name(p.params.mask) << " " << p.q.describe());
    INFO("forward: " << c.fwd.describe());
    INFO("backward: " << c.bwd.describe());
    REQUIRE(c.fwd.ratio <= 1);
    REQUIRE(c.bwd.ratio <= 1);
    double &w = worst_by_variant[v.name()];
    w = std::max({w, c.fwd.ratio, c.bwd.ratio});
    worst = std::max({worst, c.fwd.ratio, c.bwd.ratio});
  }
  return worst;
}

void report(const char *title, const std::map<std::string, double> &worst_by_variant) {
  std::cout << title << " — worst error ÷ bound per variant:\n";
  for (const auto &[name, w] : worst_by_variant) std::cout << "  " << name << ": " << w << '\n';
}

}  // namespace

TEST_CASE("gamma_n is n·u / (1 − n·u) and infinite past n·u = 1", "[error_model]") {
  REQUIRE(gamma_n(10, 0.01) == Approx(0.1 / 0.9));
  REQUIRE(std::isinf(gamma_n(100, 0.01)));
  REQUIRE(gamma_n(0, 0.5) == 0);
}

TEST_CASE("error ratios follow the checks' conventions", "[error_model]") {
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE(error_ratio(1.0, 1.0, 0.0) == 0);
  REQUIRE(error_ratio(-inf, -inf, 0.0) == 0);
  REQUIRE(std::isinf(error_ratio(std::nan(""), 1.0, 1e9)));
  REQUIRE(std::isinf(error_ratio(1.5, 1.0, 0.0)));
  REQUIRE(std::isinf(error_ratio(0.0, -inf, 1.0)));
  REQUIRE(error_ratio(1.5, 1.0, 0.25) == 2);
}

TEST_CASE("bounds are zero exactly where the contract fixes the value", "[error_model]") {
  std::mt19937_64 rng(kSeed);
  // Causal with Lq > Lk: the first Lq − Lk rows see no key.
  const Shape s{1, 2, 1, 5, 2, 4, 3};
  const Problem p = make_problem(rng, s, Dtype::f32, Values::normal, Mask::causal);
  const ExactForward ef = reference_forward(p);
  const PrecisionProfile prof = PrecisionProfile::for_storage(Dtype::f32);
  const ForwardBounds fb = forward_bounds(p, ef, prof);
  const BackwardBounds bb = backward_bounds(p, ef, prof);
  for (std::int64_t h = 0; h < s.Hq; ++h)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      const bool empty = visible_count(Mask::causal, i, s.Lq, s.Lk) == 0;
      INFO("h=" << h << " i=" << i);
      REQUIRE((fb.lse[static_cast<std::size_t>(lse_offset(s, 0, h, i))] == 0) == empty);
      for (std::int64_t c = 0; c < s.Dv; ++c)
        REQUIRE((fb.out[static_cast<std::size_t>(out_offset(s, 0, h, i, c))] == 0) == empty);
      for (std::int64_t d = 0; d < s.D; ++d)
        REQUIRE((bb.dq[static_cast<std::size_t>((h * s.Lq + i) * s.D + d)] == 0) == empty);
    }
}

TEST_CASE("correct kernels of every summation order stay within the bound on thousands of problems",
          "[error_model][soundness]") {
  constexpr int kProblemsPerDtype = 700;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(dt));
    std::map<std::string, double> worst_by_variant;
    RandomProblemOptions opt;
    opt.max_work = kSmallWork;
    for (int c = 0; c < kProblemsPerDtype; ++c) check_sound(random_problem(rng, dt, opt), worst_by_variant);
    report(("random small problems, " + std::string(dtype_name(dt))).c_str(), worst_by_variant);
  }
}

TEST_CASE("correct kernels stay within the bound on long rows and huge logits", "[error_model][soundness]") {
  std::mt19937_64 rng(kSeed + 1);
  std::map<std::string, double> worst_by_variant;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (std::int64_t Lk : {1024, 2049})
      for (Values vals : {Values::normal, Values::large_logits, Values::dominant_key, Values::small_ints})
        for (Mask m : {Mask::none, Mask::causal}) {
          const Shape s{1, 2, 1, 2, Lk, 16, 8};
          check_sound(make_problem(rng, s, dt, vals, m, Layout::bhld), worst_by_variant);
        }
  report("long rows (Lk 1024, 2049) and logits up to 1e4", worst_by_variant);
}

TEST_CASE("accumulating q·k in float16 while declaring float32 accumulation exceeds the bound",
          "[error_model][tightness]") {
  std::mt19937_64 rng(kSeed + 2);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const Shape s{1, 1, 1, 64, 64, 64, 64};
    const Problem p = make_problem(rng, s, dt, Values::normal, Mask::none);
    const ExactForward ef = reference_forward(p);
    const ExactBackward eb = reference_backward(p);
    const Check bad = run(support::variant_kernel(support::bug_variant(Bug::f16_dot_accumulation)), p, ef, eb,
                          PrecisionProfile::for_storage(dt));
    std::cout << "f16 q·k accumulation, " << dtype_name(dt) << " storage, N(0,1), L=D=64: forward "
              << bad.fwd.ratio << ", backward " << bad.bwd.ratio << " × bound\n";
    INFO(dtype_name(dt) << " storage: " << bad.fwd.describe());
    CHECK(bad.fwd.ratio > 1);
  }
}

TEST_CASE("float16 arithmetic throughout is within its own profile's bound and outside float32's",
          "[error_model][tightness]") {
  std::mt19937_64 rng(kSeed + 3);
  Variant v;
  v.accumulate = Dtype::f16;
  v.key_block = 16;
  const Shape s{1, 2, 1, 32, 48, 64, 32};
  const Problem p = make_problem(rng, s, Dtype::f32, Values::normal, Mask::none);
  const ExactForward ef = reference_forward(p);
  const ExactBackward eb = reference_backward(p);
  const Check own = run(support::variant_kernel(v), p, ef, eb, profile_of(Dtype::f32, v));
  const Check declared_f32 = run(support::variant_kernel(v), p, ef, eb, PrecisionProfile::for_storage(Dtype::f32));
  INFO("own profile: " << own.fwd.describe() << " / " << own.bwd.describe());
  REQUIRE(own.fwd.ratio <= 1);
  REQUIRE(own.bwd.ratio <= 1);
  INFO("declared f32: " << declared_f32.fwd.describe());
  REQUIRE(declared_f32.fwd.ratio > 1);
}
