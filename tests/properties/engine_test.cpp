// The engine: determinism, reproduce strings, the time budget, unsupported kernels, the ladder, the registry, the
// report text and the Catch2 helper.
#include "attncheck/catch.h"
#include "attncheck/check.h"
#include "attncheck/outcome.h"
#include "attncheck/property.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <limits>
#include <set>
#include <thread>

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

// A correct kernel whose first g_slow_calls forward calls take kSlowCall longer: a JIT kernel's compilation, paid by
// the first property checked.
constexpr auto kSlowCall = std::chrono::milliseconds(400);
// A time budget no load makes bind: the guard of tests that assert what a normal run reports.
constexpr auto kNeverBinds = std::chrono::seconds(600);
std::atomic<int> g_slow_calls{0};
const attncheck_kernel &correct() { return support::variant_kernel(support::Variant{}); }
int slow_first_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                       DLTensor *out, DLTensor *lse) {
  if (g_slow_calls.fetch_sub(1) > 0) std::this_thread::sleep_for(kSlowCall);
  return correct().forward(p, q, k, v, out, lse);
}
const char *slow_last_error() { return correct().last_error(); }
const attncheck_kernel kSlowFirst{ATTNCHECK_ABI_VERSION, "slow_first", slow_first_forward, nullptr, slow_last_error};
}  // namespace

TEST_CASE("the same seed gives the same cases, verdicts and report") {
  CheckOptions o = options();
  o.properties = {"accuracy", "lse"};
  const RunReport a = check(bug(Bug::causal_off_by_one), o), b = check(bug(Bug::causal_off_by_one), o);
  CHECK(a.text() == b.text());
  o.seed = 2;
  const RunReport c = check(bug(Bug::causal_off_by_one), o);
  CHECK(c.find("accuracy")->seed != a.find("accuracy")->seed);
}

TEST_CASE("a reproduce string replays the same minimal counterexample without searching") {
  const RunReport r = check_property(bug(Bug::gqa_head_mod), "accuracy", options(Dtype::f16));
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
  const Counterexample &first = *counterexample(r, "accuracy");
  CHECK(first.reproduce.find("reproduce=") != std::string::npos);

  CheckOptions o = options(Dtype::f16);
  o.reproduce = first.reproduce;
  const RunReport again = check(bug(Bug::gqa_head_mod), o);  // every property: only the one named is replayed
  INFO(again.text());
  REQUIRE(again.properties.size() == 1);
  REQUIRE(again.verdict() == Verdict::fail);
  const Counterexample &replayed = *counterexample(again, "accuracy");
  CHECK(replayed.minimal.same_as(first.minimal));
  CHECK(replayed.outcome.detail == first.outcome.detail);
  CHECK(again.properties[0].cases == 1);

  // The fixed kernel no longer fails on the replayed case.
  const RunReport fixed = check(support::variant_kernel(support::Variant{}), o);
  CHECK(fixed.verdict() == Verdict::pass);
  CHECK(fixed.properties[0].note.find("no longer fails") != std::string::npos);
}

TEST_CASE("a spent time budget stops starting cases and makes the verdict undecided") {
  CheckOptions o = options();
  o.time_budget = std::chrono::milliseconds(1);
  o.cases = 100'000;
  o.min_cases = 1000;  // far more than 1 ms of cases
  const RunReport r = check_property(support::variant_kernel(support::Variant{}), "accuracy", o);
  INFO(r.text());
  const PropertyReport &p = r.properties.at(0);
  CHECK(p.budget_exhausted);
  CHECK(p.cases < o.min_cases);
  CHECK(p.verdict == Verdict::undecided);
  CHECK(r.text().find("time budget") != std::string::npos);
}

TEST_CASE("a time budget that does not bind changes nothing: a slow first property is not cut to a share") {
  CheckOptions o = options();
  o.properties = {"accuracy", "sum_to_one"};
  o.cases = 30;
  g_slow_calls = 9;  // 3.6 s in accuracy's first cases: past half of a budget shared evenly would have been
  const RunReport free = check(kSlowFirst, o);
  REQUIRE(free.verdict() == Verdict::pass);
  o.time_budget = kNeverBinds;
  g_slow_calls = 9;
  const RunReport guarded = check(kSlowFirst, o);
  CHECK(guarded.text() == free.text());
  CHECK_FALSE(guarded.properties.at(0).budget_exhausted);
}

