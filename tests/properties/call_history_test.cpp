// The call_history property: correct kernels of every style pass whatever came before; a kernel that caches its
// scale per shape and one that returns the last result again for the same input buffers pass accuracy but fail here,
// with the history named and a small counterexample.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <utility>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("call_history: correct kernels in every summation order, and the bundled ones, pass whatever came before") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "call_history", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  // naive computes in float32 storage only; flash in every storage dtype.
  for (const auto &[name, dt] : {std::pair{"naive", Dtype::f32}, std::pair{"flash", Dtype::f32},
                                 std::pair{"flash", Dtype::bf16}}) {
    const RunReport r = check_property(builtin(name), "call_history", options(dt));
    INFO(name << ": " << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("call_history: the history bugs are right on first calls (accuracy passes) and caught after their history") {
  struct Expect {
    Bug bug;
    const char *history;  ///< in the failure's description of the call
  };
  for (const Expect &e : {Expect{Bug::scale_cached_per_shape, "params.scale"},
                          Expect{Bug::result_cached_by_address, "same buffers"}}) {
    INFO(support::bug_name(e.bug));
    // Every search case of accuracy is of the default scale on new buffers: nothing to confuse. (Its targeted
    // phase may catch result_cached_by_address: a mutant has its parent's shape, and its buffers may reuse the
    // parent's freed addresses — the bug's very hazard.)
    CheckOptions search_only = options();
    search_only.targeted_cases = 0;
    CHECK(check_property(bug(e.bug), "accuracy", search_only).verdict() == Verdict::pass);
    const RunReport r = check_property(bug(e.bug), "call_history", options());
    INFO(r.text());
    REQUIRE(r.verdict() == Verdict::fail);
    const Counterexample &c = *counterexample(r, "call_history");
    CHECK(c.outcome.failing_what.find(e.history) != std::string::npos);
    const Shape &s = c.minimal.spec.shape;
    CHECK(s.B * s.Hq * s.Lq * s.D * s.Dv == 1);
    CHECK(s.Lk <= 2);  // one key for a replayed result; two for a scale (one key's weight is 1 at any scale)
  }
}
