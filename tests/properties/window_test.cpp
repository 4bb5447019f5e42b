// The window property: sliding-window attention within its bounds, and rows whose window hides nothing the mask shows
// equal to the run without it. A window one key too wide on its right fails on a small case; correct kernels — the
// feature kernel, naive and flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("window: a window one key too wide on its right is caught and shrinks to two rows, two keys, right edge 0") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::window_right_off_by_one), "window",
                                     feature_bug_options(FeatureBug::window_right_off_by_one));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "window");
  const FeatureSpec &f = c.minimal.spec.features;
  CHECK((f.bits & ATTNCHECK_FEATURE_WINDOW) != 0);
  CHECK(f.window_right == 0);  // row 0 must see key 0 alone, and sees key 1
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);  // the last row's window reaches the last key anyway: the extra key needs an earlier row
  CHECK(s.Lk == 2);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("window: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("window"); }

TEST_CASE("window: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "window", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "window", builtin_options("flash", dt));
}
