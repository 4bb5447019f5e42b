#include "server.h"
#include "decode.h"

#include "attncheck/containment.h"

#include "attncheck/kernel_call.h"
#include "io.h"
#include "serve.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <filesystem>
#include <optional>
#include <thread>

namespace attncheck::sandbox {

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
/// How long a child that reported a fatal signal, or asked to quit, may take to exit before it is killed.
constexpr int kExitGraceMs = 2000;
/// The server executable's file name, and the variable that overrides where it is.
constexpr const char *kServerName = "attncheck-sandbox-server";
constexpr const char *kServerEnv = "ATTNCHECK_SANDBOX_SERVER";
/// Exit status of a child whose exec() of the server failed.
constexpr int kExecFailed = 127;
/// A mapping of the shared memory up to this size is kept for smaller calls; a larger one is given back to the
/// system when a call needs less than a quarter of it (one huge case does not hold its memory for the rest).
constexpr std::size_t kShmKeepBytes = 64 * kMiB;

/// The server executable: the option, $ATTNCHECK_SANDBOX_SERVER, beside the running executable, or where the build
/// put it; "" when there is none (the forked child then serves without exec).
std::string server_executable(const std::string &option) {
  if (!option.empty()) return option;
  if (const char *env = std::getenv(kServerEnv); env && *env) return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && access((exe.parent_path() / kServerName).c_str(), X_OK) == 0)
    return (exe.parent_path() / kServerName).string();
#ifdef ATTNCHECK_SANDBOX_SERVER
  if (access(ATTNCHECK_SANDBOX_SERVER, X_OK) == 0) return ATTNCHECK_SANDBOX_SERVER;
#endif
  return "";
}

std::string hex(std::uint64_t x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

std::string signal_name(int signo) {
  const char *abbrev = sigabbrev_np(signo);
  const char *descr = sigdescr_np(signo);
  std::string s = abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signo);
  if (descr) {
    std::string d = descr;
    for (char &c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s += " (" + d + ")";
  }
  return s;
}

Server::Server(std::string path, SandboxOptions options) : path_(std::move(path)), options_(options) {}

Server::~Server() {
  stop();
  if (!tmpdir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmpdir_, ec);
  }
}

namespace {
/// Passes lines of `fd` to `sink` until `stop` or end of file, at most kMaxForwardedBytes; then says how much it
/// dropped.
void drain_output(int fd, const std::atomic<bool> &stop, const std::function<void(std::string_view)> &sink) {
  std::size_t forwarded = 0, dropped = 0;
  std::string line;
  char buf[4096];
  while (!stop.load()) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 50);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (forwarded >= kMaxForwardedBytes) {
        ++dropped;
        continue;
      }
      ++forwarded;
      if (buf[i] != '\n') line.push_back(buf[i]);
      if (buf[i] == '\n' || forwarded == kMaxForwardedBytes) {
        sink(line);
        line.clear();
      }
    }
  }
  if (!line.empty()) sink(line);
  if (dropped > 0)
    sink("... " + std::to_string(dropped) + " more bytes of output dropped (the sandbox passes on " +
         std::to_string(kMaxForwardedBytes / 1024) + " KiB per start)");
}
}  // namespace

void Server::stop_draining() {
  stop_drain_.store(true);
  if (drain_.joinable()) drain_.join();
  if (output_fd_ >= 0) close(output_fd_);
  output_fd_ = -1;
  stop_drain_.store(false);
}

void Server::kill_group() const {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);  // the server leads its own process group (start): the kernel's children go with it
  kill(pid_, SIGKILL);
}

