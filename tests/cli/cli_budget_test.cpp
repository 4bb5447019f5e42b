// The budget is the budget: a check ends within its time budget plus one call timeout (and the confirmation of a
// shrunk hang), whatever the kernel does; a hang is a shrunk counterexample; SIGINT leaves reports that replay.
#include "cli_support.h"

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

using namespace cli_test;

namespace {
constexpr int kExitCounterexample = 1;

double seconds_of(const std::string &command, Run *out) {
  const auto t0 = std::chrono::steady_clock::now();
  *out = run(command);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST_CASE("a kernel that hangs on every call is one shrunk counterexample within budget plus two call timeouts") {
  // Budget 10 s, calls time out after 1 s, one job: the first hang (1 s), its shrinking under a shorter timeout,
  // one confirmation at the full timeout; every later case is at or above the hung shape and skipped.
  Run r;
  const double s = seconds_of(attncheck("check --plugin " MISBEHAVING_PLUGIN " --kernel hang --dtype f32 "
                                        "--profile quick --quiet --time-budget 10 --timeout 1 --jobs 1"),
                              &r);
  INFO(r.out << r.err << "\nseconds: " << s);
  CHECK(r.status == kExitCounterexample);
  CHECK(s < 10 + 2 * 1 + 5);  // + process start, the reference, report printing (ctest runs tests side by side)
  CHECK(r.out.find("B=1 Hq=1 Hkv=1 Lq=1 Lk=1 D=1 Dv=1") != std::string::npos);  // shrunk to the smallest case
  CHECK(r.out.find("did not return within 1000 ms") != std::string::npos);       // confirmed at the full timeout
}

TEST_CASE("SIGINT delivered twice at once by timeout still ends the check with its reports written") {
  // `timeout` signals the command and then its process group: one request, two signals.
  const std::string dir = "/tmp/attncheck-timeout-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const Run r = run("timeout -s INT 3 " + attncheck("check --plugin builtin --kernel flash --dtype f32 --cases 400 "
                                                   "--quiet --report-dir " + dir));
  INFO(r.out << r.err);
  CHECK(r.status == 124);  // timeout's own status: it did time the command out
  CHECK(std::filesystem::exists(dir + "/report.json"));
  CHECK(run("grep -c '\"interrupted\": true' " + dir + "/report.json").out != "0\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("SIGINT in the middle of a check leaves a report.json whose counterexamples replay") {
  const std::string dir = "/tmp/attncheck-sigint-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  // Every dtype, 400 cases per property: far longer than the 3 s before the signal.
  const std::string check = attncheck("check --plugin " BUG_PLUGIN " --kernel bug:no_rescale --cases 400 "
                                      "--quiet --report-dir " + dir);
  // Started in the background, interrupted after 3 s.
  const Run r = run("sh -c '" + check + " > /dev/null 2>&1 & pid=$!; sleep 3; kill -INT $pid; wait $pid; echo $?'");
  INFO(r.out << r.err);
  REQUIRE(std::filesystem::exists(dir + "/report.json"));
  const Run first = run(attncheck("replay " + dir + "/report.json --failure 1"));
  INFO(first.out << first.err);
  CHECK(first.status == kExitCounterexample);  // the bug is still there
  const Run json = run("grep -c '\"interrupted\": true' " + dir + "/report.json");
  CHECK(std::stoi(json.out) > 0);  // what did not finish says so
  std::filesystem::remove_all(dir);
}

TEST_CASE("two worker processes write the same report.json, summary.md and JUnit as one, byte for byte") {
  // A budget that never binds (a sanitizer build runs several times slower): what a binding one gets done depends
  // on the time each worker is given.
  const std::string base = "/tmp/attncheck-jobs-test-" + std::to_string(::getpid());
  std::string reports[2];
  for (int jobs : {1, 2}) {
    const std::string dir = base + "-" + std::to_string(jobs);
    std::filesystem::remove_all(dir);
    const Run r = run(attncheck("check --plugin " BUG_PLUGIN " --kernel bug:no_rescale --dtype f32 --dtype bf16 "
                                "--profile quick --time-budget 600 --quiet --jobs " + std::to_string(jobs) +
                                " --report-dir " + dir +
                                " --junit " + dir + "/junit.xml"));
    INFO(r.out << r.err);
    CHECK(r.status == kExitCounterexample);
    reports[jobs - 1] = report_content(dir + "/report.json");
    for (const char *file : {"/summary.md", "/junit.xml"}) reports[jobs - 1] += run("cat " + dir + file).out;
    std::filesystem::remove_all(dir);
  }
  CHECK(!reports[0].empty());
  CHECK(reports[0] == reports[1]);
}

TEST_CASE("a kernel that crashes at the memory limit on every call is one counterexample, later cases skipped") {
  const std::string dir = "/tmp/attncheck-memory-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const Run r = run(attncheck("check --plugin " MISBEHAVING_PLUGIN " --kernel huge_alloc --dtype f32 --profile quick "
                              "--quiet --jobs 1 --memory-limit 256 --report-dir " + dir));
  INFO(r.out << r.err);
  CHECK(r.status == kExitCounterexample);
  CHECK(r.out.find("counterexample 1:") != std::string::npos);
  CHECK(r.out.find("counterexample 2:") == std::string::npos);  // not one per property
  const Run skipped = run("grep -c 'skipped at or above a shape that hung, was too slow for its timeout or hit the "
                          "memory limit' " + dir +
                          "/report.json");
  CHECK(std::stoi(skipped.out) > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an exec kernel that dies on every call is one counterexample: once its restarts are spent, the rest is undecided") {
  if (std::string(NUMPY_PYTHON).empty()) {
    WARN("no python3 found by the exec tests (ATTNCHECK_NUMPY_PYTHON): not run");
    return;
  }
  const std::string dir = "/tmp/attncheck-restarts-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const Run r = run(attncheck("check --exec '" NUMPY_PYTHON " " EXEC_PEER " crash' --dtype f32 --profile quick "
                              "--quiet --jobs 1 --report-dir " + dir));
  INFO(r.out << r.err);
  CHECK(r.status == kExitCounterexample);
  CHECK(r.out.find("counterexample 2:") == std::string::npos);
  const Run gave_up = run("grep -c 'gave up on it (its restarts are spent)' " + dir + "/report.json");
  CHECK(std::stoi(gave_up.out) > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a --jobs worker skips cases at or above the hung shapes its item names, and reports them back") {
  // The parent hands on what any worker found to hang (cli/jobs.h); the all-ones shape: every case is at or above it.
  const auto end = std::chrono::duration_cast<std::chrono::milliseconds>(
                       (std::chrono::steady_clock::now() + std::chrono::minutes(5)).time_since_epoch())
                       .count();
  const Run r = run("printf 'item 0 0 f32 accuracy " + std::to_string(end) + " 1,1,1,1,1,1,1\\n' | " +
                    attncheck("check --plugin builtin --kernel flash --dtype f32 --quiet --worker"));
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  const std::string head = r.out.substr(0, r.out.find('\n'));
  CHECK(std::regex_match(head, std::regex("done 0 [0-9]+ 1,1,1,1,1,1,1")));
  CHECK(r.out.find("cases skipped at or above a shape that hung, was too slow for its timeout or hit the memory "
                   "limit (B=1 Hq=1 Hkv=1 Lq=1 Lk=1 D=1 Dv=1)") != std::string::npos);
  CHECK(r.out.find("\"verdict\": \"undecided\"") != std::string::npos);
}

