// Containment of kernel processes (attncheck/containment.h, SPEC.md §8): a sandboxed kernel cannot reach the gate's
// memory or signal it, and a gate that adopts orphans reaps what kernels leave behind and ends what still runs,
// even outside the kernel's process group.
#include "attncheck/containment.h"
#include "attncheck/kernel_call.h"
#include "attncheck/sandbox.h"
#include "sandbox_support.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace attncheck;
using namespace attncheck::sandbox;
using attncheck::containment::Domain;
using sandbox_test::children;
using sandbox_test::Children;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// Rounds of a kernel leaving a child in its group and a crash that has the group killed.
constexpr int kOrphanRounds = 10;

/// The pid forge_report's daemon wrote into `dir`, 0 before it has.
long forger_pid(const std::string &dir) {
  std::ifstream f(dir + "/forger.pid");
  long pid = 0;
  f >> pid;
  return pid;
}

/// What `body` returns when run in a child of this test (for what changes the whole process: adopting orphans,
/// confining writes); the child exits without Catch2's teardown.
std::string run_in_child(const std::function<std::string()> &body) {
  int report[2];
  REQUIRE(pipe(report) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(report[0]);
    const std::string text = body();
    (void)!write(report[1], text.data(), text.size());
    _exit(0);
  }
  close(report[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(report[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(report[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return text;
}

/// Whether a process without the domain could do what poke_gate tries, here: open its parent's memory for writing.
bool unconfined_could_open_parent_memory() {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(("/proc/" + std::to_string(getppid()) + "/mem").c_str(), O_RDWR);
    _exit(fd >= 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("a sandboxed kernel can neither open the gate's memory for writing nor signal it") {
  const std::shared_ptr<const containment::Domain> domain = containment::kernel_domain();
  if (!domain->available()) {
    WARN("not checked here: " << domain->description());
    return;
  }
  INFO(domain->description());
  // Without the domain the attempt succeeds on this machine (no Yama ptrace restriction), so the check below is the
  // domain's doing; with Yama it is denied either way.
  INFO("an unconfined process may open its parent's memory here: " << unconfined_could_open_parent_memory());
  SandboxedPlugin plugin = SandboxedPlugin::load(MISBEHAVING_PLUGIN);
  const Problem p = sandbox_test::small_problem();
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  const CallResult r = call_forward(plugin.find("poke_gate"), p, out, &lse);
  REQUIRE(r.status == ATTNCHECK_ERROR);
  CHECK_THAT(r.message, Contains("mem=denied"));
  if (domain->scopes_signals()) CHECK_THAT(r.message, Contains("signal=denied"));
}

TEST_CASE("a gate that adopts orphans reaps what kernels leave and ends what still runs outside their group") {
  char dir[] = "/tmp/attncheck-containment-XXXXXX";
  REQUIRE(mkdtemp(dir));
  // In a child of this test: adopting orphans is process-wide, and the other tests' children are not the gate's.
  const std::string text = run_in_child([&] {
    std::ostringstream line;
    if (!containment::adopt_orphans()) {
      line << "adopt=refused";
    } else {
      setenv("ATTNCHECK_TEST_FORGE_DIR", dir, 1);
      const Problem p = sandbox_test::small_problem();
      {
        SandboxedPlugin plugin = SandboxedPlugin::load(MISBEHAVING_PLUGIN);
        Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
        for (int round = 0; round < kOrphanRounds; ++round) {
          call_forward(plugin.find("spawn_child"), p, out, &lse);  // a sleeper in the server's group
          call_forward(plugin.find("segfault"), p, out, &lse);     // the group is killed: the sleeper's zombie is ours
        }
        const CallResult forged = call_forward(plugin.find("forge_report"), p, out, &lse);  // a daemon outside the group
        line << "forge_report=" << (forged.ok() ? "ok" : forged.message) << " ";
      }
      // Between a SIGKILL and the zombie it makes there is a moment: the last round's may still be uncollected.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const Children before_sweep = children();
      const int killed = containment::kill_strays();
      const Children after = children();
      const long forger = forger_pid(dir);
      line << "zombies_before_sweep=" << before_sweep.zombies << " alive_before_sweep=" << before_sweep.alive
           << " killed=" << killed << " alive_after=" << after.alive << " zombies_after=" << after.zombies
           << " forger=" << (forger <= 0 ? "never started" : kill(static_cast<pid_t>(forger), 0) != 0 ? "gone" : "running");
    }
    return line.str();
  });
  fs::remove_all(dir);
  INFO(text);
  if (text == "adopt=refused") {
    WARN("not checked here: PR_SET_CHILD_SUBREAPER was refused");
    return;
  }
  // Each crash left an orphan sleeper: reaped at the restart after it, all but the last round's at most.
  CHECK_THAT(text, Contains("zombies_before_sweep=0") || Contains("zombies_before_sweep=1 "));
  CHECK_THAT(text, Contains("alive_before_sweep=1 "));  // the forger
  CHECK_THAT(text, Contains("killed=1 "));
  CHECK_THAT(text, Contains("alive_after=0 zombies_after=0 forger=gone"));
}

namespace {

/// touch_reports' message on a fresh report directory (report.json in it, elsewhere/ beside it) in `dir`.
std::string touch_reports(const std::string &dir) {
  fs::remove_all(dir);
  fs::create_directories(dir + "/r");
  fs::create_directories(dir + "/elsewhere");
  std::ofstream(dir + "/r/report.json") << "{}";
  setenv("ATTNCHECK_TEST_FORGE_DIR", (dir + "/r").c_str(), 1);
  SandboxedPlugin plugin = SandboxedPlugin::load(MISBEHAVING_PLUGIN);
  const Problem p = sandbox_test::small_problem();
  Tensor out = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
  const std::string message = call_forward(plugin.find("touch_reports"), p, out, &lse).message;
  unsetenv("ATTNCHECK_TEST_FORGE_DIR");
  return message;
}

}  // namespace

TEST_CASE("the default domain leaves the file system alone and confine_writes keeps kernels out of the reports only") {
  char dir[] = "/tmp/attncheck-confine-XXXXXX";
  REQUIRE(mkdtemp(dir));
  // By default a kernel may change anything its user may: no false alarm for a kernel that writes a cache.
  CHECK_THAT(touch_reports(dir), Contains("write=allowed create=allowed rename=allowed remove=allowed sibling=allowed "
                                          "tmpdir=allowed"));
  const Domain probe({std::string(dir) + "/r"});
  if (!probe.available()) {
    WARN("confine_writes not checked here: " << probe.description());
    fs::remove_all(dir);
    return;
  }
  const std::string text = run_in_child([&] {  // confine_writes is process-wide
    containment::confine_writes({std::string(dir) + "/r"});
    return touch_reports(dir);
  });
  fs::remove_all(dir);
  CHECK_THAT(text, Contains("write=denied create=denied rename=denied remove=denied sibling=allowed tmpdir=allowed"));
}
