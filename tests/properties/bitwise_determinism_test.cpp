// The bitwise_determinism property (advisory): the outputs a contract promises only within the error bound are
// bitwise reproducible anyway. A backward that sums dQ in an order that changes from call to call warns on a
// three-key row (and fails determinism once bitwise is promised); correct kernels in several summation orders and the
// bundled kernels, checked under the default contract, pass.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;

namespace {
/// A correct kernel whose backward sums dQ over the keys in an order that changes from call to call (FlashAttention-2's
/// atomic accumulation): within the bound, not bitwise.
const attncheck_kernel &atomic_dq() {
  support::Variant v;
  v.nondeterministic_backward = true;
  return support::variant_kernel(v);
}
}  // namespace

TEST_CASE("bitwise_determinism: dQ summed in an order that changes per call warns, shrunk to one row of three keys") {
  const RunReport r = check_property(atomic_dq(), "bitwise_determinism", options());
  INFO(r.text());
  const PropertyReport &p = *r.find("bitwise_determinism");
  CHECK(p.tier == Tier::advisory);  // the default contract: backward-determinism=within-bound
  REQUIRE(p.verdict == Verdict::warn);
  CHECK(r.verdict(/*strict=*/true) == Verdict::fail);
  const Counterexample &c = *counterexample(r, "bitwise_determinism");
  CHECK(c.outcome.step == Step::values);
  CHECK(c.outcome.detail.rfind("dQ", 0) == 0);
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.Lk == 3);  // two terms add to the same bits in either order: three keys are the fewest that can differ
  CHECK(s.B * s.Hq * s.Lq * s.D * s.Dv == 1);
}

TEST_CASE("bitwise_determinism: once bitwise results are promised, determinism fails that kernel and this is off") {
  const RunReport off = check_property(atomic_dq(), "bitwise_determinism", declaring("determinism=bitwise"));
  CHECK(off.find("bitwise_determinism")->tier == Tier::off);
  const RunReport r = check_property(atomic_dq(), "determinism", declaring("determinism=bitwise"));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  CHECK(counterexample(r, "determinism")->outcome.detail.rfind("dQ", 0) == 0);
}

TEST_CASE("bitwise_determinism: nothing to check when the kernel promises every output bitwise") {
  const RunReport r = check_property(support::variant_kernel(support::Variant{}), "bitwise_determinism",
                                  declaring("determinism=bitwise"));
  CHECK(r.find("bitwise_determinism")->tier == Tier::off);
  CHECK(r.verdict() == Verdict::unsupported);
}

TEST_CASE("bitwise_determinism: a correct kernel's bits repeat, forward and backward, in every summation order") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "bitwise_determinism", options());
    INFO(r.text());
    CHECK(r.find("bitwise_determinism")->tier == Tier::advisory);
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("bitwise_determinism: the bundled naive kernel's bits repeat in float32, flash's in float32 and float16") {
  // Checked under the default contract: the bitwise results they declare would turn this property off.
  const RunReport naive = check_property(builtin("naive"), "bitwise_determinism", options());
  INFO(naive.text());
  CHECK(naive.verdict() == Verdict::pass);
  for (Dtype dt : {Dtype::f32, Dtype::f16}) {
    const RunReport r = check_property(builtin("flash"), "bitwise_determinism", options(dt));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}
