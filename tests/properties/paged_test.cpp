// The paged property: a paged KV cache within its bounds with pages in any order, its output independent of where
// the pages lie and equal to the contiguous cache's. Keys read at their logical page instead of the block table's
// fail on one page of one key; correct kernels — the feature kernel, naive and flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("paged: keys read at their logical page, not the block table's, are caught on one page of one key") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::paged_logical_page), "paged",
                                     feature_bug_options(FeatureBug::paged_logical_page));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "paged");
  const FeatureSpec &f = c.minimal.spec.features;
  CHECK((f.bits & ATTNCHECK_FEATURE_PAGED) != 0);
  CHECK(f.page_size == 1);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("paged: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("paged"); }

TEST_CASE("paged: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "paged", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "paged", builtin_options("flash", dt));
}
