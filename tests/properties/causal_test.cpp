// The causal property: correct kernels pass in several summation orders; kernels that let a row read a hidden key,
// or give NaN in rows that see no key, fail within the default case budget on a small shrunk case.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
const Counterexample &shrunk(const Report &r) { return *counterexample(r, "causal"); }
}  // namespace

TEST_CASE("causal: a correct kernel's rows ignore hidden keys, even NaN or infinite ones, in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const Report r = check_property(support::variant_kernel(v), "causal", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("causal: a correct kernel ignores hidden keys in float16 and bfloat16 storage") {
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const Report r = check_property(support::variant_kernel(support::Variant{}), "causal", options(dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("causal: a row that sees one future key is found, and shrinks to a row that should see no key") {
  const Report r = check_property(bug(Bug::causal_off_by_one), "causal", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = shrunk(r);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);  // Lq > Lk: row 0 should see no key, and sees key 0 (its LSE is finite, not −∞)
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("causal: a row that sees one future key turns NaN when that key is poisoned, on a 2×2 square") {
  // Lq = Lk = 2: row 0 sees key 0 and must not see key 1; the buggy kernel's row 0 reads key 1.
  Case c;
  c.spec.shape = {.Lq = 2, .Lk = 2};
  c.spec.mask = Mask::causal;
  c.resize_values(/*backward=*/false);
  c.v = {1, 3};
  const PropertyDef &causal = *find_property("causal");
  const Env good{support::variant_kernel(support::Variant{}), PrecisionProfile::for_storage(Dtype::f32)};
  CHECK(causal.run(good, c).verdict == Verdict::pass);
  const Env bad{bug(Bug::causal_off_by_one), PrecisionProfile::for_storage(Dtype::f32)};
  const Outcome o = causal.run(bad, c);
  INFO(o.detail);
  CHECK(o.verdict == Verdict::fail);
  CHECK(o.step == Step::finite);  // NaN poison shows before the finite change does (step mask)
  CHECK(o.detail.rfind("LSE[0,0,0]: got nan", 0) == 0);
  CHECK(o.detail.find("keys hidden from row 0 (j ≥ 1)") != std::string::npos);
}

TEST_CASE("causal: a top-left aligned mask is found where a row that should see no key sees one") {
  const Report r = check_property(bug(Bug::causal_top_left), "causal", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Shape &s = shrunk(r).minimal.spec.shape;
  CHECK(s.Lq == 2);  // Lq > Lk: row 0 sees no key bottom-right aligned, key 0 top-left aligned
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("causal: NaN in a row that sees no key fails the finite step") {
  const Report r = check_property(bug(Bug::nan_fully_masked_rows), "causal", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = shrunk(r);
  CHECK(c.outcome.step == Step::finite);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);  // one row that sees no key needs Lq > Lk
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}
