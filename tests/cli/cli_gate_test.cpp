// The attncheck gate end to end, on plugins loaded like any third-party one: planted bugs give exit 1 with reports
// that replay; correct kernels exit 0; declined cases exit 3; bad input exits 2 with one line on stderr; and
// kernels that crash, hang, scribble or allocate without bound are counterexamples, not a crashed CLI.
#include "cli_support.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

using namespace cli_test;

namespace {

constexpr int kExitPass = 0, kExitCounterexample = 1, kExitInconclusive = 3;
constexpr const char *kMissingScale = "bug:missing_scale";
constexpr const char *kCorrect = "online_b1_f32acc";                         // the bug plugin's correct kernels
constexpr const char *kFlashLike = "online_b64_exp2_roundp_recip_f32acc";
constexpr const char *kQuick = " --dtype f32 --profile quick --quiet";     // every gate run: seconds at most
constexpr const char *kCallTimeout = " --timeout 1";                        // seconds before a call is a hang

void write_file(const std::string &path, const std::string &text) { std::ofstream(path, std::ios::binary) << text; }

/// `check` of one bug-plugin kernel on `properties`, quick profile, float32.
std::string bug_check(const std::string &kernel, const std::string &properties, const std::string &extra = "") {
  return attncheck("check --plugin " BUG_PLUGIN " --kernel " + kernel + " --properties " + properties + kQuick +
                   extra);
}

/// `check` of one misbehaving-plugin kernel on `properties` with a one-second call timeout.
std::string misbehaving_check(const std::string &kernel, const std::string &properties) {
  return attncheck("check --plugin " MISBEHAVING_PLUGIN " --kernel " + kernel + " --properties " + properties +
                   kQuick + kCallTimeout);
}

/// The failing step the check's table prints for its first counterexample ("(step sums, found after ...").
std::string failing_step(const std::string &check_stdout) {
  std::smatch m;
  REQUIRE(std::regex_search(check_stdout, m, std::regex(R"(\(step (\w+), found after)")));
  return m[1];
}

/// A missing-scale counterexample's report.json, written into `dir`.
std::string missing_scale_report(const TempDir &dir) {
  const Run r = run(bug_check(kMissingScale, "accuracy", " --report-dir " + dir.path.string()));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitCounterexample);
  return dir / "report.json";
}

/// Exit 1 — a counterexample, not a crash of the CLI — whose output contains `needle`.
void require_counterexample(const Run &r, const std::string &needle) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.status == kExitCounterexample);
  REQUIRE(r.out.find(needle) != std::string::npos);
}

}  // namespace

// ---- planted bugs through a plugin: exit 1, reports, replay, determinism, JUnit ----

TEST_CASE("a missing scale exits 1 and writes report.json, summary.md and report.html naming the property",
          "[cli][gate]") {
  const TempDir dir;
  missing_scale_report(dir);
  for (const char *file : {"report.json", "summary.md", "report.html"})
    CHECK(std::filesystem::file_size(dir / file) > 0);
  CHECK(slurp(dir / "summary.md").find("accuracy") != std::string::npos);
}

TEST_CASE("replaying a missing scale's report exits 1 at the failing step the check found", "[cli][gate]") {
  const TempDir dir;
  const Run check = run(bug_check(kMissingScale, "accuracy", " --report-dir " + dir.path.string()));
  REQUIRE(check.status == kExitCounterexample);
  const std::string step = failing_step(check.out);
  const Run replay = run(attncheck("replay " + (dir / "report.json")));
  INFO(replay.out << replay.err);
  REQUIRE(replay.status == kExitCounterexample);
  CHECK(replay.out.find("recorded: FAIL at step " + step) != std::string::npos);
  CHECK(replay.out.find("replayed: FAIL at step " + step) != std::string::npos);
}

TEST_CASE("the same seed twice gives a byte-identical report.json", "[cli][gate]") {
  const TempDir first, second;
  const std::string seed = " --seed 7";
  REQUIRE(run(bug_check(kMissingScale, "accuracy,lse", seed + " --report-dir " + first.path.string())).status ==
          kExitCounterexample);
  REQUIRE(run(bug_check(kMissingScale, "accuracy,lse", seed + " --report-dir " + second.path.string())).status ==
          kExitCounterexample);
  const std::string a = report_content(first / "report.json");
  CHECK(!a.empty());
  CHECK(a == report_content(second / "report.json"));
}

