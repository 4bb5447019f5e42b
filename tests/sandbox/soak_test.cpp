// Soak: thousands of calls of kernels that crash, hang, abort, exit, leak memory and descriptors, spawn children,
// fill $TMPDIR and write to stdout and stderr, through one sandboxed plugin. The verdict of every call is right, and
// the gate's own process ends as it began: the same descriptors, no children or zombies, no processes the kernels
// started, no files in its $TMPDIR, and its memory flat; what the kernels print is passed on, bounded.
#include "attncheck/containment.h"
#include "attncheck/kernel_call.h"
#include "attncheck/sandbox.h"
#include "sandbox_support.h"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace attncheck;
using namespace attncheck::sandbox;
using sandbox_test::children;
using sandbox_test::Children;
using sandbox_test::small_problem;
namespace fs = std::filesystem;

namespace {

/// Rounds of the schedule below: each calls every careless and crashing kernel once.
constexpr int kRounds = 250;
/// A hang costs its timeout: one round in kHangEvery calls the hanging kernel.
constexpr int kHangEvery = 25;
constexpr auto kSoakTimeout = std::chrono::milliseconds(300);
/// Allowed growth of this process's resident memory over the soak after its first round (allocator slack).
constexpr long kRssSlackKiB = 16 * 1024;
/// AddressSanitizer's quarantine keeps freed memory resident by design: the memory check is for ordinary builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
/// 10 ms waits for the kernels' processes to be gone after their SIGKILL.
constexpr int kKillWaits = 200;

const char *const kCareless[] = {"naive", "leak_fds", "spawn_child", "fill_tmp", "chatty", "leak_memory"};
const char *const kCrashing[] = {"segfault", "abort", "exit", "fails"};

std::size_t count_entries(const fs::path &dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

/// Processes anywhere whose command line names the plugin: the servers and whatever they forked. `seen` gets their
/// /proc/PID/stat lines.
int processes_of(const std::string &plugin, std::string *seen = nullptr) {
  int n = 0;
  for (const auto &e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(getpid())) continue;
    std::ifstream f(e.path() / "cmdline", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (ss.str().find(plugin) == std::string::npos) continue;
    ++n;
    if (seen) {
      std::ifstream stat(e.path() / "stat");
      std::string line;
      std::getline(stat, line);
      *seen += line + "; ";
    }
  }
  return n;
}

long rss_kib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

TEST_CASE("thousands of calls of crashing hanging and careless kernels leave the gate's process as it was",
          "[soak]") {
  // The gate's $TMPDIR, empty: the sandbox gives its server a private one inside it and removes it.
  char templ[] = "/tmp/attncheck-soak-XXXXXX";
  REQUIRE(mkdtemp(templ));
  const fs::path tmp = templ;
  const char *old_tmp = std::getenv("TMPDIR");
  const std::string saved = old_tmp ? old_tmp : "";
  setenv("TMPDIR", templ, 1);

  // The plugin under a path of its own: the processes that name it are this test's, whatever else runs in parallel.
  char plugin_dir[] = "/tmp/attncheck-soak-plugin-XXXXXX";
  REQUIRE(mkdtemp(plugin_dir));
  const std::string plugin_path = std::string(plugin_dir) + "/misbehaving_plugin.so";
  fs::copy_file(MISBEHAVING_PLUGIN, plugin_path);
  (void)containment::kernel_domain();  // its ruleset descriptor is the process's, for every kernel process to come
  const std::size_t fds_before = count_entries("/proc/self/fd");
  const Children children_before = children();
  const Problem p = small_problem();
  int calls = 0, restarts = 0;
  std::atomic<std::size_t> output_bytes{0}, output_lines{0};
  long rss_after_first_round = 0;
  {
    SandboxOptions o;
    o.timeout = kSoakTimeout;
    o.memory_limit_mib = 256;
    o.on_output = [&](std::string_view line) {  // chatty's output: counted, not printed
      output_bytes += line.size() + 1;
      ++output_lines;
    };
    SandboxedPlugin plugin = SandboxedPlugin::load(plugin_path, o);
    Tensor expected = make_out(p.shape, Dtype::f32), lse = make_lse(p.shape);
    REQUIRE(call_forward(plugin.find("naive"), p, expected, &lse).ok());
    for (int round = 0; round < kRounds; ++round) {
      for (const char *name : kCareless) {
        Tensor out = make_out(p.shape, Dtype::f32);
        const CallResult r = call_forward(plugin.find(name), p, out, &lse);
        ++calls;
        INFO(name << " in round " << round << ": " << r.message);
        REQUIRE(r.ok());
        REQUIRE(out.to_vector() == expected.to_vector());
      }
      for (const char *name : kCrashing) {
        Tensor out = make_out(p.shape, Dtype::f32);
        const CallResult r = call_forward(plugin.find(name), p, out, &lse);
        ++calls;
        INFO(name << " in round " << round << ": " << r.message);
        REQUIRE(r.status == ATTNCHECK_ERROR);
      }
      if (round % kHangEvery == 0) {
        Tensor out = make_out(p.shape, Dtype::f32);
        const CallResult r = call_forward(plugin.find("hang"), p, out, &lse);
        ++calls;
        REQUIRE(r.status == ATTNCHECK_ERROR);
        REQUIRE(last_fault(plugin.find("hang"))->kind == CallFault::timeout);
      }
      if (round == 0) rss_after_first_round = rss_kib();
    }
    restarts = plugin.server_starts();
    if (!kAddressSanitizer) CHECK(rss_kib() - rss_after_first_round < kRssSlackKiB);
  }
  const std::size_t fds_after = count_entries("/proc/self/fd");
  const Children children_after = children();
  const std::size_t tmp_after = count_entries(tmp);
  int leftover = processes_of(plugin_path);
  for (int wait = 0; leftover > 0 && wait < kKillWaits; ++wait) {  // SIGKILL is delivered, not done, when kill returns
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    leftover = processes_of(plugin_path);
  }
  if (saved.empty()) unsetenv("TMPDIR");
  else setenv("TMPDIR", saved.c_str(), 1);
  fs::remove_all(tmp);

  std::string seen;
  processes_of(plugin_path, &seen);
  fs::remove_all(plugin_dir);
  INFO(calls << " calls, " << restarts << " server starts; left: " << seen);
  CHECK(calls > 2000);
  CHECK(restarts > kRounds);  // every crash restarted the server
  CHECK(fds_after == fds_before);
  CHECK(children_after.alive == children_before.alive);
  CHECK(children_after.zombies == 0);
  CHECK(leftover == 0);   // the spawned children went with their server's process group
  CHECK(tmp_after == 0);  // fill_tmp's files went with the server's private $TMPDIR
  // chatty's output reached the sink, each server start's bounded by kMaxForwardedBytes.
  CHECK(output_lines > 0);
  CHECK(output_bytes <= static_cast<std::size_t>(restarts) * (kMaxForwardedBytes + 128));
}
