// The masked_nonfinite property: NaN/±Inf in keys the mask hides never reach rows that cannot see them. Kernels
// that skip masked keys pass it as a requirement (hidden-keys=any); a row that reads a hidden key fails; under the
// default contract (hidden-keys=finite) a leak is a warning, not a failure.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("masked_nonfinite: a kernel that skips masked keys keeps NaN and Inf out of every row, as a requirement") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "masked_nonfinite", declaring("hidden-keys=any"));
    INFO(r.text());
    CHECK(r.find("masked_nonfinite")->tier == Tier::required);
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("masked_nonfinite: a row that reads a poisoned hidden key turns NaN, on a 2×2 square") {
  Case c;
  c.spec.shape = {.Lq = 2, .Lk = 2};
  c.spec.mask = Mask::causal;
  c.resize_values(/*backward=*/false);
  c.v = {1, 3};
  const PropertyDef &prop = *find_property("masked_nonfinite");
  CHECK(prop.run(env_of(support::variant_kernel(support::Variant{})), c).verdict == Verdict::pass);
  const Outcome o = prop.run(env_of(bug(Bug::causal_off_by_one)), c);
  INFO(o.detail);
  CHECK(o.verdict == Verdict::fail);
  CHECK(o.step == Step::finite);
  CHECK(o.detail.rfind("LSE[0,0,0]: got nan", 0) == 0);
  CHECK(o.detail.find("keys hidden from row 0 (j ≥ 1) set to NaN") != std::string::npos);
  REQUIRE(o.failing_case);
  CHECK(std::isnan(o.failing_case->k[1]));  // the poisoned problem is the one reported
}

TEST_CASE("masked_nonfinite: a leak is a failure when the kernel promises isolation, a warning when it does not") {
  const RunReport promised = check_property(bug(Bug::causal_off_by_one), "masked_nonfinite", declaring("hidden-keys=any"));
  INFO(promised.text());
  CHECK(promised.verdict() == Verdict::fail);
  const RunReport advisory = check_property(bug(Bug::causal_off_by_one), "masked_nonfinite", options());
  INFO(advisory.text());
  CHECK(advisory.find("masked_nonfinite")->tier == Tier::advisory);
  CHECK(advisory.verdict() == Verdict::warn);
  CHECK(advisory.verdict(/*strict=*/true) == Verdict::fail);
  REQUIRE(counterexample(advisory, "masked_nonfinite"));  // a warning has its shrunk counterexample too
  const Shape &s = counterexample(advisory, "masked_nonfinite")->minimal.spec.shape;
  CHECK(s.Lq * s.Lk <= 4);
}
