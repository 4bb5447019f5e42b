// The softcap property: s → c·tanh(s/c) on scale·q·k before ALiBi and the mask, within its bounds, and a cap far
// above every logit equal to no cap. A cap applied after the mask (hidden keys at −c, not −∞) fails on a small case;
// correct kernels — the feature kernel, naive and flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("softcap: a cap applied after the mask gives a hidden key weight, caught on one row of two keys") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::softcap_after_mask), "softcap",
                                     feature_bug_options(FeatureBug::softcap_after_mask));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "softcap");
  CHECK(c.outcome.step == Step::mask);  // the hidden key's value or gradient is no longer 0
  const FeatureSpec &f = c.minimal.spec.features;
  CHECK((f.bits & ATTNCHECK_FEATURE_SOFTCAP) != 0);
  // Something must hide a key: the window, the mask tensor or causal.
  CHECK(((f.bits & (ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_MASK)) != 0 || c.minimal.spec.mask != Mask::none));
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // one key seen, one hidden
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("softcap: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("softcap"); }

TEST_CASE("softcap: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "softcap", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "softcap", builtin_options("flash", dt));
}
