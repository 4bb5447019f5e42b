// A failure tells its author what it means: a correct kernel of each convention the contract can declare, checked
// under the defaults, fails with every explained group naming exactly its declaration; planted real bugs are explained
// by none, and their captions say so.
#include "attncheck/check.h"
#include "attncheck/report_io.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace attncheck;
using namespace attncheck::reporting;
using support::Variant;

namespace {

/// Planned cases per property: the quick profile's.
constexpr int kCases = 15;

/// Every property but long_rows (its long rows cost a scalar variant seconds each and add no convention), `kCases`
/// cases under the default contract, as one report.
Document checked_under_defaults(const attncheck_kernel &kernel, Dtype dt) {
  CheckOptions o;
  o.dtype = dt;
  o.cases = kCases;
  for (const PropertyInfo &p : property_catalog())
    if (p.id != "long_rows") o.properties.emplace_back(p.id);
  Document doc;
  doc.runs.push_back({{KernelSource::Kind::builtin, ""}, "quick", check(kernel, o)});
  return doc;
}

/// The declarations the failure groups of `doc` name.
std::set<std::string> named(const Document &doc) {
  std::set<std::string> out;
  for (const FailureGroup &g : group_failures(doc))
    for (const Explanation &e : g.explained) out.insert(e.declaration);
  return out;
}

/// The convention variant whose contract (contract_of) has `declaration` as its one change from the defaults: a
/// contract variant, one whose products read narrower operands, or logits in bfloat16 on the same base.
Variant convention(const std::string &declaration) {
  std::vector<Variant> all = support::contract_variants();
  for (const Variant &v : support::fp32_precision_variants()) all.push_back(v);
  Variant bf16_logits = all.front();
  bf16_logits.accumulate_qk = Dtype::bf16;
  all.push_back(bf16_logits);
  for (const Variant &v : all)
    if (support::contract_of(v).describe_changes() == declaration) return v;
  FAIL("no contract variant declares " << declaration);
  return {};
}

}  // namespace

TEST_CASE("a correct kernel of each declarable convention fails the defaults explained by exactly its declaration") {
  // The storage dtype where each convention differs from the defaults (a rounded P, an LSE in storage: narrow only).
  const std::pair<const char *, Dtype> conventions[] = {
      {"causal=top-left", Dtype::f32},       {"causal=top-left", Dtype::f16},
      {"rowsum=rounded-p", Dtype::f16},      {"lse=storage", Dtype::f16},
      {"accumulate-qk=f16", Dtype::f32},     {"empty-rows=unspecified", Dtype::f32},
      {"accumulate-qk=bf16", Dtype::bf16},   {"fp32-precision=tf32", Dtype::f32},
      {"fp32-precision=bf16", Dtype::f32},   {"fp32-precision=f16", Dtype::f32},
  };
  for (const auto &[declaration, dt] : conventions) {
    const Variant v = convention(declaration);
    const Document doc = checked_under_defaults(support::variant_kernel(v), dt);
    INFO(v.name() << " " << dtype_name(dt) << "\n" << to_text(doc));
    REQUIRE(doc.verdict() == Verdict::fail);
    CHECK(named(doc) == std::set<std::string>{declaration});
  }
}

TEST_CASE("conventions that the defaults already allow leave nothing to explain") {
  // Per-head GQA gradients (float16/bfloat16) and an atomic dQ order are the defaults' own allowances.
  for (const Variant &v : support::contract_variants()) {
    if (!v.grad_per_head && !v.nondeterministic_backward) continue;
    const Document doc = checked_under_defaults(support::variant_kernel(v), Dtype::f16);
    INFO(v.name() << "\n" << to_text(doc));
    CHECK(doc.verdict() != Verdict::fail);
    CHECK(named(doc).empty());
  }
}

TEST_CASE("planted real bugs are explained by no declaration, and their captions say so") {
  using support::Bug;
  // No rescale, a dropped tail block, a misaligned mask and wrong scales: the real bugs, and four more; two on
  // bfloat16, whose runs are offered bfloat16 logits.
  const std::pair<Bug, Dtype> bugs[] = {
      {Bug::no_rescale, Dtype::f32},         {Bug::drop_last_partial_block, Dtype::f32},
      {Bug::causal_off_by_one, Dtype::f32},  {Bug::missing_scale, Dtype::f16},
      {Bug::scale_1_over_d, Dtype::f32},     {Bug::no_max_subtraction, Dtype::f32},
      {Bug::gqa_head_mod, Dtype::f16},       {Bug::ds_without_d_term, Dtype::f32},
      {Bug::missing_scale, Dtype::bf16},     {Bug::causal_off_by_one, Dtype::bf16},
  };
  for (const auto &[bug, dt] : bugs) {
    const Document doc = checked_under_defaults(support::variant_kernel(support::bug_variant(bug)), dt);
    INFO(support::bug_name(bug) << " " << dtype_name(dt) << "\n" << to_text(doc));
    REQUIRE(doc.verdict() == Verdict::fail);
    CHECK(named(doc).empty());
    for (const FailureGroup &g : group_failures(doc))
      if (!g.warning) CHECK(g.caption.find("no declaration explains it") != std::string::npos);
  }
}

TEST_CASE("a kernel of two conventions at once is explained by the pair of declarations") {
  // Rows that see no key get the mean of v, and the logits are float16: the fresh cases of either declaration alone
  // fail for the other's reason, so no single one explains; the pair does. The properties that judge elements
  // against the bound (an aggregate such as gradient_nonvanishing's norm ratio uses too little of float16's bound to
  // be fitted by it, and float16 logits that overflow leave a case undecided under either contract).
  Variant v = convention("empty-rows=unspecified");
  v.accumulate_qk = Dtype::f16;
  const std::string pair = "empty-rows=unspecified accumulate-qk=f16";
  REQUIRE(support::contract_of(v) == parse_contract(pair));
  CheckOptions o;
  o.cases = kCases;
  o.properties = {"accuracy", "lse", "causal", "empty_rows", "gradient_accuracy", "convex_hull"};
  Document doc;
  doc.runs.push_back({{KernelSource::Kind::builtin, ""}, "quick", check(support::variant_kernel(v), o)});
  INFO(v.name() << "\n" << to_text(doc));
  REQUIRE(doc.verdict() == Verdict::fail);
  const std::set<std::string> singles{"empty-rows=unspecified", "accumulate-qk=f16"};
  bool by_pair = false;
  for (const FailureGroup &g : group_failures(doc)) {
    if (g.warning) continue;
    INFO(g.caption);
    CHECK(g.caption.find("no declaration explains it") == std::string::npos);
    for (const Explanation &e : g.explained) {
      CHECK((e.declaration == pair || singles.count(e.declaration) == 1));
      by_pair |= e.declaration == pair;
    }
  }
  CHECK(by_pair);
  // Under the pair, the kernel passes.
  o.contract = parse_contract(pair);
  const RunReport r = check(support::variant_kernel(v), o);
  INFO(r.text());
  CHECK(r.verdict() != Verdict::fail);
}
