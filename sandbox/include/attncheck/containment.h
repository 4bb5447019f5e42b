// Containment of kernel processes (sandbox servers, exec children) beyond what their process group gives
// (spec/SPEC.md §8):
//
//   - a Landlock domain: a kernel process and everything it starts can neither ptrace, read or write the memory of,
//     nor open the descriptors of, any process outside its domain — the gate above all (Linux ≥ 5.19, Landlock
//     ABI 2); from Landlock ABI 6 (Linux 6.12) it cannot signal them either. The domain restricts nothing on the
//     file system by default: a rule that kept a kernel out of one directory would also forbid it to create files in
//     every directory above it (Landlock only grants), and a kernel creating ~/.triton on a fresh CI runner must not
//     fail. confine_writes() asks for that trade (`check --confine-writes`): no writes beneath the report directory.
//   - orphans: a process that adopts orphans (the CLI, adopt_orphans()) becomes the reaper of every process a kernel
//     leaves behind, even one that left its process group (setsid, a double fork); it reaps them as they die
//     (reap_orphans()) and kills them before it writes its reports (kill_strays()), so that no kernel process
//     outlives the verdict.
//
//   const auto domain = attncheck::containment::kernel_domain();
//   attncheck::containment::SpawnLock lock;     // no orphan sweep between fork() and register_child()
//   const pid_t pid = fork();
//   if (pid == 0) { domain->enter(); execve(...); _exit(127); }
//   attncheck::containment::register_child(pid);
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace attncheck::containment {

/// A prepared Landlock ruleset that child processes enter between fork() and exec().
class Domain {
 public:
  /// The ABI version of the running kernel's Landlock (0: none, or disabled).
  int abi() const { return abi_; }
  /// True when enter() confines (Landlock ABI ≥ 2).
  bool available() const { return ruleset_fd_ >= 0; }
  /// True when the domain also keeps kernel processes from signalling processes outside it (Landlock ABI ≥ 6).
  bool scopes_signals() const { return available() && scoped_; }
  /// What confines kernel processes, one line: "Landlock ABI 7: cannot ptrace or signal the gate", or why nothing
  /// does ("no Landlock on this system: process groups only").
  const std::string &description() const { return description_; }
  /// In the child, between fork() and exec(), before any dup2() (which may overwrite the ruleset's descriptor): sets
  /// no_new_privs and enters the domain. Async-signal-safe; does nothing when !available(). Returns false when a step
  /// failed (the child then runs unconfined, as without Landlock).
  bool enter() const noexcept;

  /// The default domain: nothing on the file system is restricted.
  Domain();
  /// A domain under which nothing beneath `protect` (directories or files) can be written, created, removed, renamed
  /// or truncated, nor any entry created or removed directly in a directory above them; everything else stays
  /// writable as it is now (the entries of those directories are enumerated: ones created later are not).
  explicit Domain(const std::vector<std::filesystem::path> &protect);
  ~Domain();
  Domain(const Domain &) = delete;
  Domain &operator=(const Domain &) = delete;

 private:
  int abi_ = 0;
  int ruleset_fd_ = -1;
  bool scoped_ = false;
  std::string description_;
};

/// The domain for a kernel process about to start: the process-wide default one, prepared on first use (before any
/// fork), or under confine_writes() one built now, whose enumeration sees the private directories made for it.
std::shared_ptr<const Domain> kernel_domain();

/// From now on kernel processes start under Domain(protect). Throws std::runtime_error with one line when Landlock
/// cannot do it here (ABI < 2, or refused).
void confine_writes(std::vector<std::filesystem::path> protect);

/// Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER). For a process whose every
/// child is attncheck's own (the CLI), never for a library user's (Python's) process. False when refused.
bool adopt_orphans();

/// Serializes a spawn with the orphan sweeps: held from before fork() until register_child(), so that a new child
/// that dies at once is not taken for an orphan.
class SpawnLock {
 public:
  SpawnLock();
  ~SpawnLock();
  SpawnLock(const SpawnLock &) = delete;
  SpawnLock &operator=(const SpawnLock &) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
};
/// A child this process started and will wait for itself, registered under the SpawnLock of its fork();
/// forget_child() once it has been waited for.
void register_child(pid_t pid);
void forget_child(pid_t pid);

/// Reaps the adopted orphans that have died (zombies not registered); returns how many. Does nothing unless
/// adopt_orphans() succeeded.
int reap_orphans();
/// Kills (SIGKILL) and reaps every child not registered, again until none is left (the killed ones' own orphans come
/// back to this process); returns how many. Does nothing unless adopt_orphans() succeeded.
int kill_strays();

/// The peak resident memory of the child `pid`, in MiB (rounded up): its VmHWM while it runs, its rusage's ru_maxrss
/// once it has exited and is not yet reaped; 0 when neither can be read (it is being torn down). What a memory-limit
/// message names beside the limit: the limit counts what a process may write, this what it really touched.
std::uint64_t peak_resident_mib(pid_t pid);
/// ", peak resident N MiB" for `pid` (peak_resident_mib), or "" when it cannot be read.
std::string peak_resident_note(pid_t pid);

}  // namespace attncheck::containment
