// gate::infer in process, on the variant kernels: where the search starts, what each check ran under, and the
// report it keeps (the CLI's end-to-end tests, tests/cli/cli_infer_test.cpp, cover the conventions and the bugs).
#include "attncheck/infer.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace attncheck {
namespace {

/// A quick plan of `properties` on `dt`, under a guard no check here reaches (verdicts must not depend on the load).
gate::InferRequest quick(std::vector<std::string> properties, Dtype dt) {
  gate::InferRequest rq;
  rq.check.properties = std::move(properties);
  rq.check.time_budget = 600;
  rq.dtypes = {dt};
  rq.quiet = true;
  return rq;
}

support::Variant convention(bool support::Variant::*option) {
  for (const support::Variant &v : support::contract_variants())
    if (v.*option) return v;
  FAIL("no contract variant has that option");
  return {};
}

}  // namespace

TEST_CASE("infer starts from the defaults, keeping what no check can find") {
  const KernelContract declared = parse_contract(
      "causal=top-left lse=none empty-rows=unspecified determinism=within-bound accumulate=f16 tanh=approx-f16 "
      "exp=approx-bf16 round-p=no features=window+softcap");
  const KernelContract start = gate::search_start(declared);
  CHECK(start.describe_changes() ==
        parse_contract("lse=none accumulate=f16 tanh=approx-f16 exp=approx-bf16 round-p=no features=window+softcap")
            .describe_changes());
  CHECK(gate::search_start(parse_contract("lse=storage accumulate-qk=f16")) == KernelContract{});
}

TEST_CASE("infer adopts the declaration a failure names, and keeps the report of the check it passed") {
  const support::Variant v = convention(&support::Variant::causal_top_left);
  gate::InferRequest rq = quick({"accuracy", "causal", "bitwise_determinism"}, Dtype::f32);
  const gate::InferResult r = gate::infer(support::variant_kernel(v), rq, {});
  INFO(gate::infer_text(r));
  REQUIRE(r.exit_code == gate::kExitPass);
  REQUIRE(r.rounds.size() >= 2);
  CHECK(r.rounds[0].contract == KernelContract{});
  CHECK(r.rounds[0].verdict == Verdict::fail);
  CHECK(r.rounds[0].adopted == std::optional<std::string>("causal=top-left"));
  CHECK(r.contract.causal == CausalAlign::top_left);
  // The report kept is the passing check's, under the contract found.
  REQUIRE(r.last.runs.size() == 1);
  CHECK(r.last.runs[0].report.contract == r.contract);
  CHECK(r.last.verdict() != Verdict::fail);
  // A deterministic backward: bitwise_determinism passed, and determinism=bitwise held when checked.
  CHECK(r.contract.backward_determinism == Determinism::bitwise);
  // The JSON carries the same.
  const nlohmann::json j = nlohmann::json::parse(gate::infer_json(r));
  CHECK(j["outcome"] == "found");
  CHECK(j["contract"] == r.contract.describe_changes());
  CHECK(j["rounds"][0]["adopted"] == "causal=top-left");
  CHECK(j["no_fit"].is_null());
}

TEST_CASE("infer finds the format a float32 kernel's products read: TF32, bfloat16, float16") {
  for (const support::Variant &v : support::fp32_precision_variants()) {
    const gate::InferResult r =
        gate::infer(support::variant_kernel(v), quick({"accuracy", "lse", "gradient_accuracy"}, Dtype::f32), {});
    INFO(v.name() << "\n" << gate::infer_text(r));
    CHECK(r.exit_code == gate::kExitPass);
    CHECK(r.contract.fp32_precision == v.fp32_precision);
    CHECK(r.contract.describe_changes().find(support::contract_of(v).describe_changes()) != std::string::npos);
  }
}

TEST_CASE("infer stops at a failure no declaration explains, naming it") {
  const attncheck_kernel &k = support::variant_kernel(support::bug_variant(support::Bug::no_rescale));
  const gate::InferResult r = gate::infer(k, quick({"accuracy", "sum_to_one"}, Dtype::f32), {});
  INFO(gate::infer_text(r));
  CHECK(r.exit_code == gate::kExitCounterexample);
  REQUIRE(r.no_fit);
  CHECK((r.no_fit->property == "accuracy" || r.no_fit->property == "sum_to_one"));
  CHECK(r.no_fit->caption.find("no declaration explains it") != std::string::npos);
  CHECK(r.rounds.size() == 1);
  CHECK(r.contract == KernelContract{});
}

}  // namespace attncheck
