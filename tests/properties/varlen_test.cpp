// The varlen property: packed variable-length batches within their bounds, each sequence equal to itself run alone.
// A sequence that reads the next one's first key fails on two one-row sequences; correct kernels — the feature
// kernel, naive and flash — pass.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "feature_support.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

TEST_CASE("varlen: a sequence that reads the next one's first key is caught on two sequences of one row and key") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::varlen_reads_across_boundary), "varlen",
                                     feature_bug_options(FeatureBug::varlen_reads_across_boundary));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "varlen");
  CHECK((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_VARLEN) != 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B == 2);  // a boundary needs a second sequence
  CHECK(s.Lq * s.Lk == 1);
  CHECK(s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("varlen: the correct feature kernel passes in float32 and bfloat16") { feature_kernel_passes("varlen"); }

TEST_CASE("varlen: the bundled naive kernel passes in float32, flash in float32 and float16") {
  passes_feature(builtin("naive"), "varlen", builtin_options("naive"));
  for (Dtype dt : {Dtype::f32, Dtype::f16}) passes_feature(builtin("flash"), "varlen", builtin_options("flash", dt));
}
