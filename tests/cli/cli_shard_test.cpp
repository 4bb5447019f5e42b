// Campaigns beyond one machine: `check --shard I/N` and `merge` give the unsharded report.json byte for byte, for a
// passing and a failing kernel, whether the shard comes from the flag or from a runner's environment; every way a
// set of partial reports can be wrong is one clear error.
#include "cli_support.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace cli_test;

namespace {

constexpr int kExitPass = 0, kExitCounterexample = 1;
/// Two dtypes and seven properties: 14 items, so that 3 and 7 shards cut runs in the middle. A budget that never
/// binds: with a binding one, what a property gets done depends on the time it is given. 15 cases: a pass needs 10
/// decided, so a few float16 cases the model cannot bound (an infinite bound near 65504) leave the verdict a pass.
constexpr const char *kCampaign =
    " --dtype f32 --dtype f16 --properties accuracy,lse,sum_to_one,causal,shift_invariance,variance_normalization,"
    "input_integrity --cases 15 --seed 5 --time-budget 600 --quiet";

std::string campaign(const std::string &kernel) {
  return attncheck("check --plugin " BUG_PLUGIN " --kernel " + kernel + kCampaign);
}

/// Runs the campaign on `kernel` unsharded and as 1, 3 and 7 shards merged: the merged report.json, summary.md and
/// exit code are the unsharded run's.
void check_merges(const std::string &kernel, int expected_status) {
  for (int n : {1, 3, 7}) {
    TempDir dir;
    INFO(n << " shards");
    const Run whole = run(campaign(kernel) + " --report-dir " + dir / "whole");
    REQUIRE(whole.status == expected_status);
    std::string parts;
    for (int i = 1; i <= n; ++i) {
      const std::string part = dir / ("shard" + std::to_string(i));
      const Run r = run(campaign(kernel) + " --shard " + std::to_string(i) + "/" + std::to_string(n) +
                        " --report-dir " + part);
      INFO(r.err);
      REQUIRE((r.status == kExitPass || r.status == kExitCounterexample));
      parts += " " + part;
    }
    const Run merged = run(attncheck("merge" + parts + " --report-dir " + dir / "merged" + " --quiet"));
    INFO(merged.err);
    CHECK(merged.status == expected_status);
    const std::string json = report_content(dir / "whole/report.json");
    REQUIRE(!json.empty());
    if (expected_status == kExitCounterexample) REQUIRE(json.find("\"counterexample\"") != std::string::npos);
    CHECK(report_content(dir / "merged/report.json") == json);
    CHECK(slurp(dir / "merged/summary.md") == slurp(dir / "whole/summary.md"));
  }
}

}  // namespace

TEST_CASE("1 3 and 7 shards of a passing kernel merge into the unsharded report.json byte for byte") {
  check_merges("online_b1_f32acc", kExitPass);
}

TEST_CASE("1 3 and 7 shards of a failing kernel merge into the unsharded report.json with its counterexamples") {
  check_merges("bug:missing_scale", kExitCounterexample);
}

TEST_CASE("a shard's partial report holds only its items and says which shard it is") {
  TempDir dir;
  REQUIRE(run(campaign("online_b1_f32acc") + " --shard 2/7 --report-dir " + dir / "s").status == kExitPass);
  const std::string part = slurp(dir / "s/report.json");
  CHECK(part.find("\"shard\": {\n    \"index\": 2,\n    \"count\": 7") != std::string::npos);
  // Items 1 and 8 of 14 (0-based): lse of the f32 run and lse of the f16 run.
  CHECK(part.find("\"id\": \"lse\"") != std::string::npos);
  CHECK(part.find("\"id\": \"accuracy\"") == std::string::npos);
}

