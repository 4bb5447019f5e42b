// Zero false alarms on the kernels people ship: a correct kernel of every legitimate kind (tests/support's
// contract_variants) passes every property under the default profile when it declares its contract, and under the
// defaults where they cover it; behaviour beyond its contract is a warning with a counterexample, never a failure.
#include "attncheck/check.h"
#include "property_support.h"

#include <catch2/catch.hpp>

#include <set>
#include <type_traits>
#include <vector>
#include <string>

using namespace attncheck;
using namespace attncheck::test;
using support::Variant;

namespace {
/// The contract variant with the one option `pick` (a field of contract_variants()'s Variants) set.
Variant variant_with(bool Variant::*pick) {
  for (const Variant &v : support::contract_variants())
    if (v.*pick) return v;
  FAIL("no contract variant sets the option");
  return {};
}
Variant variant_with_qk_f16() {
  for (const Variant &v : support::contract_variants())
    if (v.accumulate_qk == Dtype::f16) return v;
  FAIL("no contract variant accumulates q·k in float16");
  return {};
}

/// long_rows runs these cases (two of them at the regimes' maxima): a scalar variant kernel takes seconds on a
/// 65,536-key row, so the default profile's 100 would dominate the suite.
constexpr int kLongRowsCases = 16;

/// Every property, the default profile's 100 cases (long_rows kLongRowsCases): no failure, and exactly the
/// warnings `warnings`.
void passes(const Variant &v, const KernelContract &contract, Dtype dt, const std::set<std::string> &warnings = {}) {
  CheckOptions o = options(dt);
  o.contract = contract;
  for (const PropertyDef *d : all_properties())
    if (d->id != "long_rows") o.properties.emplace_back(d->id);
  CheckOptions long_rows = o;
  long_rows.properties = {"long_rows"};
  long_rows.cases = long_rows.min_cases = kLongRowsCases;
  std::set<std::string> warned;
  for (const RunReport &r : {check(support::variant_kernel(v), o), check(support::variant_kernel(v), long_rows)}) {
    INFO(v.name() << " under " << contract.describe_changes() << "\n" << r.text());
    for (const PropertyReport &p : r.properties) {
      CHECK(p.verdict != Verdict::fail);
      if (p.verdict == Verdict::warn) warned.insert(p.id);
    }
    CHECK(r.verdict() != Verdict::fail);
  }
  CHECK(warned == warnings);
}
}  // namespace

TEST_CASE("contracts: logits accumulated in float16 pass when declared accumulate-qk=f16, warning where q·k overflows") {
  // ±65504 entries overflow a float16 q·k: the error model cannot bound those rows (undecided), and the NaN the
  // kernel returns there is nonfinite_output's warning.
  const Variant v = variant_with_qk_f16();
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) passes(v, support::contract_of(v), dt, {"nonfinite_output"});
}

TEST_CASE("contracts: float32 products of TF32, bfloat16 or float16 operands pass when declared fp32-precision=…, "
          "and fail the defaults") {
  for (const Variant &v : support::fp32_precision_variants()) {
    passes(v, support::contract_of(v), Dtype::f32);
    CheckOptions o = options(Dtype::f32);
    o.properties = {"accuracy"};
    INFO(v.name());
    CHECK(check(support::variant_kernel(v), o).verdict() == Verdict::fail);
  }
}

TEST_CASE("contracts: a row sum of the rounded P passes when declared rowsum=rounded-p") {
  const Variant v = variant_with(&Variant::rowsum_rounded_p);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) passes(v, support::contract_of(v), dt);
}

TEST_CASE("contracts: GQA gradients stored per query head pass under the defaults") {
  const Variant v = variant_with(&Variant::grad_per_head);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) passes(v, KernelContract{}, dt);
}

TEST_CASE("contracts: an LSE in the storage dtype passes when declared lse=storage") {
  const Variant v = variant_with(&Variant::lse_storage);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) passes(v, support::contract_of(v), dt);
}

TEST_CASE("contracts: a kernel without an LSE passes when declared lse=none") {
  passes(support::contract_variants().front(), parse_contract("lse=none accumulate-qk=f16"), Dtype::f32,
         {"nonfinite_output"});
}

TEST_CASE("contracts: a top-left causal kernel passes when declared causal=top-left") {
  passes(variant_with(&Variant::causal_top_left), parse_contract("causal=top-left"), Dtype::f32);
}

TEST_CASE("contracts: a dense P·V passes under the defaults and warns that masked NaN leaks") {
  const Variant v = variant_with(&Variant::dense_pv);
  passes(v, KernelContract{}, Dtype::f32, {"masked_nonfinite"});
  // Declaring isolation it does not provide turns the leak into a failure.
  CheckOptions o = declaring("hidden-keys=any");
  o.properties = {"masked_nonfinite"};
  CHECK(check(support::variant_kernel(v), o).verdict() == Verdict::fail);
}

