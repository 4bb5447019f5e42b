#include "attncheck/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace attncheck::containment {

namespace {

// The parts of <linux/landlock.h> newer than Debian 12's headers (Linux uapi, stable by construction).
/// struct landlock_ruleset_attr as of ABI 6: the kernel reads as many fields as the size it is given.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};
constexpr std::uint64_t kScopeSignal = 1ULL << 1;  // LANDLOCK_SCOPE_SIGNAL
constexpr int kFirstAbiWithScopes = 6;
/// LANDLOCK_ACCESS_FS_REFER (ABI 2) is denied by every file-system domain unless a rule grants it, and only ABI 2
/// can grant it: under ABI 1 any domain would break renames across directories.
constexpr int kFirstUsableAbi = 2;
/// A file-system ruleset granting, on "/", everything it handles: a domain that restricts no file access (ABI 2–5,
/// where a ruleset must handle some file access). MAKE_BLOCK needs CAP_MKNOD anyway.
constexpr std::uint64_t kHandledFs = LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_MAKE_BLOCK;
/// What confine_writes() denies beneath the protected paths: every way to change the file system (ABI 2).
constexpr std::uint64_t kWriteAccess =
    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
    LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER;
constexpr std::uint64_t kTruncate = 1ULL << 14;  // LANDLOCK_ACCESS_FS_TRUNCATE, ABI 3
constexpr int kFirstAbiWithTruncate = 3;
/// The rights a rule on a file (not a directory) may carry, among those handled.
constexpr std::uint64_t kFileAccess = LANDLOCK_ACCESS_FS_WRITE_FILE | kTruncate;

int landlock_abi() {
  const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

std::mutex g_protect_mutex;  // guards g_protect
std::vector<std::filesystem::path> g_protect;  // confine_writes()
std::mutex g_children_mutex;  // guards g_children, and is the SpawnLock
std::set<pid_t> g_children;
std::atomic<bool> g_adopting{false};

/// This process's children not registered, and whether each is a zombie, from /proc/PID/stat (state, ppid).
std::vector<std::pair<pid_t, bool>> unregistered_children() {
  std::vector<std::pair<pid_t, bool>> found;
  const pid_t self = getpid();
  DIR *proc = opendir("/proc");
  if (!proc) return found;
  while (const dirent *e = readdir(proc)) {
    char *end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    char path[64], stat[512];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0) continue;
    stat[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
    const char *close_paren = std::strrchr(stat, ')');
    char state = 0;
    long ppid = 0;
    if (!close_paren || std::sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2 || ppid != self) continue;
    if (!g_children.count(static_cast<pid_t>(pid))) found.emplace_back(static_cast<pid_t>(pid), state == 'Z');
  }
  closedir(proc);
  return found;
}

void reap(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Domain::Domain() : Domain(std::vector<std::filesystem::path>{}) {}

Domain::Domain(const std::vector<std::filesystem::path> &protect) {
  abi_ = landlock_abi();
  const char *const fallback = protect.empty() ? "process groups only" : "its writes cannot be confined";
  if (abi_ < kFirstUsableAbi) {
    description_ = abi_ == 0 ? std::string("no Landlock on this system: ") + fallback
                             : std::string("Landlock ABI 1 only, which cannot confine without breaking renames: ") +
                                   fallback;
    return;
  }
  RulesetAttr attr{};
  std::size_t size = sizeof attr.handled_access_fs;
  if (abi_ >= kFirstAbiWithScopes) {
    attr.scoped = kScopeSignal;
    size = sizeof attr;
    scoped_ = true;
  }
  const std::uint64_t write_access = kWriteAccess | (abi_ >= kFirstAbiWithTruncate ? kTruncate : 0);
  // A ruleset must handle something before ABI 6; REFER is handled whenever anything on the file system is.
  attr.handled_access_fs = !protect.empty() ? write_access : scoped_ ? 0 : kHandledFs;
  const long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (fd < 0) {
    description_ = std::string("Landlock refused the ruleset (") + std::strerror(errno) + "): " + fallback;
    return;
  }
  ruleset_fd_ = static_cast<int>(fd);  // close-on-exec, as every ruleset descriptor
  auto grant = [&](const std::filesystem::path &path, std::uint64_t access) {
    const int target = open(path.c_str(), O_PATH | O_CLOEXEC | O_NOFOLLOW);
    if (target < 0) return true;  // gone meanwhile, or unreadable: nothing to grant
    struct stat st {};
    bool ok = true;
    if (fstat(target, &st) == 0 && !S_ISLNK(st.st_mode)) {  // a link's target has its own rule, or none
      landlock_path_beneath_attr rule{S_ISDIR(st.st_mode) ? access : access & kFileAccess, target};
      ok = syscall(SYS_landlock_add_rule, ruleset_fd_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) == 0;
    }
    close(target);
    return ok;
  };
  if (protect.empty()) {
    if (attr.handled_access_fs != 0 && !grant("/", kHandledFs)) {
      close(ruleset_fd_);
      ruleset_fd_ = -1;
      description_ = std::string("Landlock refused a rule (") + std::strerror(errno) + "): " + fallback;
      return;
    }
  } else {
    // Landlock only grants: write access everywhere but beneath `protect` is every entry of every directory above
    // them, except the ones on the way down.
    std::set<std::filesystem::path> blocked, above;
    for (const std::filesystem::path &p : protect) {
      std::error_code ec;
      const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
      blocked.insert(full);
      for (std::filesystem::path up = full; up.has_relative_path();) {
        up = up.parent_path();
        blocked.insert(up);
        above.insert(up);
      }
    }
    // An entry Landlock refuses a rule for (a pseudo file system's) stays unwritable: stricter, never looser.
    for (const std::filesystem::path &dir : above) {
      std::error_code ec;
      for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
           it.increment(ec))
        if (!blocked.count(it->path())) (void)grant(it->path(), write_access);
    }
  }
  description_ = "Landlock ABI " + std::to_string(abi_) + ": cannot ptrace " + (scoped_ ? "or signal " : "") +
                 "the gate" + (protect.empty() ? "" : ", nor write beneath the reports");
}

Domain::~Domain() {
  if (ruleset_fd_ >= 0) close(ruleset_fd_);
}

bool Domain::enter() const noexcept {
  if (ruleset_fd_ < 0) return true;
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset_fd_, 0) == 0;
}

std::shared_ptr<const Domain> kernel_domain() {
  static const std::shared_ptr<const Domain> default_domain = std::make_shared<const Domain>();
  const std::lock_guard lock(g_protect_mutex);
  if (g_protect.empty()) return default_domain;
  return std::make_shared<const Domain>(g_protect);
}

void confine_writes(std::vector<std::filesystem::path> protect) {
  const Domain probe(protect);
  if (!probe.available())
    throw std::runtime_error("--confine-writes needs Landlock (Linux 5.19 or later, enabled): here, " +
                             probe.description());
  const std::lock_guard lock(g_protect_mutex);
  g_protect = std::move(protect);
}

bool adopt_orphans() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return false;
  g_adopting.store(true);
  return true;
}