TEST_CASE("the shard comes from the runner's environment when --shard is not given") {
  TempDir dir;
  REQUIRE(run(campaign("online_b1_f32acc") + " --shard 3/4 --report-dir " + dir / "flag").status == kExitPass);
  const std::string flag = report_content(dir / "flag/report.json");
  const std::vector<std::string> environments = {
      "ATTNCHECK_SHARD=3/4",                                                   // a CI matrix
      "TEST_SHARD_INDEX=2 TEST_TOTAL_SHARDS=4",                                // Bazel, GTest
      "SLURM_ARRAY_TASK_ID=12 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_COUNT=4",  // a Slurm array
      "SLURM_ARRAY_TASK_ID=14 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=4",
      "JOB_COMPLETION_INDEX=2 ATTNCHECK_SHARD_COUNT=4",                        // a Kubernetes Indexed Job
  };
  for (const std::string &env : environments) {
    INFO(env);
    const std::string out = dir / "env";
    const Run r = run("env " + env + " " + campaign("online_b1_f32acc") + " --report-dir " + out);
    REQUIRE(r.status == kExitPass);
    CHECK(report_content(out + "/report.json") == flag);
  }
  // Bazel's protocol: a test that shards touches TEST_SHARD_STATUS_FILE.
  const Run bazel = run("env TEST_SHARD_INDEX=0 TEST_TOTAL_SHARDS=2 TEST_SHARD_STATUS_FILE=" + dir / "status " +
                        campaign("online_b1_f32acc") + " --report-dir " + dir / "b");
  REQUIRE(bazel.status == kExitPass);
  CHECK(std::filesystem::exists(dir / "status"));
}

TEST_CASE("a shard without items passes and merges") {
  TempDir dir;
  const std::string one = attncheck("check --plugin " BUG_PLUGIN
                                    " --kernel online_b1_f32acc --dtype f32 --properties accuracy --cases 5 --quiet");
  REQUIRE(run(one + " --report-dir " + dir / "whole").status == kExitPass);
  REQUIRE(run(one + " --shard 1/2 --report-dir " + dir / "a").status == kExitPass);
  REQUIRE(run(one + " --shard 2/2 --report-dir " + dir / "b").status == kExitPass);
  REQUIRE(run(attncheck("merge " + dir / "a" + " " + dir / "b" + " --report-dir " + dir / "m --quiet")).status ==
          kExitPass);
  CHECK(report_content(dir / "m/report.json") == report_content(dir / "whole/report.json"));
}

TEST_CASE("bad shards and bad sets of partial reports are one clear error each") {
  TempDir dir;
  const std::string base = campaign("online_b1_f32acc");
  require_usage_error(run(base + " --shard 0/3 --report-dir " + dir / "x"), "is not a shard");
  require_usage_error(run(base + " --shard 4/3 --report-dir " + dir / "x"), "is not a shard");
  require_usage_error(run(base + " --shard two --report-dir " + dir / "x"), "is not a shard");
  require_usage_error(run(base + " --shard 1/3"), "give --report-dir");
  require_usage_error(run("env ATTNCHECK_SHARD=5/3 " + base + " --report-dir " + dir / "x"), "ATTNCHECK_SHARD");
  require_usage_error(run("env TEST_SHARD_INDEX=3 TEST_TOTAL_SHARDS=3 " + base + " --report-dir " + dir / "x"),
                      "do not name a shard");

  for (const char *i : {"1", "2", "3"})
    REQUIRE(run(base + " --shard " + i + "/3 --report-dir " + dir / (std::string("s") + i)).status == kExitPass);
  REQUIRE(run(base + " --report-dir " + dir / "whole").status == kExitPass);
  REQUIRE(run(attncheck("check --plugin " BUG_PLUGIN " --kernel online_b1_f32acc --dtype f32 --properties lse "
                        "--cases 5 --quiet --shard 3/3 --report-dir " + dir / "other")).status == kExitPass);
  const std::string out = " --report-dir " + dir / "m";
  require_usage_error(run(attncheck("merge " + dir / "s1" + " " + dir / "s2" + out)), "shard 3/3 is missing");
  require_usage_error(run(attncheck("merge " + dir / "s1" + " " + dir / "s1" + " " + dir / "s3" + out)),
                      "shard 1/3 is given twice");
  require_usage_error(run(attncheck("merge " + dir / "s1" + " " + dir / "s2" + " " + dir / "other" + out)),
                      "another check");
  require_usage_error(run(attncheck("merge " + dir / "s1" + " " + dir / "whole" + out)),
                      "not a shard's partial report");
  require_usage_error(run(attncheck("merge " + dir / "nowhere" + out)), "cannot read");
}