TEST_CASE("contracts: rows that see no key left unspecified pass when declared empty-rows=unspecified") {
  const Variant v = variant_with(&Variant::empty_rows_mean);
  passes(v, support::contract_of(v), Dtype::f32);
  CheckOptions o = options();
  o.properties = {"empty_rows"};
  CHECK(check(support::variant_kernel(v), o).verdict() == Verdict::fail);  // the default fixes O = 0
}

TEST_CASE("contracts: an atomically accumulating backward passes under the defaults and warns about its bits") {
  const Variant v = variant_with(&Variant::nondeterministic_backward);
  passes(v, KernelContract{}, Dtype::f32, {"bitwise_determinism"});
  CheckOptions o = declaring("backward-determinism=bitwise");
  o.properties = {"determinism"};
  CHECK(check(support::variant_kernel(v), o).verdict() == Verdict::fail);
}

TEST_CASE("contracts: float16 arithmetic declared as such warns where an intermediate overflows to NaN") {
  Variant v;
  v.accumulate = Dtype::f16;
  CheckOptions o = declaring("accumulate=f16", Dtype::f16);
  o.properties = {"nonfinite_output"};
  const RunReport r = check(support::variant_kernel(v), o);
  INFO(r.text());
  CHECK(r.verdict() == Verdict::warn);
  CHECK(r.verdict(/*strict=*/true) == Verdict::fail);
  REQUIRE(counterexample(r, "nonfinite_output"));
}

namespace {
/// The approximation variant (support::approximation_variants) whose tanh or exp is `pick`.
template <class E>
Variant approximating(E pick) {
  for (const Variant &v : support::approximation_variants()) {
    if constexpr (std::is_same_v<E, Tanh>) {
      if (v.tanh == pick) return v;
    } else {
      if (v.exp == pick) return v;
    }
  }
  FAIL("no approximation variant uses it");
  return {};
}

/// The declarations that explain `id`'s counterexample in `r`, as contract text.
std::vector<std::string> explanations(const RunReport &r, std::string_view id) {
  std::vector<std::string> out;
  if (const Counterexample *c = counterexample(r, id))
    for (const Explanation &e : c->explained_by) out.push_back(e.declaration);
  return out;
}
}  // namespace

TEST_CASE("contracts: softcap through tanh.approx.f32 fails under the defaults, explained by tanh=approx, and passes "
          "every property when it declares it") {
  const Variant v = approximating(Tanh::approx);
  KernelContract undeclared = support::contract_of(v);
  undeclared.tanh = Tanh::accurate;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    CheckOptions o = options(dt);
    o.contract = undeclared;
    o.properties = {"softcap"};
    const RunReport r = check(support::variant_kernel(v), o);
    INFO(r.text());
    CHECK(r.verdict() == Verdict::fail);
    // The narrowest first: looser declarations (a rounded row sum, a float16 q·k) may cover a small case too.
    const std::vector<std::string> declared = explanations(r, "softcap");
    REQUIRE_FALSE(declared.empty());
    CHECK(declared.front() == "tanh=approx");
    passes(v, support::contract_of(v), dt);
  }
}

TEST_CASE("contracts: float16 and bfloat16 tanh and exp instructions pass every property when declared") {
  for (const Variant &v : {approximating(Tanh::approx_f16), approximating(Tanh::approx_bf16),
                           approximating(Exp::approx_f16), approximating(Exp::approx_bf16)})
    passes(v, support::contract_of(v), Dtype::bf16);
  // ex2.approx.f32 is within the default budget: declared or not, the same bound.
  const Variant f32_exp = approximating(Exp::approx);
  KernelContract undeclared = support::contract_of(f32_exp);
  undeclared.exp = Exp::accurate;
  passes(f32_exp, undeclared, Dtype::f32);
}

TEST_CASE("contracts: an undeclared float16 exp fails, and no declaration is offered for it") {
  const Variant v = approximating(Exp::approx_f16);
  KernelContract undeclared = support::contract_of(v);
  undeclared.exp = Exp::accurate;
  CheckOptions o = options(Dtype::f16);
  o.contract = undeclared;
  o.properties = {"accuracy"};
  const RunReport r = check(support::variant_kernel(v), o);
  INFO(r.text());
  CHECK(r.verdict() == Verdict::fail);
  CHECK(explanations(r, "accuracy").empty());  // only narrow declarations explain: a loose exp would excuse bugs
}

TEST_CASE("contracts: softcap on the unscaled logit or without its derivative is caught under tanh=approx, and no "
          "declaration explains it") {
  for (support::Bug b : support::softcap_bugs()) {
    const Variant v = support::bug_variant(b);
    REQUIRE(support::contract_of(v).tanh == Tanh::approx);
    for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
      CheckOptions o = options(dt);
      o.contract = support::contract_of(v);
      o.properties = {"softcap"};
      const RunReport r = check(support::variant_kernel(v), o);
      INFO(support::bug_name(b) << " " << dtype_name(dt) << "\n" << r.text());
      CHECK(r.verdict() == Verdict::fail);
      CHECK(explanations(r, "softcap").empty());
    }
  }
}