TEST_CASE("when the guard binds, the property it cut and those after it are undecided, saying how far each got") {
  CheckOptions o = options();
  o.properties = {"accuracy", "sum_to_one"};
  o.cases = 30;
  o.time_budget = kSlowCall / 4;  // the first call alone outlasts it, whatever the load
  g_slow_calls = 1;
  const RunReport r = check(kSlowFirst, o);
  INFO(r.text());
  const PropertyReport &cut = *r.find("accuracy"), &later = *r.find("sum_to_one");
  CHECK(cut.verdict == Verdict::undecided);
  CHECK(cut.budget_exhausted);
  CHECK(cut.cases == 1);
  CHECK(cut.note.find("ran out after 1 of 30 cases (about") != std::string::npos);
  CHECK(later.verdict == Verdict::undecided);
  CHECK(later.note.find("ran out before its first case") != std::string::npos);
  CHECK(r.verdict() == Verdict::undecided);
}

TEST_CASE("a worker's item ends at its run's end, not at a budget of its own") {
  CheckOptions o = options();
  o.cases = 30;
  o.time_budget = kNeverBinds;  // the run's budget; its end has passed already
  o.end = std::chrono::steady_clock::now();
  const RunReport r = check_property(correct(), "accuracy", o);
  INFO(r.text());
  CHECK(r.properties.at(0).verdict == Verdict::undecided);
  CHECK(r.properties.at(0).cases == 0);
}

TEST_CASE("each property's time is kept apart from the report's content, with the kernel's share of it") {
  CheckOptions o = options();
  o.properties = {"accuracy"};
  o.cases = 12;
  g_slow_calls = 2;
  const RunReport r = check(kSlowFirst, o);
  const Timing &t = r.properties.at(0).timing;
  CHECK(t.kernel_seconds >= 2 * std::chrono::duration<double>(kSlowCall).count());
  CHECK(t.seconds >= t.kernel_seconds);
  CHECK(r.text().find("seconds") == std::string::npos);
}

TEST_CASE("a kernel that declines every case is unsupported, not failed") {
  const RunReport r = check_property(kDeclines, "accuracy", options(Dtype::f16));
  INFO(r.text());
  const PropertyReport &p = r.properties.at(0);
  CHECK(p.verdict == Verdict::unsupported);
  CHECK(p.cases == 0);
  CHECK(p.unsupported > 0);
}

namespace {
std::atomic<int> g_calls{0};
int counting_forward(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                     DLTensor *lse) {
  ++g_calls;
  return correct().forward(p, q, k, v, out, lse);
}
const attncheck_kernel kCounting{ATTNCHECK_ABI_VERSION, "counting", counting_forward, nullptr, slow_last_error};
}  // namespace

TEST_CASE("a dtype the contract does not declare is off: no property calls the kernel, not even the shape probe") {
  CheckOptions o = options(Dtype::f16);
  o.properties = {"accuracy", "lse", "causal"};
  o.contract = parse_contract("dtypes=f32");
  o.detect_compile = true;
  g_calls = 0;
  const RunReport r = check(kCounting, o);
  INFO(r.text());
  CHECK(g_calls == 0);
  for (const PropertyReport &p : r.properties) {
    CHECK(p.tier == Tier::off);
    CHECK(p.verdict == Verdict::unsupported);
    CHECK(p.note == "declined: the kernel's contract does not declare dtypes=f16 (it declares dtypes=f32)");
  }
  o.dtype = Dtype::f32;  // the declared dtype runs as before
  const RunReport f32 = check(kCounting, o);
  CHECK(g_calls > 0);
  CHECK(f32.verdict() == Verdict::pass);
}

TEST_CASE("a kernel reading past the last key is caught because input padding holds NaN") {
  const RunReport r = check_property(bug(Bug::read_past_last_key), "accuracy", options());
  INFO(r.text());
  REQUIRE(r.verdict() == Verdict::fail);
}