TEST_CASE("check with --junit writes JUnit XML with a failure for a missing scale", "[cli][gate]") {
  const TempDir dir;
  const std::string junit = dir / "junit.xml";
  REQUIRE(run(bug_check(kMissingScale, "accuracy", " --junit " + junit)).status == kExitCounterexample);
  const std::string xml = slurp(junit);
  CHECK(xml.rfind("<?xml", 0) == 0);
  CHECK(xml.find("<testsuite") != std::string::npos);
  CHECK(xml.find("<failure") != std::string::npos);
  CHECK(xml.find("accuracy") != std::string::npos);
}

TEST_CASE("correct plugin kernels exit 0 on accuracy, causal and sum_to_one", "[cli][gate]") {
  for (const char *kernel : {kCorrect, kFlashLike}) {
    const Run r = run(bug_check(kernel, "accuracy,causal,sum_to_one"));
    INFO(kernel << "\n" << r.out << r.err);
    CHECK(r.status == kExitPass);
  }
}

TEST_CASE("a kernel that declines every case is inconclusive: naive made to take float16 exits 3", "[cli][gate]") {
  // naive declares dtypes=f32; the override sends it float16 cases, which it declines one by one.
  const Run r = run(attncheck(
      "check --plugin builtin --kernel naive --dtype f16 --profile quick --quiet --contract dtypes=f32+f16+bf16"));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitInconclusive);
  // One line for the dtype, not one per property.
  CHECK_THAT(r.out, Catch::Contains("naive") && Catch::Contains("every property unsupported (a kernel without f16 "
                                                                 "declares dtypes= without it)"));
  CHECK(r.out.find(" accuracy ") == std::string::npos);
}

TEST_CASE("a dtype the kernel's contract does not declare is off: nothing is called, one line says why, exit 3",
          "[cli][gate]") {
  const Run r = run(attncheck("check --plugin builtin --kernel naive --dtype f16 --profile quick --jobs 2"));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitInconclusive);
  CHECK_THAT(r.out, Catch::Contains("off: the kernel's contract declares dtypes=f32, nothing was called"));
  CHECK_THAT(r.err, Catch::Contains("naive f16: off — the kernel's contract declares dtypes=f32"));
  CHECK(r.out.find(" accuracy ") == std::string::npos);
  CHECK(r.out.find("time of naive f16") == std::string::npos);
}

TEST_CASE("a run of a declared dtype beside an undeclared one passes: the off run does not make the gate inconclusive",
          "[cli][gate]") {
  const Run r = run(attncheck("check --plugin builtin --kernel naive --dtype f32 --dtype bf16 --profile quick "
                              "--properties accuracy,causal --quiet"));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  CHECK_THAT(r.out, Catch::Contains("naive          bf16  (2 properties)             off"));
}

// ---- bad input: exit 2 and one line on stderr ----

TEST_CASE("an unknown property id is a usage error naming it", "[cli][gate]") {
  require_usage_error(run(bug_check(kMissingScale, "accuracy,no_such_property")), "no_such_property");
}

TEST_CASE("giving --plugin and --exec together is a usage error", "[cli][gate]") {
  require_usage_error(run(attncheck("check --plugin " BUG_PLUGIN " --exec true")), "--exec");
}

TEST_CASE("replaying a missing file is a usage error naming it", "[cli][gate]") {
  require_usage_error(run(attncheck("replay /no/such/report.json")), "/no/such/report.json");
}

TEST_CASE("replaying malformed JSON is a usage error", "[cli][gate]") {
  const TempDir dir;
  write_file(dir / "bad.json", "{ not json");
  require_usage_error(run(attncheck("replay " + (dir / "bad.json"))), "malformed JSON");
}

TEST_CASE("replaying a truncated report.json is a usage error", "[cli][gate]") {
  const TempDir dir;
  const std::string report = slurp(missing_scale_report(dir));
  write_file(dir / "cut.json", report.substr(0, report.size() / 2));
  require_usage_error(run(attncheck("replay " + (dir / "cut.json"))), "truncated");
}

TEST_CASE("replaying JSON that is not an attncheck report is a usage error", "[cli][gate]") {
  const TempDir dir;
  write_file(dir / "foreign.json", R"({"a":1})");
  require_usage_error(run(attncheck("replay " + (dir / "foreign.json"))), "not an attncheck report");
}

TEST_CASE("replaying a counterexample the report does not have is a usage error", "[cli][gate]") {
  const TempDir dir;
  require_usage_error(run(attncheck("replay " + missing_scale_report(dir) + " --failure 99")), "out of range");
}

TEST_CASE("an exec command that does not start is a usage error", "[cli][gate]") {
  require_usage_error(run(attncheck("check --exec no-such-command-xyz --properties accuracy" + std::string(kQuick))),
                      "no-such-command-xyz");
}

