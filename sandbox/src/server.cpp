#include "server.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

namespace attncheck::sandbox {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMiB = 1024 * 1024;
/// How long a child that reported a fatal signal, or asked to quit, may take to exit before it is killed.
constexpr int kExitGraceMs = 2000;
/// Signals that end a kernel's call; the child reports them (with the fault address) before dying.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
/// Stack for the fatal-signal handler, so that a stack overflow is reported too.
constexpr std::size_t kAltStackBytes = 64 * 1024;

// ---- both sides ----

bool send_all(int fd, const void *buf, std::size_t n) {
  const char *p = static_cast<const char *>(buf);
  while (n > 0) {
    // MSG_NOSIGNAL: a dead child must not raise SIGPIPE in the parent.
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

enum class Read { ok, eof, timeout, error };

/// Reads exactly n bytes; deadline == nullptr blocks.
Read recv_all(int fd, void *buf, std::size_t n, const Clock::time_point *deadline) {
  char *p = static_cast<char *>(buf);
  while (n > 0) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return Read::timeout;
      pollfd pfd{fd, POLLIN, 0};
      const int r = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Read::error;
      if (r == 0) return Read::timeout;
    }
    const ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Read::error;
    if (got == 0) return Read::eof;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return Read::ok;
}

void copy_message(char (&dst)[wire::kMessageBytes], const char *src) {
  std::snprintf(dst, sizeof dst, "%s", src ? src : "");
}

// ---- the child ----

// Read by the fatal-signal handler.
volatile int g_sock = -1;
volatile std::uintptr_t g_shm_base = 0;
volatile std::size_t g_shm_bytes = 0;
alignas(16) char g_alt_stack[kAltStackBytes];

/// Reports the signal (and whether an allocation had just failed) to the parent, then dies of it. Only
/// async-signal-safe calls.
void on_fatal_signal(int signo, siginfo_t *info, void *) {
  const int saved_errno = errno;  // errno is per thread: the faulting thread's
  wire::Reply r;
  std::memset(&r, 0, sizeof r);
  r.magic = wire::kMagic;
  r.type = wire::kSignalled;
  r.signo = signo;
  r.enomem = saved_errno == ENOMEM;
  if (signo == SIGSEGV || signo == SIGBUS) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    r.addr_valid = 1;
    r.addr = addr;
    if (g_shm_base && addr >= g_shm_base && addr < g_shm_base + g_shm_bytes) {
      r.in_shm = 1;
      r.shm_offset = addr - g_shm_base;
    }
  }
  const char *p = reinterpret_cast<const char *>(&r);
  std::size_t n = sizeof r;
  while (n > 0) {
    const ssize_t w = write(g_sock, p, n);
    if (w <= 0) break;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  // SA_RESETHAND made the action the default: the re-raised signal (or the faulting instruction, re-executed on
  // return) kills the process.
  raise(signo);
}

void install_child_signals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  stack_t ss{};
  ss.ss_sp = g_alt_stack;
  ss.ss_size = sizeof g_alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int s : kFatalSignals) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

/// Closes every inherited descriptor but stdio and ours (other plugins' sockets would keep them from seeing EOF).
void close_other_fds(int a, int b) {
  if (a > b) std::swap(a, b);
  const auto ua = static_cast<unsigned>(a), ub = static_cast<unsigned>(b);
  if (ua > 3) close_range(3, ua - 1, 0);
  if (ub > ua + 1) close_range(ua + 1, ub - 1, 0);
  close_range(ub + 1, ~0U, 0);
}

/// The process's mapped address space in bytes (VmSize).
std::uint64_t address_space_bytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
  std::fclose(f);
  return pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

void set_soft_as_limit(rlim_t soft) {
  rlimit lim{};
  getrlimit(RLIMIT_AS, &lim);
  lim.rlim_cur = std::min(soft, lim.rlim_max);
  setrlimit(RLIMIT_AS, &lim);
}

/// Runs one request; the reply is a kReturned one (a fatal signal never gets here).
wire::Reply serve_call(const wire::Request &req, const attncheck_kernel &k, int memfd) {
  wire::Reply rep;
  std::memset(&rep, 0, sizeof rep);
  rep.magic = wire::kMagic;
  rep.type = wire::kReturned;
  set_soft_as_limit(RLIM_INFINITY);  // the previous call's limit must not stop this mapping
  void *mem = mmap(nullptr, req.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (mem == MAP_FAILED) {
    rep.status = ATTNCHECK_ERROR;
    std::snprintf(rep.message, sizeof rep.message, "sandbox: the child cannot map %llu bytes of tensors: %s",
                  static_cast<unsigned long long>(req.shm_bytes), std::strerror(errno));
    return rep;
  }
  auto *base = static_cast<std::byte *>(mem);
  DLTensor t[wire::kMaxTensors];
  std::int64_t shapes[wire::kMaxTensors][wire::kMaxRank], strides[wire::kMaxTensors][wire::kMaxRank];
  DLTensor *arg[wire::kMaxTensors];
  for (int i = 0; i < wire::kMaxTensors; ++i) {
    const wire::Tensor &w = req.tensors[i];
    arg[i] = nullptr;
    if (!w.present) continue;
    mprotect(base + w.lead_guard, req.page, PROT_NONE);
    mprotect(base + w.trail_guard, req.page, PROT_NONE);
    std::memcpy(shapes[i], w.shape, sizeof w.shape);
    std::memcpy(strides[i], w.strides, sizeof w.strides);
    t[i] = DLTensor{base + w.elem0, w.device, w.ndim, w.dtype, shapes[i], strides[i], 0};
    arg[i] = &t[i];
  }
  g_shm_base = reinterpret_cast<std::uintptr_t>(base);
  g_shm_bytes = req.shm_bytes;
  set_soft_as_limit(static_cast<rlim_t>(address_space_bytes() + req.memory_limit_bytes));
  errno = 0;  // so that ENOMEM afterwards means an allocation of this call failed
  if (req.op == wire::kForward)
    rep.status = k.forward(&req.params, arg[0], arg[1], arg[2], arg[3], arg[4]);
  else
    rep.status = k.backward(&req.params, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5], arg[6], arg[7], arg[8]);
  rep.enomem = errno == ENOMEM;
  if (rep.status != ATTNCHECK_OK && k.last_error) copy_message(rep.message, k.last_error());
  set_soft_as_limit(RLIM_INFINITY);
  g_shm_base = 0;
  munmap(mem, req.shm_bytes);
  std::fflush(nullptr);  // the kernel's prints, before the parent goes on
  return rep;
}

[[noreturn]] void serve(int sock, int memfd, const std::string &path, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the parent
  if (getppid() != parent) _exit(0);
  close_other_fds(sock, memfd);
  g_sock = sock;
  install_child_signals();

  wire::Hello hello;
  std::memset(&hello, 0, sizeof hello);
  hello.magic = wire::kMagic;
  // dlopen needs a slash to load a file rather than search the library path.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const attncheck_kernel *ks = nullptr;
  std::int32_t n = 0;
  if (!handle) {
    const char *why = dlerror();
    hello.count = -1;
    std::snprintf(hello.error, sizeof hello.error, "cannot load plugin '%s': %s (is it a shared object built for "
                  "this machine?)", path.c_str(), why ? why : "dlopen failed");
  } else if (auto fn = reinterpret_cast<attncheck_kernels_fn>(dlsym(handle, ATTNCHECK_KERNELS_SYMBOL)); !fn) {
    hello.count = -1;
    std::snprintf(hello.error, sizeof hello.error, "plugin '%s' does not export '" ATTNCHECK_KERNELS_SYMBOL
                  "': define `const attncheck_kernel *attncheck_kernels(int32_t *count)` with C linkage",
                  path.c_str());
  } else {
    ks = fn(&n);
    hello.count = ks ? n : 0;
  }
  if (!send_all(sock, &hello, sizeof hello)) _exit(0);
  if (hello.count <= 0) _exit(0);
  for (std::int32_t i = 0; i < n; ++i) {
    wire::KernelInfo info;
    std::memset(&info, 0, sizeof info);
    info.abi_version = ks[i].abi_version;
    info.has_forward = ks[i].forward != nullptr;
    info.has_backward = ks[i].backward != nullptr;
    info.has_last_error = ks[i].last_error != nullptr;
    const char *name = ks[i].name ? ks[i].name : "";
    std::snprintf(info.name, sizeof info.name, "%s", name);
    info.full_name_len = static_cast<std::int32_t>(std::strlen(name));
    if (!send_all(sock, &info, sizeof info)) _exit(0);
  }

  while (true) {
    wire::Request req;
    if (recv_all(sock, &req, sizeof req, nullptr) != Read::ok || req.magic != wire::kMagic || req.op == wire::kQuit)
      _exit(0);
    wire::Reply rep;
    if (req.kernel < 0 || req.kernel >= n || (req.op == wire::kForward ? !ks[req.kernel].forward
                                                                        : !ks[req.kernel].backward)) {
      std::memset(&rep, 0, sizeof rep);
      rep.magic = wire::kMagic;
      rep.type = wire::kReturned;
      rep.status = ATTNCHECK_ERROR;
      copy_message(rep.message, "sandbox: request for a kernel function the plugin does not have");
    } else {
      rep = serve_call(req, ks[req.kernel], memfd);
    }
    if (!send_all(sock, &rep, sizeof rep)) _exit(0);
  }
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

Server::~Server() { stop(); }

int Server::reap(int grace_ms) {
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pid_ = -1;
  if (sock_ >= 0) close(sock_);
  if (memfd_ >= 0) close(memfd_);
  sock_ = memfd_ = -1;
  return status;
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
    kill(pid_, SIGKILL);
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
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    close(memfd);
    throw SandboxError(std::string("sandbox: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(sv[0]);
    serve(sv[1], memfd, path_, parent);
  }
  close(sv[1]);
  pid_ = pid;
  sock_ = sv[0];
  memfd_ = memfd;
  ++starts_;

  const auto deadline = Clock::now() + options_.timeout;
  auto fail = [&](const std::string &why) -> SandboxError {
    kill(pid_, SIGKILL);
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
      throw SandboxError("plugin '" + path_ + "' crashed while loading: " +
                         (WIFSIGNALED(status) ? signal_name(WTERMSIG(status))
                                              : "exit status " + std::to_string(WEXITSTATUS(status))));
    }
  }
  if (hello.magic != wire::kMagic) throw fail("sandbox: the server's first message is garbled");
  if (hello.count < 0) throw fail(hello.error);
  if (hello.count == 0)
    throw fail("plugin '" + path_ + "' exports no kernels (attncheck_kernels returned 0 kernels)");
  std::vector<KernelDesc> ks;
  for (std::int32_t i = 0; i < hello.count; ++i) {
    wire::KernelInfo info;
    if (recv_all(sock_, &info, sizeof info, &deadline) != Read::ok)
      throw fail("plugin '" + path_ + "': the sandbox server died while listing the kernels");
    info.name[sizeof info.name - 1] = '\0';
    KernelDesc d{info.name, info.abi_version, info.has_forward != 0, info.has_backward != 0,
                 info.has_last_error != 0};
    if (info.full_name_len >= wire::kNameBytes)
      throw fail("plugin '" + path_ + "': kernel #" + std::to_string(i) + " has a name of " +
                 std::to_string(info.full_name_len) + " characters; the sandbox carries at most " +
                 std::to_string(wire::kNameBytes - 1));
    ks.push_back(std::move(d));
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
  const int status = reap(kExitGraceMs);
  Result r;
  CallFault &f = r.fault;
  const std::string limit = std::to_string(options_.memory_limit_mib) + " MiB";
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
  if (ftruncate(memfd_, static_cast<off_t>(staging->bytes())) != 0)
    return protocol(std::string("sandbox: cannot size the shared memory: ") + std::strerror(errno));
  void *mem = mmap(nullptr, staging->bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (mem == MAP_FAILED)
    return protocol(std::string("sandbox: cannot map the shared memory: ") + std::strerror(errno));
  auto *shm = static_cast<std::byte *>(mem);
  struct Unmap {
    void *p;
    std::size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{mem, staging->bytes()};
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
  staging->fill(req);
  if (!send_all(sock_, &req, sizeof req)) return crashed(nullptr, *staging);

  const auto deadline = Clock::now() + options_.timeout;
  wire::Reply rep;
  switch (recv_all(sock_, &rep, sizeof rep, &deadline)) {
    case Read::ok: break;
    case Read::timeout:
      kill(pid_, SIGKILL);
      reap(0);
      r.fault.kind = CallFault::timeout;
      r.fault.message = "did not return within " + std::to_string(options_.timeout.count()) +
                        " ms (a hang?); the sandbox killed it";
      return r;
    default: return crashed(nullptr, *staging);
  }
  if (rep.magic != wire::kMagic) {
    kill(pid_, SIGKILL);
    reap(0);
    return protocol("sandbox: the server's reply is garbled");
  }
  if (rep.type == wire::kSignalled) return crashed(&rep, *staging);
  rep.message[sizeof rep.message - 1] = '\0';
  r.status = rep.status;
  r.message = rep.status == ATTNCHECK_OK ? "" : rep.message;
  if (auto f = staging->check(shm)) {
    r.fault = std::move(*f);
    return r;
  }
  if (rep.status == ATTNCHECK_ERROR && rep.enomem) {
    r.fault.kind = CallFault::memory;
    r.fault.message = "exceeded the memory limit of " + std::to_string(options_.memory_limit_mib) +
                      " MiB (an allocation failed; the kernel returned ATTNCHECK_ERROR" +
                      (r.message.empty() ? "" : ": " + r.message) + ")";
    return r;
  }
  if (rep.status == ATTNCHECK_OK) staging->copy_out(shm);
  return r;
}

}  // namespace attncheck::sandbox
