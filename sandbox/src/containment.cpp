#include "attncheck/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
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

int landlock_abi() {
  const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

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

Domain::Domain() {
  abi_ = landlock_abi();
  if (abi_ < kFirstUsableAbi) {
    description_ = abi_ == 0 ? "no Landlock on this system: process groups only"
                             : "Landlock ABI 1 only, which cannot confine without breaking renames: process groups only";
    return;
  }
  RulesetAttr attr{};
  std::size_t size = sizeof attr.handled_access_fs;
  if (abi_ >= kFirstAbiWithScopes) {
    attr.scoped = kScopeSignal;
    size = sizeof attr;
    scoped_ = true;
  } else {
    attr.handled_access_fs = kHandledFs;
  }
  const long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (fd < 0) {
    description_ = std::string("Landlock refused the ruleset (") + std::strerror(errno) + "): process groups only";
    return;
  }
  ruleset_fd_ = static_cast<int>(fd);  // close-on-exec, as every ruleset descriptor
  if (attr.handled_access_fs != 0) {
    const int root = open("/", O_PATH | O_CLOEXEC);
    landlock_path_beneath_attr rule{kHandledFs, root};
    const bool added = root >= 0 && syscall(SYS_landlock_add_rule, ruleset_fd_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) == 0;
    if (root >= 0) close(root);
    if (!added) {
      close(ruleset_fd_);
      ruleset_fd_ = -1;
      description_ = "Landlock refused a rule: process groups only";
      return;
    }
  }
  description_ = "Landlock ABI " + std::to_string(abi_) + ": cannot ptrace " + (scoped_ ? "or signal " : "") + "the gate";
}

Domain::~Domain() {
  if (ruleset_fd_ >= 0) close(ruleset_fd_);
}

bool Domain::enter() const noexcept {
  if (ruleset_fd_ < 0) return true;
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset_fd_, 0) == 0;
}

const Domain &kernel_domain() {
  static const Domain domain;
  return domain;
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

}  // namespace attncheck::containment
