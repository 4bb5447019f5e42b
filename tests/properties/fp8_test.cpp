// The fp8 property: q, k, v as FP8 bits times per-tensor descales, within their bounds, and the output unchanged when
// descale_q and descale_k swap. Inputs read without their descales fail on a single element; correct kernels — the
// feature kernel and naive (flash declares no FP8) — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("fp8: inputs read without their descales are caught on a single element") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::fp8_without_descale), "fp8",
                                     feature_bug_options(FeatureBug::fp8_without_descale));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "fp8");
  CHECK((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_FP8) != 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("fp8: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("fp8"); }

TEST_CASE("fp8: the bundled naive kernel passes in float32") {
  passes_feature(builtin("naive"), "fp8", builtin_options("naive"));
}