TEST_CASE("the report prints the counterexample's floats as hex and decimal, with its seed and reproduce string") {
  const RunReport r = check_property(bug(Bug::missing_scale), "accuracy", options());
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

TEST_CASE("Ladder::each climbs step by step over all its outputs: the first failing step wins, whichever output") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor o = Tensor::contiguous(Dtype::f32, {1, 1, 1, 2}), lse = Tensor::contiguous(Dtype::f32, {1, 1, 1, 1});
  const std::vector<double> exact_o{1, 2}, bound_o{1e-6, 1e-6}, exact_lse{0}, bound_lse{1e-6};
  o.assign(std::vector<double>{1, 5});  // O: finite, out of its bound (a values failure)
  lse.assign(std::vector<double>{nan}); // LSE: NaN (a finite failure), listed second
  {
    Ladder L;
    CHECK_FALSE(L.each({{"O", o, exact_o, bound_o}, {"LSE", lse, exact_lse, bound_lse, Step::sums}}));
    CHECK(L.outcome().step == Step::finite);  // LSE's finite step comes before O's values step
    CHECK(L.outcome().detail.find("LSE") != std::string::npos);
  }
  lse.assign(std::vector<double>{0.5});  // LSE finite, out of its bound: sums comes before values
  {
    Ladder L;
    CHECK_FALSE(L.each({{"O", o, exact_o, bound_o}, {"LSE", lse, exact_lse, bound_lse, Step::sums}}));
    CHECK(L.outcome().step == Step::sums);
  }
  lse.assign(std::vector<double>{0});
  {
    Ladder L;
    CHECK(L.each({{"O", o, exact_o, bound_o, Step::mask}, {"LSE", lse, exact_lse, bound_lse, Step::sums}}));
    CHECK(L.outcome().verdict == Verdict::pass);  // O climbs to mask only: its values are the property's own
    CHECK(L.outcome().step == std::nullopt);
  }
}

TEST_CASE("each feature's property is the one results.h names for it, as the reports find it") {
  for (std::uint32_t bit : kAllFeatures) {
    const PropertyDef *d = find_property(feature_property_id(bit));
    REQUIRE(d != nullptr);
    CHECK(d->feature == bit);
  }
  for (const PropertyDef *d : all_properties())
    if (d->feature) CHECK(feature_property_id(d->feature) == d->id);
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

TEST_CASE("a kernel's speed predicts a long call of small head dims from its scores, not only its work", "[engine]") {
  // Measured: a forward on 1024 × 1024 scores at D = Dv = 128 in 1 s (and a 1 ms call). A call on 8192 × 8192 scores
  // at D = Dv = 1 has half that work but 64 times the scores: a kernel that materializes or exponentiates every score
  // needs about 64 s there, and a prediction from the work alone (0.5 s) would call it a hang at a few seconds.
  KernelSpeed speed;
  CallRecord r;
  r.forward = {Shape{.Lq = 1024, .Lk = 1024, .D = 128, .Dv = 128}.work(), std::chrono::seconds(1),
               Shape{.Lq = 1024, .Lk = 1024, .D = 128, .Dv = 128}};
  r.quickest = std::chrono::milliseconds(1);
  speed.record(r);
  const auto long_thin = speed.predict(Shape{.Lq = 8192, .Lk = 8192, .D = 1, .Dv = 1}, false);
  REQUIRE(long_thin);
  CHECK(*long_thin == Approx(0.001 + 0.999 * 64));
  // A call with more work per score than the measured one scales by its work.
  const auto wide = speed.predict(Shape{.Lq = 1024, .Lk = 1024, .D = 256, .Dv = 256}, false);
  REQUIRE(wide);
  CHECK(*wide == Approx(0.001 + 0.999 * 2));
  // The backward, never measured, is predicted from the forward; nothing is predicted before a call returned.
  const auto backward = speed.predict(Shape{.Lq = 1024, .Lk = 1024, .D = 128, .Dv = 128}, true);
  REQUIRE(backward);
  CHECK(*backward == Approx(1.0));
  CHECK_FALSE(KernelSpeed{}.predict(Shape{}, false));
}

namespace {
int throwing_forward(const attncheck_params *, const DLTensor *, const DLTensor *, const DLTensor *, DLTensor *,
                     DLTensor *) {
  throw std::runtime_error("boom");  // a kernel of C++ code letting an exception through the C ABI
}
const attncheck_kernel kThrows{ATTNCHECK_ABI_VERSION, "throws", throwing_forward, nullptr, nullptr};

Outcome throwing_check(const Env &, const Case &) { throw std::logic_error("an engine bug"); }
}  // namespace

TEST_CASE("a kernel's exception is its failed call, and attncheck's own is an error, never undecided") {
  const RunReport r = check_property(kThrows, "accuracy", options());
  INFO(r.text());
  const Counterexample *cx = counterexample(r, "accuracy");
  REQUIRE(cx);
  CHECK(r.properties.at(0).verdict == Verdict::fail);
  REQUIRE(cx->outcome.finding);
  CHECK(cx->outcome.finding->kind == Finding::Kind::call);
  CHECK(cx->outcome.detail.find("the kernel threw an exception: boom") != std::string::npos);

  PropertyDef def = *find_property("accuracy");
  def.run = throwing_check;
  const Case c = r.properties.at(0).counterexample->minimal;
  const Outcome o = evaluate(def, env_of(correct()), c);
  CHECK(o.verdict == Verdict::error);
  CHECK(o.detail == "attncheck's check threw: an engine bug");
}
