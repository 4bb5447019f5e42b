// The dropout property: results within their bounds given the mask the kernel returned, that mask reproducible from
// its seed, and the keep rate and independence within their intervals. A backward that applies another mask than
// the one forward returned fails on a single element; correct kernels — the feature kernel and naive (flash declares
// no dropout) — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("dropout: a mask not reproducible from its seed is caught on a single element") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::dropout_mask_not_reproducible), "dropout",
                                     feature_bug_options(FeatureBug::dropout_mask_not_reproducible));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "dropout");
  const FeatureSpec &f = c.minimal.spec.features;
  CHECK((f.bits & ATTNCHECK_FEATURE_DROPOUT) != 0);
  CHECK(f.dropout_p > 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("dropout: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("dropout"); }

TEST_CASE("dropout: the bundled naive kernel passes in float32") {
  passes_feature(builtin("naive"), "dropout", builtin_options("naive"));
}
