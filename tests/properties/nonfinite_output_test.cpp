// The nonfinite_output property (advisory): finite inputs with a finite, representable exact result give finite
// outputs. A softmax without max subtraction overflows exp where a required property fails the same case too, so the
// warning escalates to a failure on a single element; a declared float16 q·k that overflows stays a warning; correct
// kernels in several summation orders and the bundled kernels pass.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("nonfinite_output: a softmax without max subtraction overflows exp on a single element, a required failure") {
  const RunReport r = check_property(bug(Bug::no_max_subtraction), "nonfinite_output", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const PropertyReport &p = *r.find("nonfinite_output");
  CHECK(p.tier == Tier::required);  // escalated: accuracy fails the case too (NaN where its bound is finite)
  CHECK_THAT(p.note, Catch::Contains("accuracy fails this case"));
  const Counterexample &c = *counterexample(r, "nonfinite_output");
  CHECK(c.outcome.step == Step::finite);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);  // one logit past exp's range is enough
}

TEST_CASE("nonfinite_output: a float16 q·k the contract declares warns where it overflows, and fails only --strict") {
  // accumulate-qk=f16 lets q·k overflow (SPEC.md §4.5): the accuracy properties leave those elements undecided, so
  // the NaN is this property's warning alone.
  support::Variant v;
  v.accumulate_qk = Dtype::f16;
  CheckOptions o = options();
  o.contract = support::contract_of(v);
  const RunReport r = check_property(support::variant_kernel(v), "nonfinite_output", o);
  INFO(r.text());
  const PropertyReport &p = *r.find("nonfinite_output");
  CHECK(p.tier == Tier::advisory);
  CHECK(p.verdict == Verdict::warn);
  CHECK(r.verdict(/*strict=*/true) == Verdict::fail);
  REQUIRE(counterexample(r, "nonfinite_output"));
  CHECK(counterexample(r, "nonfinite_output")->outcome.step == Step::finite);
}

TEST_CASE("nonfinite_output: a correct kernel's outputs stay finite on extreme inputs in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "nonfinite_output", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("nonfinite_output: the bundled naive kernel stays finite in float32, flash in every storage dtype") {
  const RunReport naive = check_property(builtin("naive"), "nonfinite_output", builtin_options("naive"));
  INFO(naive.text());
  CHECK(naive.verdict() == Verdict::pass);
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const RunReport r = check_property(builtin("flash"), "nonfinite_output", builtin_options("flash", dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
