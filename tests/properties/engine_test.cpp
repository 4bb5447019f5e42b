// The engine: determinism, reproduce strings, the time budget, unsupported kernels, the ladder, the registry, the
// report text and the Catch2 helper.
#include "attncheck/catch.h"
#include "attncheck/check.h"
#include "attncheck/outcome.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <set>

using namespace attncheck;
using namespace attncheck::test;
using support::Bug;

namespace {
int decline_forward(const attncheck_params *, const DLTensor *, const DLTensor *, const DLTensor *, DLTensor *,
                    DLTensor *) {
  return ATTNCHECK_UNSUPPORTED;
}
const char *decline_message() { return "float32 only"; }
const attncheck_kernel kDeclines{ATTNCHECK_ABI_VERSION, "declines", decline_forward, nullptr, decline_message};
}  // namespace

TEST_CASE("the same seed gives the same cases, verdicts and report") {
  CheckOptions o = options();
  o.properties = {"accuracy", "lse"};
  const Report a = check(bug(Bug::causal_off_by_one), o), b = check(bug(Bug::causal_off_by_one), o);
  CHECK(a.text() == b.text());
  o.seed = 2;
  const Report c = check(bug(Bug::causal_off_by_one), o);
  CHECK(c.find("accuracy")->seed != a.find("accuracy")->seed);
}

TEST_CASE("a reproduce string replays the same minimal counterexample without searching") {
  const Report r = check_property(bug(Bug::gqa_head_mod), "accuracy", options(Dtype::f16));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &first = *counterexample(r, "accuracy");
  CHECK(first.reproduce.find("reproduce=") != std::string::npos);

  CheckOptions o = options(Dtype::f16);
  o.reproduce = first.reproduce;
  const Report again = check(bug(Bug::gqa_head_mod), o);  // every property: only the one named is replayed
  INFO(again.text());
  REQUIRE(again.properties.size() == 1);
  REQUIRE(again.verdict() == Verdict::fail);
  const Counterexample &replayed = *counterexample(again, "accuracy");
  CHECK(replayed.minimal.same_as(first.minimal));
  CHECK(replayed.outcome.detail == first.outcome.detail);
  CHECK(again.properties[0].cases == 1);

  // The fixed kernel no longer fails on the replayed case.
  const Report fixed = check(support::variant_kernel(support::Variant{}), o);
  CHECK(fixed.verdict() == Verdict::pass);
  CHECK(fixed.properties[0].note.find("no longer fails") != std::string::npos);
}

TEST_CASE("a spent time budget stops starting cases and makes the verdict undecided") {
  CheckOptions o = options();
  o.time_budget = std::chrono::milliseconds(1);
  o.cases = 100'000;
  o.min_cases = 1000;  // far more than 1 ms of cases
  const Report r = check_property(support::variant_kernel(support::Variant{}), "accuracy", o);
  INFO(r.text());
  const PropertyReport &p = r.properties.at(0);
  CHECK(p.budget_exhausted);
  CHECK(p.cases < o.min_cases);
  CHECK(p.verdict == Verdict::undecided);
  CHECK(r.text().find("time budget") != std::string::npos);
}

TEST_CASE("a kernel that declines every case is unsupported, not failed") {
  const Report r = check_property(kDeclines, "accuracy", options(Dtype::f16));
  INFO(r.text());
  const PropertyReport &p = r.properties.at(0);
  CHECK(p.verdict == Verdict::unsupported);
  CHECK(p.cases == 0);
  CHECK(p.unsupported > 0);
}

TEST_CASE("a kernel reading past the last key is caught because input padding holds NaN") {
  const Report r = check_property(bug(Bug::read_past_last_key), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
}

TEST_CASE("the report prints the counterexample's floats as hex and decimal, with its seed and reproduce string") {
  const Report r = check_property(bug(Bug::missing_scale), "accuracy", options());
  const std::string t = r.text();
  const Counterexample &c = *counterexample(r, "accuracy");
  CHECK(t.find("counterexample for accuracy") != std::string::npos);
  CHECK(t.find("failing step: sums") != std::string::npos);
  CHECK(t.find("0x1p+0 (1)") != std::string::npos);
  CHECK(t.find("seed: " + std::to_string(c.seed)) != std::string::npos);
  CHECK(t.find(c.reproduce) != std::string::npos);
  CHECK(c.found_after >= 1);
  CHECK(c.shrink_steps >= 1);
}

TEST_CASE("the ladder records the first failing step and keeps fail, undecided and unsupported apart") {
  Tensor t = Tensor::contiguous(Dtype::f32, {1, 1, 1, 2});
  t.assign(std::vector<double>{1, std::numeric_limits<double>::quiet_NaN()});
  const std::vector<double> exact{1, 2}, bound{1e-6, 1e-6}, inf_bound{std::numeric_limits<double>::infinity(), 1};
  {
    Ladder L;
    CHECK(L.call(CallResult{ATTNCHECK_OK, ""}, "forward"));
    CHECK_FALSE(L.finite("O", t, exact));
    CHECK_FALSE(L.within(Step::values, "O", t, exact, bound));  // no-op after the failure
    const Outcome o = L.outcome();
    CHECK(o.verdict == Verdict::fail);
    CHECK(o.step == Step::finite);
    CHECK(o.detail.find("O[0,0,0,1]") != std::string::npos);
  }
  {
    Ladder L;
    CHECK_FALSE(L.call(CallResult{ATTNCHECK_UNSUPPORTED, "no"}, "forward"));
    CHECK(L.outcome().verdict == Verdict::unsupported);
  }
  {
    Ladder L;
    CHECK(L.within(Step::values, "O", std::vector<double>{3, 2}, exact, inf_bound, {2}));
    const Outcome o = L.outcome();
    CHECK(o.verdict == Verdict::undecided);
    CHECK(o.step == Step::values);
  }
  {
    Ladder L;
    L.within(Step::values, "O", std::vector<double>{1, 2}, exact, bound, {2});
    CHECK_THROWS_AS(L.within(Step::sums, "O", std::vector<double>{1, 2}, exact, bound, {2}), std::logic_error);
  }
}

TEST_CASE("every registered property has a unique id, a formula and a check") {
  std::set<std::string_view> ids;
  for (const PropertyDef *p : all_properties()) {
    CHECK(ids.insert(p->id).second);
    CHECK(!p->formula.empty());
    CHECK(p->run != nullptr);
    CHECK(find_property(p->id) == p);
  }
  for (std::string_view id : {"accuracy", "lse", "gradient_accuracy", "sum_to_one"}) CHECK(ids.count(id));
  CHECK_THROWS_AS(check_property(kDeclines, "no_such_property", options()), std::invalid_argument);
}

TEST_CASE("ATTNCHECK_REQUIRE_PROPERTY passes a correct kernel and its message carries the full report") {
  const attncheck_kernel &good = support::variant_kernel(support::Variant{});
  ATTNCHECK_REQUIRE_PROPERTY(good, "sum_to_one", options());
  ATTNCHECK_CHECK_PROPERTY(good, "lse", options(Dtype::bf16));
  const auto bad = catch_support::run(bug(Bug::missing_scale), "accuracy", options());
  CHECK_FALSE(bad.passed);
  CHECK(bad.message.find("counterexample for accuracy") != std::string::npos);
  CHECK(bad.message.find("reproduce: ") != std::string::npos);
}
