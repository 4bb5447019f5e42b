// `attncheck check --shapes`: declared production shapes — a preset by name, or a JSON file of presets and shapes —
// run through the properties that can take them; report.json, summary.md and the terminal say how each went; shards
// merge into the unsharded report with them, and the same seed gives the same report with 1 job or 2; `list --shapes`
// shows the presets with their sources; every malformed shape is one line and exit 2.
#include "cli_support.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

using namespace cli_test;

namespace {

constexpr int kExitPass = 0;
/// Two shapes the search never draws: a GQA decode row past 4,096 keys, and a windowed prefill of 80 rows.
constexpr const char *kShapes = R"([
  {"name": "long decode", "B": 1, "Hq": 8, "Hkv": 2, "Lq": 1, "Lk": 4133, "D": 64},
  {"name": "local prefill", "B": 2, "Hq": 6, "Hkv": 3, "Lq": 80, "Lk": 80, "D": 40, "causal": true,
   "window": [31, 0]}
])";
/// A short check of two properties the shapes go through, and one (causal, judged by MPFR alone) they do not.
constexpr const char *kPlan = " --dtype f32 --properties accuracy,lse,causal --cases 15 --seed 3 --time-budget 600";

std::string shapes_file(const TempDir &dir) {
  std::ofstream(dir / "shapes.json") << kShapes;
  return dir / "shapes.json";
}

std::string check_features_correct(const std::string &extra) {
  return attncheck("check --plugin " BUG_PLUGIN " --kernel features_correct" + std::string(kPlan) + extra);
}

}  // namespace

TEST_CASE("check --shapes FILE runs each declared shape through the properties that take it, and reports it") {
  TempDir dir;
  const Run r = run(check_features_correct(" --shapes " + shapes_file(dir) + " --report-dir " + dir / "out"));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitPass);
  CHECK(r.out.find("declared shape of features_correct f32: long decode: B=1 Hq=8 Hkv=2 Lq=1 Lk=4133 D=64 Dv=64: 2 "
                   "passed") != std::string::npos);
  CHECK(r.out.find("local prefill: B=2 Hq=6 Hkv=3 Lq=80 Lk=80 D=40 Dv=40 causal window=31,0: 2 passed") !=
        std::string::npos);
  CHECK(r.out.find("not taken: 1") != std::string::npos);  // causal: MPFR alone
  const std::string json = slurp(dir / "out/report.json");
  CHECK(json.find("\"shapes\": [") != std::string::npos);
  CHECK(json.find("judged by MPFR alone") != std::string::npos);
  CHECK(slurp(dir / "out/summary.md").find("**Declared shapes**") != std::string::npos);
  CHECK(slurp(dir / "out/report.html").find("Declared shapes:") != std::string::npos);
}

TEST_CASE("check --shapes gives the same report with 1 job or 2, and 3 shards merge into it") {
  TempDir dir;
  const std::string shapes = " --shapes " + shapes_file(dir) + " --quiet";
  REQUIRE(run(check_features_correct(shapes + " --jobs 1 --report-dir " + dir / "one")).status == kExitPass);
  REQUIRE(run(check_features_correct(shapes + " --jobs 2 --report-dir " + dir / "two")).status == kExitPass);
  const std::string one = report_content(dir / "one/report.json");
  CHECK(report_content(dir / "two/report.json") == one);
  std::string parts;
  for (int i = 1; i <= 3; ++i) {
    const std::string part = dir / ("shard" + std::to_string(i));
    REQUIRE(run(check_features_correct(shapes + " --shard " + std::to_string(i) + "/3 --report-dir " + part)).status ==
            kExitPass);
    parts += " " + part + "/report.json";
  }
  const Run merged = run(attncheck("merge" + parts + " --report-dir " + dir / "merged --quiet"));
  INFO(merged.err);
  REQUIRE(merged.status == kExitPass);
  CHECK(report_content(dir / "merged/report.json") == one);
}

TEST_CASE("attncheck list --shapes shows every preset with its source and shapes") {
  const Run r = run(attncheck("list --shapes"));
  REQUIRE(r.status == kExitPass);
  for (const char *preset : {"llama-3-8b", "llama-3-70b", "qwen3-14b", "gemma-3-27b", "mistral-7b", "deepseek-v3"})
    CHECK(r.out.find(std::string(preset) + "\n  source: ") != std::string::npos);
  CHECK(r.out.find("gemma-3-1b local prefill: B=1 Hq=4 Hkv=1 Lq=768 Lk=768 D=256 Dv=256 causal window=511,0") !=
        std::string::npos);
  CHECK(r.out.find("deepseek-v3 absorbed decode: B=1 Hq=128 Hkv=1 Lq=1 Lk=8191 D=576 Dv=512") != std::string::npos);
}

TEST_CASE("check --shapes: a preset it does not know, a file that is not one, and each malformed shape is one line") {
  TempDir dir;
  const auto with = [&](const std::string &arg) { return run(check_features_correct(" --quiet --shapes '" + arg + "'")); };
  require_usage_error(with("llama-9b"), "--shapes: 'llama-9b' is neither a preset (llama-3-8b");
  require_usage_error(with("["), "--shapes: not JSON");
  require_usage_error(with("[]"), "--shapes: no shapes");
  require_usage_error(with(R"([{"Hq": 8, "Lq": 1, "Lk": 4}])"), "shapes[0]: \"D\" is missing");
  require_usage_error(with(R"([{"Hq": 8, "Lq": 0, "Lk": 4, "D": 8}])"), "shapes[0]: \"Lq\" must be an integer ≥ 1");
  require_usage_error(with(R"([{"Hq": 8, "Hkv": 3, "Lq": 1, "Lk": 4, "D": 8}])"),
                      "Hq = 8 is not a multiple of Hkv = 3");
  require_usage_error(with(R"(["llama-3-8b", {"Hq": 8, "Lq": 1, "Lk": 4, "D": 8, "windo": [1, 0]}])"),
                      "shapes[1]: unknown key \"windo\"");
  require_usage_error(with(R"([{"Hq": 8, "Lq": 1, "Lk": 4, "D": 8, "window": [1]}])"),
                      "\"window\" must be [left, right]");
  require_usage_error(with(R"([{"Hq": 8, "Lq": 1, "Lk": 4, "D": 8, "softcap": -1}])"),
                      "\"softcap\" must be a number > 0");
  std::ofstream(dir / "bad.json") << R"({"shapes": [{"Hq": "8"}]})";
  require_usage_error(with(dir / "bad.json"), dir / "bad.json" + ": shapes[0]: \"Hq\" must be an integer");
}