SpawnLock::SpawnLock() : lock_(g_children_mutex) {}
SpawnLock::~SpawnLock() = default;

void register_child(pid_t pid) {
  // Called under a SpawnLock: the mutex is already held by this thread.
  if (pid > 0) g_children.insert(pid);
}

void forget_child(pid_t pid) {
  const std::lock_guard lock(g_children_mutex);
  g_children.erase(pid);
}

int reap_orphans() {
  if (!g_adopting.load()) return 0;
  const std::lock_guard lock(g_children_mutex);
  int reaped = 0;
  for (const auto &[pid, zombie] : unregistered_children())
    if (zombie) reap(pid), ++reaped;
  return reaped;
}

int kill_strays() {
  if (!g_adopting.load()) return 0;
  const std::lock_guard lock(g_children_mutex);
  int killed = 0;
  // Each round kills the strays found; their orphans, adopted meanwhile, are the next round's. A fork bomb cannot
  // outrun it for long: every round kills all it sees, and the rounds are bounded.
  constexpr int kMaxRounds = 1000;
  for (int round = 0; round < kMaxRounds; ++round) {
    const auto strays = unregistered_children();
    if (strays.empty()) break;
    for (const auto &[pid, zombie] : strays) {
      if (!zombie) kill(pid, SIGKILL), ++killed;
      reap(pid);
    }
  }
  return killed;
}

std::uint64_t peak_resident_mib(pid_t pid) {
  constexpr std::uint64_t kKiBPerMiB = 1024;
  const auto mib = [](std::uint64_t kib) { return (kib + kKiBPerMiB - 1) / kKiBPerMiB; };
  // A process in the middle of exiting has lost its VmHWM but is not a zombie yet: ask again until it is one (a
  // crashing child gets there at once; the deadline only guards against one that never does).
  constexpr auto kExitingGrace = std::chrono::seconds(5);
  const auto deadline = std::chrono::steady_clock::now() + kExitingGrace;
  do {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmHWM:", 0) == 0) return mib(std::strtoull(line.c_str() + 6, nullptr, 10));  // "VmHWM: 1234 kB"
    // A zombie has no VmHWM: waitid's rusage (a raw syscall: glibc's wrapper drops it), left unreaped (WNOWAIT).
    siginfo_t info{};
    rusage usage{};
    const long got = syscall(SYS_waitid, P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT, &usage);
    if (got != 0) return 0;  // not our child, or already reaped
    if (info.si_pid == pid) return mib(static_cast<std::uint64_t>(usage.ru_maxrss));  // KiB on Linux
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (std::chrono::steady_clock::now() < deadline);
  return 0;
}

std::string peak_resident_note(pid_t pid) {
  const std::uint64_t peak = peak_resident_mib(pid);
  return peak > 0 ? ", peak resident " + std::to_string(peak) + " MiB" : "";
}

}  // namespace attncheck::containment
