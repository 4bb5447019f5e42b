// The sum_to_one property: each softmax row of a correct kernel sums to 1 within its bound in several summation
// orders, under a declared bfloat16 accumulation and in the bundled kernels; an accumulator not rescaled, outputs
// accumulated onto the buffer and NaN in rows that see no key fail on small shrunk cases.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
const Shape &shrunk(const RunReport &r, std::string_view id) { return counterexample(r, id)->minimal.spec.shape; }
}  // namespace

TEST_CASE("sum_to_one: each softmax row of a correct kernel sums to 1 within its bound") {
  // Dv = Lk makes these cases the suite's most expensive: three summation orders suffice here.
  const std::vector<support::Variant> orders = summation_orders();
  for (std::size_t n = 0; n < orders.size(); n += 2) {
    const RunReport r = check_property(support::variant_kernel(orders[n]), "sum_to_one", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("sum_to_one: a bfloat16-accumulating kernel passes when it declares bfloat16 accumulation") {
  support::Variant v;
  v.accumulate = Dtype::bf16;
  CheckOptions o = options(Dtype::bf16);
  o.contract = parse_contract("accumulate=bf16 round-p=no");
  const RunReport declared = check_property(support::variant_kernel(v), "sum_to_one", o);
  INFO(declared.text());
  CHECK(declared.verdict() != Verdict::fail);
  // Under the default profile (float32 accumulation) its row sums are out of bounds.
  const RunReport undeclared = check_property(support::variant_kernel(v), "sum_to_one", options(Dtype::bf16));
  INFO(undeclared.text());
  CHECK(undeclared.verdict() == Verdict::fail);
}

TEST_CASE("sum_to_one: an accumulator not rescaled when the row max grows breaks the row sums") {
  const RunReport r = check_property(bug(Bug::no_rescale), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "sum_to_one");
  CHECK(s.Lq == 1);
  CHECK(s.Lk == 2);  // the second key raises the max: the smallest row that rescales
  CHECK(s.D <= 2);
}

TEST_CASE("sum_to_one: output accumulated onto what the buffer held shows up as non-finite output") {
  const RunReport r = check_property(bug(Bug::output_not_zeroed), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  CHECK(counterexample(r, "sum_to_one")->outcome.step == Step::finite);
  const Shape &s = shrunk(r, "sum_to_one");
  CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D == 1);
}

TEST_CASE("sum_to_one: NaN in rows that see no key breaks the masking step") {
  const RunReport r = check_property(bug(Bug::nan_fully_masked_rows), "sum_to_one", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "sum_to_one");
  CHECK(c.minimal.spec.mask == Mask::causal);
  CHECK(c.minimal.spec.shape.Lq == 2);  // one row that sees no key needs Lq > Lk
  CHECK(c.minimal.spec.shape.Lk == 1);
}

TEST_CASE("sum_to_one: the bundled naive kernel's rows sum to 1 in float32, flash's in float32 and bfloat16") {
  const RunReport naive = check_property(builtin("naive"), "sum_to_one", builtin_options("naive"));
  INFO(naive.text());
  CHECK(naive.verdict() == Verdict::pass);
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    const RunReport r = check_property(builtin("flash"), "sum_to_one", builtin_options("flash", dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
