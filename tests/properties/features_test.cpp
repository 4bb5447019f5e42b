// The feature properties (window, softcap, alibi, sinks, attn_mask, varlen, paged, dropout, fp8; SPEC.md §2.7)
// together: a correct feature kernel passes each in every storage dtype, and a kernel that does not declare a feature
// has it declined. Each property's planted bug and correct kernels (the bundled ones too) are in its own
// <id>_test.cpp; every planted feature bug is also caught in selftest_test.cpp (and feature_reach_test.cpp); rows a
// window or mask leaves empty, under each empty-rows declaration, in contract_semantics_test.cpp.
#include "attncheck/check.h"
#include "feature_kernels.h"
#include "property_support.h"

#include <catch2/catch.hpp>


using namespace attncheck;
using namespace attncheck::test;
using support::FeatureBug;

namespace {
/// options() under the feature kernels' contract (every feature they implement).
CheckOptions feature_options(Dtype dt = Dtype::f32) {
  CheckOptions o = options(dt);
  o.contract = parse_contract(support::feature_contract(FeatureBug::none));
  return o;
}

constexpr const char *kFeatureProperties[] = {"window",    "softcap", "alibi", "sinks",  "attn_mask",
                                              "varlen", "paged",   "dropout", "fp8"};
}  // namespace

TEST_CASE("features: a correct feature kernel passes every feature property in float32") {
  for (const char *id : kFeatureProperties) {
    const RunReport r = check_property(support::feature_kernel(FeatureBug::none), id, feature_options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("features: a correct feature kernel passes every feature property in float16 and bfloat16") {
  for (Dtype dt : {Dtype::f16, Dtype::bf16})
    for (const char *id : kFeatureProperties) {
      CheckOptions o = feature_options(dt);
      o.cases = 40;
      const RunReport r = check_property(support::feature_kernel(FeatureBug::none), id, o);
      INFO(r.text());
      CHECK(r.verdict() == Verdict::pass);
    }
}

TEST_CASE("features: a kernel that does not declare a feature has its property declined") {
  const RunReport r = check_property(support::feature_kernel(FeatureBug::none), "window", options());
  INFO(r.text());
  const PropertyReport *p = r.find("window");
  REQUIRE(p);
  CHECK(p->tier == Tier::off);
  CHECK(p->verdict == Verdict::unsupported);
  CHECK(p->note.find("declined") != std::string::npos);
}
