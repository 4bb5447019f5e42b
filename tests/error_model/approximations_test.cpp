// The hardware approximations a contract declares (tanh=…, exp=…; SPEC.md §3.1, §4.1): a kernel that evaluates
// softcap's tanh or the softmax's exp by one of them at its worst (tests/support's approximation_variants, which
// chop every result toward zero) stays within the bound of the profile that declares it — forward and backward,
// float32, float16 and bfloat16 storage, softcaps from 0.5 to 100 with logits from 10⁻¹ to 10³ — and exceeds the
// bound of the accurate default (tight: the declared term is needed).
#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/reference.h"
#include "random_problems.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <span>
#include <string>

using namespace attncheck;
using support::Variant;

namespace {

constexpr std::uint64_t kSeed = 20261201;
constexpr std::int64_t kSmallWork = 4000;  ///< keeps the MPFR reference fast for hundreds of problems per dtype
constexpr int kProblemsPerDtype = 120;

/// A random small problem with softcap c ∈ [0.5, 100] and logits reaching 10⁻¹…10³ (saturated and not).
Problem softcap_problem(std::mt19937_64 &rng, Dtype dt) {
  constexpr double kCaps[] = {0.5, 1, 2.5, 5, 10, 30, 50, 100};
  RandomProblemOptions opt;
  opt.max_work = kSmallWork;
  Problem p = random_problem(rng, dt, opt);
  p.features.softcap = kCaps[rng() % std::size(kCaps)];
  rescale_logits(p, log_uniform(rng, 0.1, 1000));
  return p;
}

/// The worst error ÷ bound of one kernel on one problem, forward and backward, under `prof`; and the mean ratio of
/// the profile's bound to `base`'s over the finite elements (how much the declaration widened it).
struct Judged {
  double worst = 0, log_widening = 0;  ///< Σ ln(bound / base bound): the geometric mean's logarithm, times count
  std::int64_t widening_count = 0;
  std::string where;                  ///< the worst element: tensor, index, got, exact, bound
};
void judge(const attncheck_kernel &k, const Problem &p, const ExactForward &ef, const ExactBackward &eb,
           const PrecisionProfile &prof, const PrecisionProfile &base, Judged &j) {
  Tensor out = Tensor::contiguous(p.dtype(), {p.shape.B, p.shape.Hq, p.shape.Lq, p.shape.Dv});
  Tensor lse = Tensor::contiguous(Dtype::f32, {p.shape.B, p.shape.Hq, p.shape.Lq});
  REQUIRE(call_forward(k, p, out, &lse).ok());
  Tensor dq = Tensor::contiguous(p.dtype(), p.q.shape()), dk = Tensor::contiguous(p.dtype(), p.k.shape()),
         dv = Tensor::contiguous(p.dtype(), p.v.shape());
  REQUIRE(call_backward(k, p, out, &lse, dq, dk, dv).ok());
  const ForwardBounds fb = forward_bounds(p, ef, prof), fb0 = forward_bounds(p, ef, base);
  const BackwardBounds bb = backward_bounds(p, ef, prof), bb0 = backward_bounds(p, ef, base);
  auto each = [&](const char *name, const Tensor &got, const std::vector<double> &exact,
                  const std::vector<double> &bound, const std::vector<double> &bound0) {
    std::size_t n = 0;
    for_each_index(got.shape(), [&](std::span<const std::int64_t> idx) {
      const double r = error_ratio(got.get(idx), exact[n], bound[n]);
      if (r > j.worst) {
        j.worst = r;
        j.where = std::string(name) + "[" + std::to_string(n) + "]: got " + std::to_string(got.get(idx)) +
                  ", exact " + std::to_string(exact[n]) + ", bound " + std::to_string(bound[n]) + " (accurate " +
                  std::to_string(bound0[n]) + ")";
      }
      if (std::isfinite(bound[n]) && bound0[n] > 0 && std::isfinite(bound0[n])) {
        j.log_widening += std::log(bound[n] / bound0[n]);
        ++j.widening_count;
      }
      ++n;
    });
  };
  each("O", out, ef.out, fb.out, fb0.out);
  each("LSE", lse, ef.lse, fb.lse, fb0.lse);
  each("dQ", dq, eb.dq, bb.dq, bb0.dq);
  each("dK", dk, eb.dk, bb.dk, bb0.dk);
  each("dV", dv, eb.dv, bb.dv, bb0.dv);
}

}  // namespace

