// The empty_sequences property: correct kernels of every style, and the bundled ones, answer Lk = 0 with zero rows
// and Lq = 0 with zero key gradients; a forward that returns at once on an empty KV cache and a backward that
// returns at once on an empty query are caught on the smallest case, naming the empty dimension.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <utility>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

TEST_CASE("empty_sequences: correct kernels in every summation order and the bundled ones handle Lk = 0 and Lq = 0") {
  for (const support::Variant &v : summation_orders()) {
    const RunReport r = check_property(support::variant_kernel(v), "empty_sequences", options());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  for (const support::Variant &v : support::contract_variants()) {
    const RunReport r = check_property(support::variant_kernel(v), "empty_sequences",
                                    [&] {
                                      CheckOptions o = options();
                                      o.contract = support::contract_of(v);
                                      return o;
                                    }());
    INFO(r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
  for (const auto &[name, dt] : {std::pair{"naive", Dtype::f32}, std::pair{"flash", Dtype::f32},
                                 std::pair{"flash", Dtype::f16}}) {
    const RunReport r = check_property(builtin(name), "empty_sequences", options(dt));
    INFO(name << ": " << r.text());
    CHECK(r.verdict() == Verdict::pass);
  }
}

TEST_CASE("empty_sequences: outputs left unwritten on an empty KV cache or an empty query are caught on one row") {
  struct Expect {
    Bug bug;
    const char *tensor;  ///< the failure names it first
    const char *empty;   ///< and the empty dimension
  };
  for (const Expect &e : {Expect{Bug::empty_kv_unwritten, "O[", "Lk = 0"},
                          Expect{Bug::empty_q_grads_unwritten, "dK[", "Lq = 0"}}) {
    INFO(support::bug_name(e.bug));
    const RunReport r = check_property(bug(e.bug), "empty_sequences", options());
    INFO(r.text());
    REQUIRE(r.verdict() == Verdict::fail);
    const Counterexample &c = *counterexample(r, "empty_sequences");
    CHECK(c.outcome.step == Step::mask);
    CHECK(c.outcome.detail.rfind(e.tensor, 0) == 0);
    CHECK(c.outcome.failing_what.find(e.empty) != std::string::npos);
    const Shape &s = c.minimal.spec.shape;
    CHECK(s.B * s.Hq * s.Lq * s.Lk * s.D * s.Dv == 1);
  }
}
