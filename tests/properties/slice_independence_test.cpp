// The slice_independence property: correct kernels keep batches and heads apart in several summation orders; a
// kernel whose query heads read the wrong kv head fails on the smallest GQA layout.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("slice_independence: a correct kernel's batches and heads stay bit-identical in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "slice_independence", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("slice_independence: a correct kernel keeps slices apart in float16 storage") {
  const RunReport r = check_property(support::variant_kernel(support::Variant{}), "slice_independence",
                                  options(Dtype::f16));
  INFO(r.text());
  CHECK(r.verdict() == Verdict::pass);
}

TEST_CASE("slice_independence: query heads reading kv head h mod Hkv are found on two kv heads of group two") {
  const RunReport r = check_property(bug(Bug::gqa_head_mod), "slice_independence", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "slice_independence");
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Hkv == 2);  // h / G and h mod Hkv differ only with two kv heads and a group of two
  CHECK(s.Hq == 4);
  CHECK(s.B * s.Lq * s.Lk * s.D * s.Dv == 1);
  CHECK(c.outcome.detail.find("when the k, v of kv head") != std::string::npos);
}