TEST_CASE("kernels using a declared hardware approximation stay within that declaration's bound and exceed the "
          "accurate one",
          "[error_model][soundness][approximation]") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(dt));
    std::map<std::string, Judged> declared, undeclared;
    for (int n = 0; n < kProblemsPerDtype; ++n) {
      const Problem p = softcap_problem(rng, dt);
      const ExactForward ef = reference_forward(p);
      const ExactBackward eb = reference_backward(p);
      for (const Variant &v : support::approximation_variants()) {
        const KernelContract c = support::contract_of(v);
        KernelContract accurate = c;
        accurate.tanh = Tanh::accurate;
        accurate.exp = Exp::accurate;
        INFO(v.name() << " on " << p.shape.describe() << " softcap " << p.features.softcap << " q "
                      << p.q.describe());
        Judged &d = declared[v.name()];
        judge(support::variant_kernel(v), p, ef, eb, c.precision(dt), accurate.precision(dt), d);
        INFO(d.where);
        REQUIRE(d.worst <= 1);
        judge(support::variant_kernel(v), p, ef, eb, accurate.precision(dt), accurate.precision(dt),
              undeclared[v.name()]);
      }
    }
    std::cout << "approximation variants, " << dtype_name(dt) << " storage, " << kProblemsPerDtype
              << " softcap problems — worst error ÷ bound declared / undeclared, geometric mean of the bound's widening:\n";
    for (const Variant &v : support::approximation_variants()) {
      const Judged &d = declared[v.name()], &u = undeclared[v.name()];
      std::cout << "  " << v.name() << " [" << support::contract_of(v).describe_changes() << "]: " << d.worst
                << " / " << u.worst << ", ×"
                << std::exp(d.log_widening / static_cast<double>(std::max<std::int64_t>(d.widening_count, 1))) << '\n';
      // ex2.approx.f32 is within the accurate budget; every other approximation needs its declaration.
      if (v.exp == Exp::approx) {
        CHECK(u.worst <= 1);
      } else {
        CHECK(u.worst > 1);
      }
    }
  }
}

TEST_CASE("the approximations' budgets are PTX's stated maxima", "[error_model][approximation]") {
  CHECK(approximation(Tanh::accurate).rel == 0);
  CHECK(approximation(Tanh::approx).rel == Approx(std::exp2(-10.987)).epsilon(1e-4));
  CHECK(approximation(Tanh::approx).rel >= std::exp2(-10.987));
  CHECK(approximation(Tanh::approx_f16).abs >= std::exp2(-10.987));
  CHECK(approximation(Tanh::approx_f16).argument == Dtype::f16);
  CHECK(approximation(Tanh::approx_bf16).abs == std::exp2(-8));
  CHECK(approximation(Exp::approx).rel == 0);  // ex2.approx.f32: 2 ulps, within kExpUlps
  CHECK(approximation(Exp::approx_f16).rel >= std::exp2(-9.9));
  CHECK(approximation(Exp::approx_f16).flush == std::ldexp(1.0, -14));
  CHECK(approximation(Exp::approx_bf16).rel == std::exp2(-7));
  CHECK(approximation(Exp::approx_bf16).argument == Dtype::bf16);
}