TEST_CASE("a correct kernel slower than its call timeout gets the time its own speed needs and the same report") {
  // slow_flash_f16: scalar float16 online softmax. With calls limited to 0.3 s, long_rows' larger problems outlast
  // the limit; each call may take kAllowanceMargin × what the kernel's speed on the calls that returned predicts, so
  // every case is judged on the kernel's answers: the report is the one the default 10 s timeout gives.
  TempDir dir;
  const std::string slow = "check --plugin " MISBEHAVING_PLUGIN " --kernel slow_flash_f16 --dtype f16 "
                           "--properties accuracy,long_rows --profile quick --time-budget 600 --quiet --jobs 1";
  const Run tight = run(attncheck(slow + " --timeout 0.3 --report-dir " + (dir / "tight")));
  INFO(tight.out << tight.err);
  CHECK(tight.status == 0);
  CHECK(tight.out.find("counterexample") == std::string::npos);
  CHECK(slurp(dir / "tight/report.json").find("not hanging") == std::string::npos);
  const Run usual = run(attncheck(slow + " --report-dir " + (dir / "usual")));
  CHECK(usual.status == 0);
  CHECK(report_content(dir / "tight/report.json") == report_content(dir / "usual/report.json"));
}

TEST_CASE("a kernel that hangs above 100 keys is still a hang, shrunk to 101 keys, with its speed below") {
  // Its calls below 100 keys return in microseconds: a call on more keys that outlasts 1 s is a hang.
  Run r;
  const double s = seconds_of(attncheck("check --plugin " MISBEHAVING_PLUGIN " --kernel hang_above_100_keys "
                                        "--dtype f32 --properties long_rows --profile quick --quiet --time-budget 600 "
                                        "--timeout 1 --jobs 1"),
                              &r);
  INFO(r.out << r.err << "\nseconds: " << s);
  CHECK(r.status == kExitCounterexample);
  CHECK(r.out.find("Lk=101") != std::string::npos);  // shrunk to the first size that hangs
  CHECK(r.out.find("did not return within 1000 ms") != std::string::npos);
}
