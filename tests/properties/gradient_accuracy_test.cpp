// The gradient_accuracy property: a correct backward stays within the error bound in several summation orders and
// in the bundled kernels; dK without the scale, dS without the −D_i term and a dO read at compact offsets fail on
// small shrunk cases; a kernel without a backward is unsupported.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
/// A correct forward without a backward.
const attncheck_kernel &forward_only() {
  static const attncheck_kernel k = [] {
    attncheck_kernel x = support::variant_kernel(support::Variant{});
    x.name = "forward_only";
    x.backward = nullptr;
    return x;
  }();
  return k;
}

const Shape &shrunk(const RunReport &r, std::string_view id) { return counterexample(r, id)->minimal.spec.shape; }
}  // namespace

TEST_CASE("gradient_accuracy: a correct backward stays within the error bound in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "gradient_accuracy", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("gradient_accuracy: dK without the scale factor is caught and shrinks to L ≤ 2, D ≤ 4") {
  const RunReport r = check_property(bug(Bug::dk_missing_scale), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "gradient_accuracy");
  CHECK(c.outcome.detail.rfind("dK", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq <= 2);
  CHECK(s.Lk <= 2);
  CHECK(s.D <= 4);
}

TEST_CASE("gradient_accuracy: dS without the −D_i term is caught and shrinks to a two-key row") {
  const RunReport r = check_property(bug(Bug::ds_without_d_term), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r, "gradient_accuracy");
  CHECK(s.Lq == 1);
  CHECK(s.Lk <= 2);
  CHECK(s.D * s.Dv <= 2);
}

TEST_CASE("gradient_accuracy: a dO read at compact offsets whatever its strides is caught on a dO of its own layout "
          "alone") {
  const RunReport r = check_property(bug(Bug::dout_assumed_compact), "gradient_accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "gradient_accuracy");
  CHECK(own_layouts(c) == std::vector<Operand>{Operand::dout});
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lk * s.D == 1);
}

TEST_CASE("gradient_accuracy: a kernel without a backward is unsupported, not failed") {
  const RunReport r = check_property(forward_only(), "gradient_accuracy", options());
  INFO(r.text());
  CHECK(r.verdict() == Verdict::unsupported);
  CHECK(r.properties.at(0).cases == 0);
}

TEST_CASE("gradient_accuracy: the bundled naive backward stays within the bound in float32, flash's in float32 and "
          "bfloat16") {
  const RunReport naive = check_property(builtin("naive"), "gradient_accuracy", builtin_options("naive"));
  INFO(naive.text());
  CHECK(naive.verdict() == Verdict::pass);
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    const RunReport r = check_property(builtin("flash"), "gradient_accuracy", builtin_options("flash", dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
