// The batch_invariance property: correct kernels that compute each row the same way whatever shares the call pass it
// when they declare batch-invariant=bitwise; a kernel whose split count follows the occupancy (B·Hq, FlashDecoding's
// heuristic) is within every bound, warned about under the defaults and failed when it declares batch invariance.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

using namespace attncheck;
using namespace attncheck::test;

namespace {
constexpr const char *kInvariant = "batch-invariant=bitwise";

const attncheck_kernel &occupancy_splits() {
  support::Variant v;
  v.splits_by_occupancy = true;
  return support::variant_kernel(v);
}
}  // namespace

TEST_CASE("batch_invariance: correct kernels in every summation order and the bundled ones keep a row's bits alone") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "batch_invariance", declaring(kInvariant));
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  for (const char *name : {"naive", "flash"}) {
    const RunReport r = check_property(builtin(name), "batch_invariance", declaring(kInvariant));
    INFO(name << ": " << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("batch_invariance: splits chosen by occupancy are within every bound, a warning by default and a failure "
          "when batch invariance is declared") {
  const attncheck_kernel &k = occupancy_splits();
  CHECK(check_property(k, "accuracy", options()).verdict() == Verdict::pass);
  const RunReport warned = check_property(k, "batch_invariance", options());
  INFO(warned.text());
  CHECK(warned.find("batch_invariance")->tier == Tier::advisory);
  CHECK(warned.verdict() == Verdict::warn);
  const RunReport r = check_property(k, "batch_invariance", declaring(kInvariant));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &c = *counterexample(r, "batch_invariance");
  CHECK(c.outcome.step == Step::values);
  CHECK(c.outcome.failing_what.find("alone") != std::string::npos);
  // The smallest case whose rows take other splits alone: two batch entries of one row (one split together, two
  // alone) and keys enough to split.
  const Shape &s = c.minimal.spec.shape;
  CHECK(s.B == 2);
  CHECK(s.Hq * s.Lq * s.D * s.Dv == 1);
  CHECK(s.Lk >= 2);
}
