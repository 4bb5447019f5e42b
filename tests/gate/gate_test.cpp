// The gate shared by the CLI and Python fronts: replay of a recorded counterexample (the one implementation behind
// `attncheck replay` and Report.replay) — its verdict under the report's contract or one given, its exit code, and
// the one-line errors of a report it cannot replay.
#include "attncheck/check.h"
#include "attncheck/gate.h"
#include "attncheck/replay.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

namespace attncheck {
namespace {

const attncheck_kernel &bug(support::Bug b) { return support::variant_kernel(support::bug_variant(b)); }
const attncheck_kernel &correct() { return support::variant_kernel(support::correct_variants().front()); }

/// A report of `property` checked on `kernel` under the default contract: one run, as `check` records it.
reporting::Document checked(const attncheck_kernel &kernel, const char *property) {
  CheckOptions o;
  o.properties = {property};
  o.cases = 40;
  reporting::Run run;
  run.source.kind = reporting::KernelSource::Kind::plugin;
  run.plan = "default";
  run.report = check(kernel, o);
  reporting::Document doc;
  doc.runs.push_back(std::move(run));
  return doc;
}

/// A NaN in rows that see no key: a failure of `empty_rows` under the defaults (empty-rows=zero).
reporting::Document nan_rows_report() {
  reporting::Document doc = checked(bug(support::Bug::nan_fully_masked_rows), "empty_rows");
  REQUIRE(doc.failures().size() == 1);
  return doc;
}

TEST_CASE("a replayed counterexample fails again at the step the check recorded, and passes on a fixed kernel") {
  const reporting::Document doc = nan_rows_report();
  const gate::ReplayTarget t = gate::replay_target(doc, 1);
  CHECK(t.property->id == "empty_rows");
  CHECK((t.failure == 1 && t.of == 1));
  const gate::ReplayResult again = gate::replay(t, bug(support::Bug::nan_fully_masked_rows), std::nullopt);
  CHECK(again.verdict() == Verdict::fail);
  CHECK(again.outcome.step == t.counterexample().outcome.step);
  CHECK(again.outcome.detail == t.counterexample().outcome.detail);
  CHECK(gate::replay_exit_code(again, false) == gate::kExitCounterexample);
  const gate::ReplayResult fixed = gate::replay(t, correct(), std::nullopt);
  CHECK(fixed.verdict() == Verdict::pass);
  CHECK(gate::replay_exit_code(fixed, false) == gate::kExitPass);
}

TEST_CASE("a replay judged under a contract that does not promise the property warns, failing only a strict gate") {
  const reporting::Document doc = nan_rows_report();
  const gate::ReplayTarget t = gate::replay_target(doc, 1);
  const gate::ReplayResult r =
      gate::replay(t, bug(support::Bug::nan_fully_masked_rows), parse_contract("empty-rows=unspecified"));
  CHECK(r.tier == Tier::advisory);
  CHECK(r.outcome.verdict == Verdict::fail);
  CHECK(r.verdict() == Verdict::warn);
  CHECK(r.contract.describe_changes() == "empty-rows=unspecified");
  CHECK(gate::replay_exit_code(r, false) == gate::kExitPass);
  CHECK(gate::replay_exit_code(r, true) == gate::kExitCounterexample);
}

TEST_CASE("a replay under a contract that asks nothing of the property runs nothing and says why") {
  const reporting::Document doc = nan_rows_report();
  const gate::ReplayTarget t = gate::replay_target(doc, 1);
  const gate::ReplayResult r = gate::replay(t, bug(support::Bug::nan_fully_masked_rows),
                                            parse_contract("causal=top-left"));
  CHECK(r.tier == Tier::off);
  CHECK(r.outcome.detail == "the contract given leaves empty_rows nothing to check: causal=top-left");
  CHECK(gate::replay_exit_code(r, true) == gate::kExitPass);
  // Known before any kernel: the fronts ask replay_plan first and load nothing under tier off.
  const gate::ReplayResult plan = gate::replay_plan(t, parse_contract("causal=top-left"));
  CHECK(plan.tier == Tier::off);
  CHECK(plan.outcome.verdict == r.outcome.verdict);
  CHECK(plan.outcome.detail == r.outcome.detail);
  CHECK(gate::replay_plan(t, std::nullopt).tier == Tier::required);
  CHECK(gate::replay_plan(t, parse_contract("empty-rows=unspecified")).tier == Tier::advisory);
}

/// The ReplayError replay_target throws for counterexample `failure` of `doc` (what(), out_of_range).
std::pair<std::string, bool> replay_error(const reporting::Document &doc, std::size_t failure) {
  try {
    gate::replay_target(doc, failure);
  } catch (const gate::ReplayError &e) {
    return {e.what(), e.out_of_range};
  }
  return {"no error", false};
}

TEST_CASE("a report it cannot replay is a one-line ReplayError saying which counterexample is missing") {
  const reporting::Document passed = checked(correct(), "empty_rows");
  REQUIRE(passed.failures().empty());
  CHECK(replay_error(passed, 1) == std::pair<std::string, bool>{"the report records no counterexample: nothing to replay", true});
  const reporting::Document doc = nan_rows_report();
  CHECK(replay_error(doc, 2) == std::pair<std::string, bool>{"counterexample 2 is out of range: the report has 1", true});
  reporting::Document renamed = doc;
  renamed.runs[0].report.properties[0].id = "no_such_property";
  const auto [what, out_of_range] = replay_error(renamed, 1);
  CHECK_FALSE(out_of_range);
  CHECK(what.find("'no_such_property', which this attncheck does not have") != std::string::npos);
}

TEST_CASE("each profile is found by its name, and another name finds none") {
  for (const gate::ProfileSpec &p : gate::kProfiles) CHECK(gate::find_profile(p.name) == &p);
  CHECK(gate::find_profile("fast") == nullptr);
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {

/// A run whose only property ended with `v` (and a note), as check records it.
reporting::Document one_property(Verdict v) {
  reporting::Document doc;
  reporting::Run run;
  PropertyReport p;
  p.id = "accuracy";
  p.verdict = v;
  p.note = "attncheck's own check failed, a bug of attncheck and not of the kernel: boom";
  run.report.properties.push_back(p);
  doc.runs.push_back(std::move(run));
  return doc;
}

}  // namespace

TEST_CASE("attncheck's own failure is exit 4 and ERROR, never undecided, and a counterexample elsewhere still exits 1") {
  const reporting::Document error = one_property(Verdict::error);
  CHECK(error.runs[0].report.verdict() == Verdict::error);
  CHECK(error.verdict() == Verdict::error);
  CHECK(gate::exit_code(error, false, false) == gate::kExitInternal);
  CHECK(gate::exit_code(one_property(Verdict::undecided), false, false) == gate::kExitInconclusive);
  reporting::Document both = error;
  both.runs.push_back(one_property(Verdict::fail).runs[0]);
  CHECK(gate::exit_code(both, false, false) == gate::kExitCounterexample);
  // The renderers say so: the table's verdict, JUnit's <error>, the report read back.
  const std::string text = reporting::to_text(error);
  CHECK(text.find("ERROR") != std::string::npos);
  CHECK(reporting::run_line(error.runs[0].report, false).find("1 attncheck errors") != std::string::npos);
  const std::string junit = reporting::to_junit(error);
  CHECK(junit.find("errors=\"1\"") != std::string::npos);
  CHECK(junit.find("<error message=\"attncheck&#39;s own check failed") != std::string::npos);
  CHECK(reporting::from_json(reporting::to_json(error)).runs[0].report.properties[0].verdict == Verdict::error);
}

}  // namespace attncheck