std::vector<std::string> Server::child_environment() {
  if (tmpdir_.empty()) {
    const char *t = std::getenv("TMPDIR");
    std::string templ = std::string(t && *t ? t : "/tmp") + "/attncheck-sandbox-XXXXXX";
    if (mkdtemp(templ.data())) tmpdir_ = templ;
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.emplace_back(*e);
  if (!tmpdir_.empty()) env.push_back("TMPDIR=" + tmpdir_);
  return env;
}

int Server::reap(int grace_ms) {
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      kill_group();
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(-pid_, SIGKILL);  // what the kernel left running in the server's group
  stop_draining();
  containment::forget_child(pid_);
  containment::reap_orphans();  // what the kernel left outside its group, when this process adopts them
  pid_ = -1;
  if (sock_ >= 0) close(sock_);
  unmap_shared_memory();
  if (memfd_ >= 0) close(memfd_);
  sock_ = memfd_ = -1;
  return status;
}

void Server::unmap_shared_memory() {
  if (shm_) munmap(shm_, shm_bytes_);
  shm_ = nullptr;
  shm_bytes_ = 0;
}

std::byte *Server::shared_memory(std::size_t bytes) {
  const bool shrink = shm_bytes_ > kShmKeepBytes && bytes < shm_bytes_ / 4;
  if (shm_ && bytes <= shm_bytes_ && !shrink) return shm_;
  unmap_shared_memory();
  if (ftruncate(memfd_, static_cast<off_t>(bytes)) != 0) return nullptr;
  void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (mem == MAP_FAILED) return nullptr;
  shm_ = static_cast<std::byte *>(mem);
  shm_bytes_ = bytes;
  return shm_;
}

void Server::stop() {
  if (!running()) return;
  wire::Request quit;
  std::memset(&quit, 0, sizeof quit);
  quit.magic = wire::kMagic;
  quit.op = wire::kQuit;
  const bool asked = send_all(sock_, &quit, sizeof quit);
  reap(asked ? kExitGraceMs : 0);
}

std::vector<KernelDesc> Server::start() {
  if (running()) {
    kill_group();
    reap(0);
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw SandboxError(std::string("sandbox: socketpair failed: ") + std::strerror(errno));
  const int memfd = memfd_create("attncheck-sandbox", MFD_CLOEXEC);
  if (memfd < 0) {
    close(sv[0]);
    close(sv[1]);
    throw SandboxError(std::string("sandbox: memfd_create failed: ") + std::strerror(errno));
  }
  std::fflush(nullptr);  // or the child would print the parent's buffered output again
  const pid_t parent = getpid();
  // A fresh process rather than a copy of this one: libgomp's thread pool, say, does not survive fork().
  std::string exe = server_executable(options_.server_executable), parent_arg = std::to_string(parent);
  std::string path_arg = path_;
  char *argv[] = {exe.data(), path_arg.data(), parent_arg.data(), nullptr};
  int output[2] = {-1, -1};
  if (pipe2(output, O_CLOEXEC) != 0) output[0] = output[1] = -1;  // without it the output goes where ours does
  std::vector<std::string> env = child_environment();
  std::vector<char *> envp;
  for (std::string &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::shared_ptr<const containment::Domain> domain = containment::kernel_domain();
  std::optional<containment::SpawnLock> spawn_lock(std::in_place);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    close(memfd);
    for (int fd : output)
      if (fd >= 0) close(fd);
    throw SandboxError(std::string("sandbox: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    domain->enter();  // first: the descriptors dup2()ed below may overwrite the ruleset's
    close(sv[0]);
    if (!exe.empty()) {
      // Only async-signal-safe calls until exec (the parent may have threads). dup2 onto the fixed descriptors
      // clears close-on-exec; the detour through high numbers keeps the two from overwriting each other.
      const int s = fcntl(sv[1], F_DUPFD_CLOEXEC, kServerMemFd + 1);
      const int m = fcntl(memfd, F_DUPFD_CLOEXEC, kServerMemFd + 1);
      if (s >= 0 && m >= 0 && dup2(s, kServerSocketFd) >= 0 && dup2(m, kServerMemFd) >= 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (output[1] >= 0) {
          dup2(output[1], STDOUT_FILENO);
          dup2(output[1], STDERR_FILENO);
        }
        setpgid(0, 0);  // a group of its own, which kill_group() ends with whatever the kernel started
        execve(exe.c_str(), argv, envp.data());
      }
      _exit(kExecFailed);
    }
    serve(sv[1], memfd, path_, parent);
  }
  containment::register_child(pid);
  spawn_lock.reset();
  close(sv[1]);
  if (output[1] >= 0) close(output[1]);
  if (!exe.empty()) setpgid(pid, pid);  // as the child does: whichever runs first
  output_fd_ = output[0];
  if (output_fd_ >= 0) {
    std::function<void(std::string_view)> sink = options_.on_output;
    if (!sink) sink = [](std::string_view line) { std::fprintf(stderr, "[plugin] %.*s\n", int(line.size()), line.data()); };
    drain_ = std::thread(drain_output, output_fd_, std::cref(stop_drain_), std::move(sink));
  }
  pid_ = pid;
  sock_ = sv[0];
  memfd_ = memfd;
  ++starts_;

  const auto deadline = Clock::now() + options_.timeout;
  auto fail = [&](const std::string &why) -> SandboxError {
    kill_group();
    reap(0);
    return SandboxError(why);
  };
  wire::Hello hello;
  switch (recv_all(sock_, &hello, sizeof hello, &deadline)) {
    case Read::ok: break;
    case Read::timeout:
      throw fail("plugin '" + path_ + "' did not finish loading within " +
                 std::to_string(options_.timeout.count()) + " ms (a hang in its initialisation?)");
    default: {
      const int status = reap(kExitGraceMs);
      if (WIFEXITED(status) && WEXITSTATUS(status) == kExecFailed)
        throw SandboxError("sandbox: cannot run the server '" + exe + "' (set " + kServerEnv +
                           " to the path of " + kServerName + ")");
      throw SandboxError("plugin '" + path_ + "' crashed while loading: " +
                         (WIFSIGNALED(status) ? signal_name(WTERMSIG(status))
                                              : "exit status " + std::to_string(WEXITSTATUS(status))));
    }
  }
  int count = 0;
  try {
    count = decode_hello(hello);
  } catch (const DecodeError &e) {  // the server's own words, or "exports no kernels"
    throw fail(hello.magic == wire::kMagic && hello.count == 0 ? "plugin '" + path_ + "' " + e.what() : e.what());
  }
  std::vector<KernelDesc> ks;
  for (int i = 0; i < count; ++i) {
    wire::KernelInfo info;
    if (recv_all(sock_, &info, sizeof info, &deadline) != Read::ok)
      throw fail("plugin '" + path_ + "': the sandbox server died while listing the kernels");
    try {
      ks.push_back(decode_kernel_info(info, i));
    } catch (const DecodeError &e) {
      throw fail("plugin '" + path_ + "': " + e.what());
    }
  }
  if (!kernels_.empty()) {
    bool same = kernels_.size() == ks.size();
    for (std::size_t i = 0; same && i < ks.size(); ++i) same = ks[i].name == kernels_[i].name;
    if (!same) throw fail("plugin '" + path_ + "' lists other kernels after a restart");
  } else {
    kernels_ = ks;
  }
  return ks;
}

Server::Result Server::crashed(const wire::Reply *note, const Staging &staging) {
  const std::string peak = containment::peak_resident_note(pid_);  // before reap(): a reaped child tells nothing
  const int status = reap(kExitGraceMs);
  Result r;
  CallFault &f = r.fault;
  const std::string limit = std::to_string(options_.memory_limit_mib) + " MiB" + peak;
  if (WIFEXITED(status) && !note) {
    f.kind = CallFault::protocol;
    f.message = "the kernel ended the sandbox process (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
    return r;
  }
  const int signo = note ? note->signo : WTERMSIG(status);
  f.signal_number = signo;
  if (note && note->enomem) {
    f.kind = CallFault::memory;
    f.message = "exceeded the memory limit of " + limit + " (an allocation failed, then " + signal_name(signo) + ")";
    return r;
  }
  if (!note && signo == SIGKILL) {
    f.kind = CallFault::memory;
    f.message = "was killed by SIGKILL from outside the sandbox (the system's out-of-memory killer?)";
    return r;
  }
  f.kind = CallFault::signal;
  if (note && note->addr_valid) {
    const std::string where = note->in_shm ? staging.attribute(note->shm_offset) : "";
    const std::string at = signal_name(signo).substr(0, signal_name(signo).find(' ')) + " at address " + hex(note->addr);
    if (!where.empty()) {
      f.message = "read or wrote outside a tensor (" + at + " = " + where + ")";
      f.tensor = where.substr(where.rfind(' ') + 1);
    } else {
      f.message = "crashed with " + signal_name(signo) + " at address " + hex(note->addr);
    }
  } else {
    f.message = "crashed with " + signal_name(signo);
  }
  return r;
}

Server::Result Server::call(wire::Op op, int index, const attncheck_params &params, const std::vector<Arg> &args) {
  Result r;
  auto protocol = [&](const std::string &why) {
    r.fault.kind = CallFault::protocol;
    r.fault.message = why;
    return r;
  };
  if (!running()) {
    try {
      start();
    } catch (const SandboxError &e) {
      return protocol(std::string("could not restart the sandbox server: ") + e.what());
    }
  }
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::optional<Staging> staging;
  try {
    staging.emplace(args, page);
  } catch (const std::invalid_argument &e) {
    return protocol(e.what());
  }
  std::byte *shm = shared_memory(staging->bytes());
  if (!shm)
    return protocol(std::string("sandbox: cannot size and map the shared memory: ") + std::strerror(errno));
  staging->write(shm);

  wire::Request req;
  std::memset(&req, 0, sizeof req);
  req.magic = wire::kMagic;
  req.op = op;
  req.kernel = index;
  req.params = params;
  req.shm_bytes = staging->bytes();
  req.memory_limit_bytes = options_.memory_limit_mib * kMiB;
  req.page = page;
  staging->fill(req.tensors, 0, wire::kMaxTensors);
  if (params.args) req.params.args = wire::args_follow();  // the parent's pointer means nothing in the child
  if (!send_all(sock_, &req, sizeof req)) return crashed(nullptr, *staging);
  if (params.args) {  // ABI 1.2: the scalars and the args tensors (in the shared memory after the others)
    wire::Args a;
    std::memset(&a, 0, sizeof a);
    a.magic = wire::kMagic;
    a.scalars = wire::read_args(*params.args);
    for (int i = 0; i < wire::kMaxArgTensors; ++i) wire::set_arg_tensor(a.scalars, i, nullptr);
    staging->fill(a.tensors, wire::kMaxTensors, wire::kMaxArgTensors);
    if (!send_all(sock_, &a, sizeof a)) return crashed(nullptr, *staging);
  }

  const std::chrono::milliseconds limit = CallTimeout::current(options_.timeout);
  const auto started = Clock::now();
  const auto deadline = started + limit;
  wire::Reply rep;
  switch (recv_all(sock_, &rep, sizeof rep, &deadline)) {
    case Read::ok: break;
    case Read::timeout:
      kill_group();
      reap(0);
      CallRecord::of_this_thread().note_timeout(limit);
      r.fault.kind = CallFault::timeout;
      r.fault.message = "did not return within " + std::to_string(limit.count()) +
                        " ms (a hang?); the sandbox killed it";
      return r;
    default: return crashed(nullptr, *staging);
  }
  std::string message;
  try {
    message = decode_reply_message(rep);
  } catch (const DecodeError &e) {
    kill_group();
    reap(0);
    return protocol(e.what());
  }
  if (rep.type == wire::kSignalled) return crashed(&rep, *staging);
  CallRecord &record = CallRecord::of_this_thread();
  record.longest_ok =
      std::max(record.longest_ok, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started));
  r.status = rep.status;
  r.message = rep.status == ATTNCHECK_OK ? "" : message;
  if (auto f = staging->check(shm)) {
    r.fault = std::move(*f);
    return r;
  }
  if (rep.status == ATTNCHECK_ERROR && rep.enomem) {
    r.fault.kind = CallFault::memory;
    r.fault.message = "exceeded the memory limit of " + std::to_string(options_.memory_limit_mib) + " MiB" +
                      containment::peak_resident_note(pid_) + " (an allocation failed; the kernel returned ATTNCHECK_ERROR" +
                      (r.message.empty() ? "" : ": " + r.message) + ")";
    return r;
  }
  if (rep.status == ATTNCHECK_OK) staging->copy_out(shm);
  return r;
}

}  // namespace attncheck::sandbox
