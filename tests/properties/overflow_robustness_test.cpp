// The overflow_robustness property: correct kernels return finite O and LSE for logits far past exp's range;
// a kernel that does not subtract the row max overflows and fails on a one-key row.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <array>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("overflow_robustness: a correct kernel's output stays finite for logits far past exp's range") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "overflow_robustness", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("overflow_robustness: a correct kernel stays finite in float16 and bfloat16 storage") {
  // FlashAttention-like kernels (P rounded to storage, float32 accumulation), float16 and bfloat16 in turn.
  constexpr std::array<Dtype, 2> kStorage{Dtype::f16, Dtype::bf16};
  std::size_t n = 0;
  for (const support::Variant &v : support::correct_variants())
    if (v.round_p && v.accumulate == Dtype::f32) {
      const Dtype dt = kStorage[n++ % kStorage.size()];
      const RunReport r = check_property(support::variant_kernel(v), "overflow_robustness", options(dt));
      INFO(r.text());
      CHECK(r.verdict() == Verdict::pass);
    }
}

TEST_CASE("overflow_robustness: exp without the max subtraction overflows to NaN on a one-key row") {
  const RunReport r = check_property(bug(Bug::no_max_subtraction), "overflow_robustness", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "overflow_robustness");
  CHECK(c.outcome.step == Step::finite);
  CHECK(c.minimal.spec.family == Family::large);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq * s.Lk * s.B * s.Hq == 1);  // one logit past 88.7 suffices
  CHECK(s.D * s.Dv <= 2);
}
