// The variance_normalization property: correct kernels scale logits by 1/√D at every head dim (no false alarm over
// hundreds of cases and seeds), and kernels that scale by 1, 1/D or 1/√Dv fail, shrinking to D = 2.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
constexpr const char *kId = "variance_normalization";
/// Head dims spanning 2 … 512: the smallest, both probe regimes (D ≤ 3 and D ≥ 4), tile boundaries, odd sizes.
constexpr std::array<std::int64_t, 14> kHeadDims{2, 3, 4, 5, 7, 16, 31, 64, 111, 128, 255, 257, 384, 512};
/// Seeds of the false-alarm runs (each kDefaultCases cases).
constexpr std::array<std::uint64_t, 4> kSeeds{2, 3, 5, 8};

/// A case of the property's kind at head dim D (its values only seed the probes).
Case case_at(std::int64_t D, Dtype dt = Dtype::f32) {
  Case c;
  c.spec.shape = Shape{.Lq = 1, .Lk = 1, .D = D, .Dv = 1};
  c.spec.dtype = dt;
  c.resize_values(false);
  for (std::size_t n = 0; n < c.q.size(); ++n) c.q[n] = static_cast<double>(n % 3) - 1;  // any values: a seed
  return c;
}

Outcome run_at(const attncheck_kernel &k, std::int64_t D, Dtype dt = Dtype::f32) {
  const Env env{k, PrecisionProfile::for_storage(dt), KernelContract{}};
  return find_property(kId)->run(env, case_at(D, dt));
}

void check_shrunk(const RunReport &r, std::int64_t D) {
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, kId);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.D == D);
  CHECK(s.B * s.Hq * s.Lq * s.Lk == 1);
  CHECK(c.found_after <= CheckOptions::kDefaultCases);
}
}  // namespace

TEST_CASE("variance_normalization: a correct kernel's effective scale is 1/√D in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), kId, options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("variance_normalization: a correct kernel raises no false alarm over four hundred cases and four seeds") {
  for (std::uint64_t seed : kSeeds) {
    const RunReport r = check_property(support::variant_kernel(support::Variant{}), kId, options(Dtype::f32, seed));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
    CHECK(r.properties.at(0).cases == CheckOptions::kDefaultCases);
  }
}

TEST_CASE("variance_normalization: correct float16 and bfloat16 kernels pass under their storage profile") {
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (const support::Variant &v : support::correct_variants())
      if (v.round_p && v.accumulate == Dtype::f32) {
        const RunReport r = check_property(support::variant_kernel(v), kId, options(dt));
        INFO(r.text());
        CHECK(r.verdict() == Verdict::pass);
      }
}

TEST_CASE("variance_normalization: at every head dim from 2 to 512 a correct kernel passes and each wrong scale fails") {
  const attncheck_kernel &good = support::variant_kernel(support::Variant{});
  for (std::int64_t D : kHeadDims) {
    INFO("D = " << D);
    const Outcome ok = run_at(good, D);
    INFO(ok.detail);
    CHECK(ok.verdict == Verdict::pass);
    for (Bug b : {Bug::missing_scale, Bug::scale_1_over_d, Bug::scale_1_over_sqrt_dv}) {
      INFO(support::bug_name(b));
      const Outcome bad = run_at(bug(b), D);
      CHECK(bad.verdict == Verdict::fail);
      CHECK(bad.detail.find("effective logit scale") != std::string::npos);
    }
  }
}

// D = 2 is the smallest head dim at which 1 or 1/D differ from 1/√D; 1/√Dv differs already at D = 1 on the
// probe (Dv = 2).
TEST_CASE("variance_normalization: a missing scale is found and shrinks to D = 2 with one query and one key") {
  check_shrunk(check_property(bug(Bug::missing_scale), kId, options()), 2);
}

TEST_CASE("variance_normalization: a scale of 1/D is found and shrinks to D = 2") {
  check_shrunk(check_property(bug(Bug::scale_1_over_d), kId, options()), 2);
}

TEST_CASE("variance_normalization: a scale of 1/√Dv is found and shrinks to D = 1, where the probe's Dv is 2") {
  check_shrunk(check_property(bug(Bug::scale_1_over_sqrt_dv), kId, options()), 1);
}

TEST_CASE("variance_normalization: a missing scale fails in float16 too, where the probe's small weight underflows") {
  const Outcome o = run_at(bug(Bug::missing_scale), 512, Dtype::f16);
  INFO(o.detail);
  CHECK(o.verdict == Verdict::fail);
  CHECK(run_at(support::variant_kernel(support::Variant{}), 512, Dtype::f16).verdict == Verdict::pass);
}
