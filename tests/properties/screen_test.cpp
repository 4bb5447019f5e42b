// The screen (screen.h): the fast reference decides a case only where MPFR would decide it the same way, and a check
// with it reports what a check without it reports.
#include "attncheck/gen.h"
#include "attncheck/screen.h"
#include "property_support.h"

#include <rapidcheck.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace attncheck {
namespace {

using support::Bug;
using test::bug;
using test::options;

/// The properties that judge through the screen (PropertyDef::screened).
std::vector<std::string> screened_properties() {
  std::vector<std::string> ids;
  for (const PropertyDef *def : all_properties())
    if (def->screened) ids.emplace_back(def->id);
  return ids;
}

/// A screened bound never exceeds the exact one: β' ≤ β, and 0 exactly where β is 0. `loose` counts the finite
/// ones that give up more than 4τ (a large ε of their own: extreme values).
void check_screened_bounds(const std::vector<double> &screened, const std::vector<double> &exact, std::int64_t *n,
                           std::int64_t *loose) {
  REQUIRE(screened.size() == exact.size());
  for (std::size_t x = 0; x < exact.size(); ++x) {
    ++*n;
    if (exact[x] == 0) {
      REQUIRE(screened[x] == 0);
      continue;
    }
    REQUIRE(screened[x] <= exact[x]);
    if (std::isfinite(exact[x]) && screened[x] < exact[x] * (1 - 4 * kScreenMargin)) ++*loose;
  }
}

TEST_CASE("a screened bound is at most the MPFR one, gives up no more than the screen's margin, and its upper bound "
          "is at least the MPFR one", "[judge]") {
  std::int64_t elements = 0, loose = 0, screened_problems = 0, escalated = 0;
  for (const Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    CaseOptions co;
    co.dtype = dt;
    co.backward = true;
    co.features = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI |
                  ATTNCHECK_FEATURE_SINKS;
    const PrecisionProfile profile = KernelContract{}.precision(dt);
    rc::Random r(0x5c2ee7 + static_cast<std::uint64_t>(dt));
    for (int n = 0; n < 150; ++n) {
      const Case c = draw_case(r.split(), draw_spec(r.split(), rc::kNominalSize, co), co);
      const Problem p = c.problem();
      ExactSource mpfr(ExactSource::Mode::mpfr, profile), screen(ExactSource::Mode::screen, profile);
      const auto [exact, bound] = mpfr.forward(p);
      try {
        const auto [fast, certain] = screen.forward(p);
        check_screened_bounds(certain.out, bound.out, &elements, &loose);
        const std::vector<double> upper = screen.out_bound_upper(certain.out);  // β' ≤ β ≤ this
        for (std::size_t x = 0; x < upper.size(); ++x) REQUIRE(bound.out[x] <= upper[x]);
        REQUIRE(mpfr.out_bound_upper(bound.out) == bound.out);
        check_screened_bounds(certain.lse, bound.lse, &elements, &loose);
        if (p.dout) {
          const auto [grad, grad_bound] = mpfr.backward(p, exact);
          const auto [fast_grad, grad_certain] = screen.backward(p, fast);
          check_screened_bounds(grad_certain.dq, grad_bound.dq, &elements, &loose);
          check_screened_bounds(grad_certain.dk, grad_bound.dk, &elements, &loose);
          check_screened_bounds(grad_certain.dv, grad_bound.dv, &elements, &loose);
        }
        ++screened_problems;
      } catch (const ScreenEscalates &) {
        ++escalated;
      }
    }
  }
  INFO("screened " << screened_problems << " problems, " << elements << " elements (" << loose
                     << " looser than 4τ); escalated " << escalated);
  CHECK(screened_problems > 3 * escalated);  // the screen decides most problems (extreme values escalate)
  CHECK(elements > 10000);
  CHECK(loose * 100 < elements);
}

/// Everything of a property's report that a reader compares (not the counts of where the exact values came from).
void require_same_report(const PropertyReport &a, const PropertyReport &b) {
  INFO(a.id);
  REQUIRE(a.verdict == b.verdict);
  REQUIRE(a.cases == b.cases);
  REQUIRE(a.undecided == b.undecided);
  REQUIRE(a.worst_ratio == b.worst_ratio);
  REQUIRE(a.worst == b.worst);
  REQUIRE(a.note == b.note);
  REQUIRE(a.targeted.from == b.targeted.from);
  REQUIRE(a.targeted.to == b.targeted.to);
  REQUIRE(a.counterexample.has_value() == b.counterexample.has_value());
  if (a.counterexample) {
    REQUIRE(a.counterexample->reproduce == b.counterexample->reproduce);
    REQUIRE(a.counterexample->outcome.detail == b.counterexample->outcome.detail);
    REQUIRE(a.counterexample->outcome.worst_ratio == b.counterexample->outcome.worst_ratio);
    REQUIRE(a.counterexample->minimal.spec.describe() == b.counterexample->minimal.spec.describe());
  }
}

TEST_CASE("a check with the screen reports what a check without it reports, on correct and planted-bug kernels",
          "[judge]") {
  const attncheck_kernel &flash = test::builtin("flash");
  struct Run {
    const attncheck_kernel *kernel;
    Dtype dtype;
  };
  const std::vector<Run> runs{{&flash, Dtype::f32},
                              {&flash, Dtype::f16},
                              {&bug(Bug::no_rescale), Dtype::f32},
                              {&bug(Bug::causal_off_by_one), Dtype::f16},
                              {&bug(Bug::f16_dot_accumulation), Dtype::f32},
                              {&bug(Bug::ds_without_d_term), Dtype::bf16},
                              {&bug(Bug::gqa_head_mod), Dtype::f16},
                              {&bug(Bug::drop_last_partial_block), Dtype::f32},
                              {&bug(Bug::scale_cached_per_shape), Dtype::f32}};
  ReferenceCounts screened_total;
  std::set<std::string> failed;  // the properties whose counterexamples were compared
  for (const Run &run : runs) {
    CheckOptions o = options(run.dtype, 3);
    o.cases = 12;
    o.properties = screened_properties();
    o.contract = test::declared_contract(run.kernel->name);
    const RunReport with = check(*run.kernel, o);
    o.screen = false;
    const RunReport without = check(*run.kernel, o);
    INFO(run.kernel->name << " " << dtype_name(run.dtype));
    REQUIRE(with.properties.size() == without.properties.size());
    for (std::size_t n = 0; n < with.properties.size(); ++n) {
      require_same_report(with.properties[n], without.properties[n]);
      if (with.properties[n].counterexample) failed.insert(with.properties[n].id);
      screened_total += with.properties[n].reference;
      CHECK(without.properties[n].reference.fast_elements == 0);
    }
  }
  INFO("fast " << screened_total.fast_elements << ", MPFR " << screened_total.mpfr_elements << ", confirmations "
               << screened_total.confirmations);
  CHECK(screened_total.fast_elements > screened_total.mpfr_elements);
  // The planted bugs give counterexamples in most screened properties: their shrinking is compared too.
  std::string names;
  for (const std::string &id : failed) names += id + " ";
  INFO("counterexamples compared: " << names);
  CHECK(failed.size() * 2 >= screened_properties().size());
}

TEST_CASE("a screened pass confirms under MPFR only when its exact ratio could reach the threshold", "[judge]") {
  const attncheck_kernel &flash = test::builtin("flash");
  const Env env{flash, KernelContract{}.precision(Dtype::f32), KernelContract{}};
  // The first drawn case the screen passes (most do; extreme values escalate).
  Outcome screened;
  for (std::uint64_t seed = 1; seed < 50 && !screened.confirm; ++seed) {
    rc::Random r(seed);
    const Case c = draw_case(r.split(), draw_spec(r.split(), rc::kNominalSize, CaseOptions{}), CaseOptions{});
    screened = forward_accuracy(env, c.problem());
  }
  REQUIRE(screened.verdict == Verdict::pass);
  REQUIRE(screened.confirm);
  ReferenceCounts &counts = ReferenceCounts::of_this_thread();
  counts = {};
  const Outcome kept = exact_if_at_least(screened, screened.worst_ratio + screened.ratio_slack);
  CHECK(counts.confirmations == 0);
  CHECK(kept.confirm);
  const Outcome exact = exact_if_at_least(screened, 0);
  CHECK(counts.confirmations == 1);
  CHECK_FALSE(exact.confirm);
  CHECK(exact.worst_ratio <= screened.worst_ratio + screened.ratio_slack);
}

TEST_CASE("a screened pass's rank is asked of MPFR only where it could exceed the floor a record sets", "[judge]") {
  // A screened pass of ratio s whose exact ratio lies in a range of two ranks (its slack spans a rank boundary).
  const double s = 0.5 - 0x1p-14, exact_ratio = 0.5 + 0x1p-13;
  int confirmed = 0;
  Outcome o;
  o.verdict = Verdict::pass;
  o.worst_ratio = s;
  o.ratio_slack = o.bound_slack = 0x1p-10;
  o.confirm = std::make_shared<const std::function<Outcome()>>([&] {
    ++confirmed;
    Outcome e;
    e.verdict = Verdict::pass;
    e.worst_ratio = exact_ratio;
    return e;
  });
  const double highest = ranked_ratio(s + o.ratio_slack);
  REQUIRE(ranked_ratio(s * (1 - 2 * kScreenMargin) - (1 + 2 * kScreenMargin) * (s * o.bound_slack + o.ratio_slack)) <
          highest);
  SECTION("no rank of its range exceeds the floor: the lowest, no MPFR") {
    Outcome held = o;
    const double rank = exact_rank(held, highest);
    CHECK(confirmed == 0);
    CHECK(rank < highest);
    CHECK(held.confirm);  // still the screened outcome
  }
  SECTION("its highest rank exceeds the floor: the exact rank, from MPFR") {
    Outcome held = o;
    CHECK(exact_rank(held, highest - 0x1p-20) == ranked_ratio(exact_ratio));
    CHECK(confirmed == 1);
    CHECK_FALSE(held.confirm);
  }
  SECTION("no floor (an empty record): the exact rank") {
    Outcome held = o;
    CHECK(exact_rank(held) == ranked_ratio(exact_ratio));
    CHECK(confirmed == 1);
  }
}

TEST_CASE("every screened pass of every screened property is an MPFR pass whose exact ratio lies in its rank range",
          "[judge]") {
  const attncheck_kernel &flash = test::builtin("flash");
  const KernelContract contract = test::declared_contract("flash");
  std::int64_t confirmed = 0, bounds_only = 0;
  for (const PropertyDef *def : all_properties()) {
    if (!def->screened) continue;
    for (const Dtype dt : {Dtype::f32, Dtype::bf16}) {
      const Env env{flash, contract.precision(dt), contract};
      CaseOptions co;
      co.dtype = dt;
      co.backward = def->needs_backward;
      co.combinable = contract.features & kCombinableFeatures;
      if (def->require) def->require(co);
      const rc::Gen<Case> gen = gen_case(co);
      rc::Random r(0x7a9e + static_cast<std::uint64_t>(dt));
      for (int n = 0; n < 6; ++n) {
        const Case c = gen(r.split(), rc::kNominalSize).value();
        const Outcome screened = def->run(env, c);
        if (!screened.confirm) continue;  // not a screened pass: MPFR judged it
        const Outcome exact = (*screened.confirm)();
        INFO(def->id << " " << dtype_name(dt) << " " << c.spec.describe() << ": screened ratio "
                     << screened.worst_ratio << " (slack " << screened.ratio_slack << ", bounds "
                     << screened.bound_slack << "), exact " << exact.worst_ratio << " " << exact.detail);
        REQUIRE(exact.verdict == Verdict::pass);
        const double s = screened.worst_ratio;
        CHECK(exact.worst_ratio <= s + screened.ratio_slack);
        CHECK(exact.worst_ratio >= s * (1 - 2 * kScreenMargin) -
                                       (1 + 2 * kScreenMargin) * (s * screened.bound_slack + screened.ratio_slack));
        ++confirmed;
        if (screened.ratio_slack == 0 && screened.bound_slack > 0) ++bounds_only;
      }
    }
  }
  INFO("confirmed " << confirmed << " screened passes, " << bounds_only << " of checks that compare no exact value");
  CHECK(confirmed > 100);
  CHECK(bounds_only > 20);
}

}  // namespace
}  // namespace attncheck