TEST_CASE("kernels whose matrix products read TF32, bfloat16 or float16 operands stay within fp32-precision's bound "
          "and exceed the IEEE one",
          "[error_model][soundness][fp32_precision]") {
  // Every fourth problem has q, k, v and dO scaled by 2^-18: float16 operands of a float32 run fall into float16's
  // subnormals there, where the rounding is absolute (η), not relative.
  constexpr int kTinyEvery = 4;
  constexpr double kTiny = 0x1p-18;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    std::mt19937_64 rng(kSeed + 10 + static_cast<std::uint64_t>(dt));
    std::map<std::string, Judged> declared, undeclared;
    RandomProblemOptions opt;
    opt.max_work = kSmallWork;
    for (int n = 0; n < kProblemsPerDtype; ++n) {
      Problem p = random_problem(rng, dt, opt);
      if (n % kTinyEvery == kTinyEvery - 1)
        for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout})
          for_each_index(t->shape(), [&](std::span<const std::int64_t> idx) { t->set(idx, kTiny * t->get(idx)); });
      const ExactForward ef = reference_forward(p);
      const ExactBackward eb = reference_backward(p);
      for (const Variant &v : support::fp32_precision_variants()) {
        const KernelContract c = support::contract_of(v);
        KernelContract ieee = c;
        ieee.fp32_precision = Fp32Precision::ieee;
        INFO(v.name() << " on " << p.shape.describe() << " " << mask_name(p.params.mask) << " q " << p.q.describe());
        Judged &d = declared[v.name()];
        judge(support::variant_kernel(v), p, ef, eb, c.precision(dt), ieee.precision(dt), d);
        INFO(d.where);
        REQUIRE(d.worst <= 1);
        judge(support::variant_kernel(v), p, ef, eb, ieee.precision(dt), ieee.precision(dt), undeclared[v.name()]);
      }
    }
    std::cout << "fp32-precision variants, " << dtype_name(dt) << " storage, " << kProblemsPerDtype
              << " problems — worst error ÷ bound declared / undeclared, geometric mean of the bound's widening:\n";
    for (const Variant &v : support::fp32_precision_variants()) {
      const Judged &d = declared[v.name()], &u = undeclared[v.name()];
      std::cout << "  " << v.name() << " [" << support::contract_of(v).describe_changes() << "]: " << d.worst
                << " / " << u.worst << ", ×"
                << std::exp(d.log_widening / static_cast<double>(std::max<std::int64_t>(d.widening_count, 1))) << '\n';
      if (dt == Dtype::f32) CHECK(u.worst > 1);  // a float32 run: every narrower operand needs its declaration
    }
  }
}

TEST_CASE("fp32-precision changes nothing where the storage already fits and cannot bound float16 operands past "
          "float16's range",
          "[error_model][fp32_precision]") {
  std::mt19937_64 rng(kSeed + 20);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {  // TF32 holds float16 and bfloat16, and P rounded to them
    const Problem p = make_problem(rng, Shape{1, 2, 1, 3, 5, 8, 4}, dt, Values::normal, Mask::causal);
    const ExactForward ef = reference_forward(p);
    const PrecisionProfile ieee = PrecisionProfile::for_storage(dt);
    const PrecisionProfile tf32 = parse_contract("fp32-precision=tf32").precision(dt);
    CHECK(forward_bounds(p, ef, tf32).out == forward_bounds(p, ef, ieee).out);
    CHECK(backward_bounds(p, ef, tf32).dq == backward_bounds(p, ef, ieee).dq);
  }
  Problem big = make_problem(rng, Shape{1, 1, 1, 2, 3, 4, 4}, Dtype::f32, Values::normal, Mask::none);
  big.k.set(std::array<std::int64_t, 4>{0, 0, 1, 2}, 1e6);  // past float16's largest value, 65504
  const ExactForward ef = reference_forward(big);
  const ForwardBounds f16 = forward_bounds(big, ef, parse_contract("fp32-precision=f16").precision(Dtype::f32));
  const ForwardBounds bf16 = forward_bounds(big, ef, parse_contract("fp32-precision=bf16").precision(Dtype::f32));
  for (std::size_t x = 0; x < f16.out.size(); ++x) {
    CHECK(std::isinf(f16.out[x]));   // undecided: the operand may round to Inf
    CHECK(std::isfinite(bf16.out[x]));  // bfloat16 has float32's range
  }
}
