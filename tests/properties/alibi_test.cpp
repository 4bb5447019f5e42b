// The alibi property: biases −slope_h·|i' − j| within their bounds, and a head whose slope is 0 equal to the run
// without ALiBi. Slopes read in reverse head order fail on two heads; correct kernels — the feature kernel, naive and
// flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("alibi: slopes read in reverse head order are caught and shrink to two heads, one key one row away") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::alibi_reversed_slopes), "alibi",
                                     feature_bug_options(FeatureBug::alibi_reversed_slopes));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "alibi");
  CHECK((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_ALIBI) != 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Hq == 2);           // one head's slopes are a palindrome: reversing them needs two
  CHECK(s.Lq * s.Lk == 2);    // a bias needs a key at a distance from the row: two rows and one key
  CHECK(s.B * s.D * s.Dv == 1);
}

TEST_CASE("alibi: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("alibi"); }

TEST_CASE("alibi: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "alibi", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "alibi", builtin_options("flash", dt));
}
