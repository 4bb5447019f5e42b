// The empty_rows property: a row that sees no key is O = 0, LSE = −∞ (or +∞), dQ = 0 under the default contract;
// anything finite under empty-rows=unspecified (NaN there is a warning); nothing to check under top-left causal.
#include "attncheck/check.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("empty_rows: correct kernels give O = 0, LSE = -Inf and dQ = 0 in rows that see no key") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "empty_rows", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
    CHECK(r.find("empty_rows")->cases >= 100);  // every case has such rows: Lq > Lk, causal
  }
}

TEST_CASE("empty_rows: NaN in a row that sees no key fails the finite step on a minimal case") {
  const RunReport r = check_property(bug(Bug::nan_fully_masked_rows), "empty_rows", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "empty_rows");
  CHECK(c.outcome.step == Step::finite);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lq == 2);
  CHECK(s.Lk == 1);
  CHECK(s.B * s.Hq * s.D * s.Dv == 1);
}

TEST_CASE("empty_rows: under empty-rows=unspecified NaN there is a warning, and top-left masks have no such rows") {
  const RunReport r = check_property(bug(Bug::nan_fully_masked_rows), "empty_rows", declaring("empty-rows=unspecified"));
  INFO(r.text());
  CHECK(r.verdict() == Verdict::warn);
  const RunReport tl = check_property(support::variant_kernel(support::Variant{}), "empty_rows",
                                   declaring("causal=top-left"));
  CHECK(tl.find("empty_rows")->tier == Tier::off);
  CHECK(tl.verdict() == Verdict::unsupported);
}

TEST_CASE("empty_rows: an LSE of +Inf (FlashAttention-2's marker) is accepted, any other value is not") {
  Case c;
  c.spec.shape = {.Lq = 2, .Lk = 1};
  c.spec.mask = Mask::causal;
  c.resize_values(/*backward=*/false);
  const PropertyDef &prop = *find_property("empty_rows");
  // A kernel that writes LSE = +∞ for rows without keys: the default variant with its LSE patched.
  static const attncheck_kernel plus_inf{
      ATTNCHECK_ABI_VERSION, "plus_inf_lse",
      [](const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
         DLTensor *lse) {
        const int st = support::variant_kernel(support::Variant{}).forward(p, q, k, v, out, lse);
        if (lse) *reinterpret_cast<float *>(static_cast<char *>(lse->data) + lse->byte_offset) = INFINITY;
        return st;
      },
      nullptr, nullptr};
  CHECK(prop.run(env_of(plus_inf), c).verdict == Verdict::pass);
  CHECK(find_property("accuracy")->run(env_of(plus_inf), c).verdict == Verdict::pass);
  const Outcome o = prop.run(env_of(bug(Bug::causal_top_left)), c);  // row 0 sees key 0: a finite LSE
  CHECK(o.verdict == Verdict::fail);
}
