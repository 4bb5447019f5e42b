// The attn_mask property: a boolean or additive mask tensor, broadcast or not, within its bounds, and a boolean mask
// equal to the additive mask of 0 and −∞ with its pattern. A boolean mask read as visible only where its byte is 1
// fails on a single element; correct kernels — the feature kernel and naive (flash declares no mask) — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("attn_mask: a boolean mask visible only where its byte is 1 hides a visible key, caught on one element") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::mask_byte_one), "attn_mask",
                                     feature_bug_options(FeatureBug::mask_byte_one));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "attn_mask");
  const FeatureSpec &f = c.minimal.spec.features;
  CHECK((f.bits & ATTNCHECK_FEATURE_MASK) != 0);
  CHECK(f.mask_kind == MaskKind::boolean);
  CHECK(f.mask_bytes);  // visible bytes other than 1: what the bug misreads
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
}

TEST_CASE("attn_mask: the correct feature kernel passes in float32 and bfloat16") {
  feature_kernel_passes("attn_mask");
}

TEST_CASE("attn_mask: the bundled naive kernel passes in float32") {
  passes_feature(builtin("naive"), "attn_mask", builtin_options("naive"));
}
