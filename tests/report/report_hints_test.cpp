// Hints from evidence (SPEC.md §3.1): a planted real bug's failure groups carry, beside "no declaration explains
// it", a hint computed from the counterexample that names the defect — the scale fitted, the keys dropped, the mask's
// alignment, the lost rescale — and only a hint whose changed exact result reproduces the kernel's output; a correct
// kernel of a declarable convention gets none.
#include "attncheck/check.h"
#include "attncheck/report_io.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <iostream>
#include <string>

using namespace attncheck;
using namespace attncheck::reporting;
using support::Bug;
using support::Variant;

namespace {

/// Planned cases per property: the quick profile's.
constexpr int kCases = 15;

/// Every property but long_rows (as report_explain_test.cpp), `kCases` cases under the default contract with evidence
/// (and so hints), as one report.
Document checked(const attncheck_kernel &kernel, Dtype dt) {
  CheckOptions o;
  o.dtype = dt;
  o.cases = kCases;
  o.evidence = true;
  for (const PropertyDef *d : all_properties())
    if (d->id != "long_rows") o.properties.emplace_back(d->id);
  Document doc;
  doc.runs.push_back({{KernelSource::Kind::builtin, ""}, "quick", check(kernel, o)});
  return doc;
}

/// Every hint of the failure groups of `doc`.
std::vector<Hint> group_hints(const Document &doc) {
  std::vector<Hint> out;
  for (const FailureGroup &g : group_failures(doc)) out.insert(out.end(), g.hints.begin(), g.hints.end());
  return out;
}

}  // namespace

TEST_CASE("exploration: planted bugs' captions") {
  const std::pair<Bug, Dtype> bugs[] = {
      {Bug::missing_scale, Dtype::f16}, {Bug::drop_last_partial_block, Dtype::f32},
      {Bug::causal_off_by_one, Dtype::f32}, {Bug::no_rescale, Dtype::f32},
      {Bug::no_max_subtraction, Dtype::f32}, {Bug::scale_1_over_d, Dtype::f32},
  };
  for (const auto &[bug, dt] : bugs) {
    const Document doc = checked(support::variant_kernel(support::bug_variant(bug)), dt);
    for (const FailureGroup &g : group_failures(doc)) std::cerr << support::bug_name(bug) << ": " << g.caption << "\n";
  }
}