TEST_CASE("an exec command that breaks the protocol is a usage error", "[cli][gate]") {
  require_usage_error(run(attncheck("check --exec 'echo hello' --properties accuracy" + std::string(kQuick))),
                      "attncheck-exec");
}

TEST_CASE("an unwritable report directory is a usage error naming it", "[cli][gate]") {
  require_usage_error(run(bug_check(kMissingScale, "accuracy", " --report-dir /proc/forbidden")), "/proc/forbidden");
}

// ---- misbehaving kernels: counterexamples, never a crashed CLI ----

TEST_CASE("a kernel that segfaults is a counterexample naming the signal", "[cli][gate]") {
  require_counterexample(run(misbehaving_check("segfault", "accuracy")), "SIGSEGV");
}

TEST_CASE("a kernel that hangs is a counterexample naming the timeout", "[cli][gate]") {
  require_counterexample(run(misbehaving_check("hang", "accuracy")), "did not return within 1000 ms");
}

TEST_CASE("a kernel that writes into an input is a counterexample naming the tensor", "[cli][gate]") {
  require_counterexample(run(misbehaving_check("write_input", "accuracy")), "end of k");
}

TEST_CASE("a kernel that allocates without bound is a counterexample naming the memory limit", "[cli][gate]") {
  require_counterexample(run(misbehaving_check("huge_alloc", "accuracy")), "memory limit");
}

TEST_CASE("a kernel that writes no output is a counterexample at the finite step", "[cli][gate]") {
  require_counterexample(run(misbehaving_check("no_write", "accuracy")), "(step finite,");
}

TEST_CASE("a nondeterministic kernel fails determinism", "[cli][gate]") {
  const Run r = run(misbehaving_check("nondeterministic", "determinism"));
  require_counterexample(r, "counterexample 1: determinism");
}

TEST_CASE("a kernel's daemon forging the reports is ended before the gate writes them", "[cli][gate]") {
  // forge_report leaves a process outside its process group that rewrites report.json, summary.md and junit.xml
  // every 2 ms for a minute, and fails. Serially and through --jobs workers, the reports are the gate's.
  const std::string jobs = GENERATE(as<std::string>{}, " --jobs 1", " --jobs 2");
  TempDir dir;
  const std::string reports = dir.path.string();
  const Run r = run("ATTNCHECK_TEST_FORGE_DIR=" + reports + " " + misbehaving_check("forge_report", "accuracy") +
                    " --report-dir " + reports + " --junit " + reports + "/junit.xml" + jobs);
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitCounterexample);
  std::ifstream pid_file(dir / "forger.pid");
  long forger = 0;
  pid_file >> forger;
  REQUIRE(forger > 0);  // it ran
  CHECK(kill(static_cast<pid_t>(forger), 0) != 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ten of its periods: it would have written again
  const std::string forged = "forged: every property passed\n";
  CHECK(slurp(dir / "report.json").find("\"verdict\": \"fail\"") != std::string::npos);
  CHECK(slurp(dir / "summary.md") != forged);
  CHECK(slurp(dir / "junit.xml").find("failures=\"1\"") != std::string::npos);
}

TEST_CASE("with --confine-writes a kernel cannot change the report directory and still writes elsewhere",
          "[cli][gate]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "r");
  std::filesystem::create_directories(dir.path / "elsewhere");
  auto touch = [&](const std::string &flag) {
    std::ofstream(dir / "r/report.json") << "{}";
    const Run r = run("ATTNCHECK_TEST_FORGE_DIR=" + dir / "r" + " " + misbehaving_check("touch_reports", "accuracy") +
                      " --report-dir " + dir / "r" + flag);
    INFO(r.out << r.err);
    REQUIRE(r.status == kExitCounterexample);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("touch_reports: (write=[a-z]+(?: [a-z]+=[a-z]+)*)")));
    return m[1].str();
  };
  CHECK(touch("") == "write=allowed create=allowed rename=allowed remove=allowed sibling=allowed tmpdir=allowed");
  const Run probe = run(attncheck("list"));
  if (probe.out.find("kernel processes: Landlock") == std::string::npos) {
    WARN("--confine-writes not checked here: " << probe.out.substr(probe.out.rfind("kernel processes:")));
    return;
  }
  CHECK(touch(" --confine-writes") == "write=denied create=denied rename=denied remove=denied sibling=allowed "
                                      "tmpdir=allowed");
  require_usage_error(run(misbehaving_check("touch_reports", "accuracy") + " --confine-writes"),
                      "--confine-writes keeps kernels out of the reports: give --report-dir or --junit");
}
