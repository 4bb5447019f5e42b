// The gradient_nonvanishing property: for N(0,1) inputs a correct kernel's ‖dQ‖/‖dO‖ and ‖dK‖/‖dO‖ match the
// reference's within the norm of the error bound, at every head dim from 2 to 512; a missing scale (saturated
// softmax, collapsed gradients) or a 1/D scale fails, with a backward or through a forward-only kernel.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <random>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
constexpr const char *kId = "gradient_nonvanishing";
constexpr std::array<std::int64_t, 10> kHeadDims{2, 3, 4, 16, 64, 111, 128, 256, 384, 512};
constexpr std::array<std::uint64_t, 4> kSeeds{2, 3, 5, 8};
/// The shape of the direct runs: a few rows and keys, Dv small.
constexpr std::int64_t kRows = 3, kKeys = 6, kValueDim = 4;

/// `k` without its backward (its forward untouched).
attncheck_kernel without_backward(const attncheck_kernel &k) {
  attncheck_kernel x = k;
  x.backward = nullptr;
  return x;
}

/// A case of i.i.d. N(0, 1) q, k, v, dout (rounded to float32) at head dim D.
Case gaussian_case(std::int64_t D, std::uint64_t seed) {
  Case c;
  c.spec.shape = Shape{.Lq = kRows, .Lk = kKeys, .D = D, .Dv = kValueDim};
  c.resize_values(true);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  for (std::vector<double> *t : {&c.q, &c.k, &c.v, &c.dout})
    for (double &x : *t) x = static_cast<double>(static_cast<float>(normal(gen)));
  return c;
}

Outcome run_at(const attncheck_kernel &k, std::int64_t D) {
  const Env env = env_of(k);
  return find_property(kId)->run(env, gaussian_case(D, static_cast<std::uint64_t>(D)));
}

void check_small_failure(const RunReport &r) {
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, kId);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.D == 2);   // at D = 1 every one of these scales is 1/√D
  CHECK(s.Lk == 2);  // one key: P = 1 and the gradients reaching q and k are 0 whatever the scale
  CHECK(s.Lq == 1);
  CHECK(s.Dv == 1);
  CHECK(c.found_after <= CheckOptions::kDefaultCases);
}
}  // namespace

TEST_CASE("gradient_nonvanishing: a correct backward's gradient norms match the reference in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), kId, options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("gradient_nonvanishing: a correct kernel raises no false alarm over four hundred cases and four seeds") {
  for (std::uint64_t seed : kSeeds) {
    const RunReport r = check_property(support::variant_kernel(support::Variant{}), kId, options(Dtype::f32, seed));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("gradient_nonvanishing: at every head dim from 2 to 512 correct kernels pass and wrong scales fail") {
  const attncheck_kernel &good = support::variant_kernel(support::Variant{});
  const attncheck_kernel good_forward = without_backward(good);
  for (std::int64_t D : kHeadDims) {
    INFO("D = " << D);
    CHECK(run_at(good, D).verdict == Verdict::pass);
    CHECK(run_at(good_forward, D).verdict == Verdict::pass);
    for (Bug b : {Bug::missing_scale, Bug::scale_1_over_d}) {
      INFO(support::bug_name(b));
      const Outcome with = run_at(bug(b), D), fwd = run_at(without_backward(bug(b)), D);
      INFO(with.detail << "\n" << fwd.detail);
      CHECK(with.verdict == Verdict::fail);
      CHECK(fwd.verdict == Verdict::fail);
    }
  }
}

TEST_CASE("gradient_nonvanishing: a missing scale is found and shrinks to one query, two keys, D = 2") {
  check_small_failure(check_property(bug(Bug::missing_scale), kId, options()));
}

TEST_CASE("gradient_nonvanishing: a scale of 1/D is found and shrinks to one query, two keys, D = 2") {
  check_small_failure(check_property(bug(Bug::scale_1_over_d), kId, options()));
}

TEST_CASE("gradient_nonvanishing: a forward-only kernel without the scale fails at its effective scale") {
  const attncheck_kernel fwd = without_backward(bug(Bug::missing_scale));
  const RunReport r = check_property(fwd, kId, options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  CHECK(counterexample(r, kId)->outcome.detail.find("forward-only") != std::string::npos);
  const RunReport ok = check_property(without_backward(support::variant_kernel(support::Variant{})), kId, options());
  INFO(ok.text());
  CHECK(ok.verdict() == Verdict::pass);
}
