#include "serve.h"

#include "attncheck/tensor.h"

#include "attncheck/contract.h"
#include "attncheck/kernel_abi.h"
#include "io.h"
#include "wire.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace attncheck::sandbox {

namespace {

/// Signals that end a kernel's call; the child reports them (with the fault address) before dying.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
/// Stack for the fatal-signal handler, so that a stack overflow is reported too.
constexpr std::size_t kAltStackBytes = 64 * 1024;

void copy_message(char (&dst)[wire::kMessageBytes], const char *src) {
  std::snprintf(dst, sizeof dst, "%s", src ? src : "");
}


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

/// The process's data segment in bytes (VmData: its private writable mappings, which RLIMIT_DATA counts).
std::uint64_t data_segment_bytes() {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmData: %llu kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024;
}

/// The memory a call may add is what it may write (RLIMIT_DATA), not what it maps: mapped libraries and PROT_NONE
/// reservations do not count.
void set_soft_data_limit(rlim_t soft) {
  rlimit lim{};
  getrlimit(RLIMIT_DATA, &lim);
  lim.rlim_cur = std::min(soft, lim.rlim_max);
  setrlimit(RLIMIT_DATA, &lim);
}

/// The child's view of one tensor of the shared memory, its guard pages made PROT_NONE.
struct Rebuilt {
  DLTensor t{};
  std::int64_t shape[wire::kMaxRank], strides[wire::kMaxRank];
  /// nullptr when the message does not carry it.
  DLTensor *rebuild(const wire::Tensor &w, std::byte *base, std::uint64_t page) {
    if (!w.present) return nullptr;
    mprotect(base + w.lead_guard, page, PROT_NONE);
    mprotect(base + w.trail_guard, page, PROT_NONE);
    std::memcpy(shape, w.shape, sizeof w.shape);
    std::memcpy(strides, w.strides, sizeof w.strides);
    // As DLPack specifies: `data` 256-byte aligned, the first element at data + byte_offset. The tensor itself
    // stays flush against its trailing guard page; `data` may point into the leading one (never dereferenced by a
    // kernel that honours byte_offset).
    const auto first = reinterpret_cast<std::uintptr_t>(base + w.elem0);
    const std::uintptr_t aligned = first & ~static_cast<std::uintptr_t>(kDLPackAlignment - 1);
    t = DLTensor{reinterpret_cast<void *>(aligned), w.device, w.ndim, w.dtype, shape, strides,
                 static_cast<std::uint64_t>(first - aligned)};
    return &t;
  }
};

/// Runs one request (with its Args message when it has one, ABI 1.2); the reply is a kReturned one (a fatal signal
/// never gets here).
wire::Reply serve_call(const wire::Request &req, const wire::Args *extra, const attncheck_kernel &k, int memfd) {
  wire::Reply rep;
  std::memset(&rep, 0, sizeof rep);
  rep.magic = wire::kMagic;
  rep.type = wire::kReturned;
  set_soft_data_limit(RLIM_INFINITY);  // the previous call's limit must not stop this call's own allocations
  void *mem = mmap(nullptr, req.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (mem == MAP_FAILED) {
    rep.status = ATTNCHECK_ERROR;
    std::snprintf(rep.message, sizeof rep.message, "sandbox: the child cannot map %llu bytes of tensors: %s",
                  static_cast<unsigned long long>(req.shm_bytes), std::strerror(errno));
    return rep;
  }
  auto *base = static_cast<std::byte *>(mem);
  Rebuilt t[wire::kMaxTensors];
  DLTensor *arg[wire::kMaxTensors];
  for (int i = 0; i < wire::kMaxTensors; ++i) arg[i] = t[i].rebuild(req.tensors[i], base, req.page);
  attncheck_params params = req.params;
  attncheck_args args;
  Rebuilt at[wire::kMaxArgTensors];
  if (extra) {
    args = extra->scalars;
    for (int i = 0; i < wire::kMaxArgTensors; ++i)
      wire::set_arg_tensor(args, i, at[i].rebuild(extra->tensors[i], base, req.page));
    params.args = &args;
  } else {
    params.args = nullptr;
  }
  g_shm_base = reinterpret_cast<std::uintptr_t>(base);
  g_shm_bytes = req.shm_bytes;
  set_soft_data_limit(static_cast<rlim_t>(data_segment_bytes() + req.memory_limit_bytes));
  errno = 0;  // so that ENOMEM afterwards means an allocation of this call failed
  if (req.op == wire::kForward)
    rep.status = k.forward(&params, arg[0], arg[1], arg[2], arg[3], arg[4]);
  else
    rep.status = k.backward(&params, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5], arg[6], arg[7], arg[8]);
  rep.enomem = errno == ENOMEM;
  if (rep.status != ATTNCHECK_OK && k.last_error) copy_message(rep.message, k.last_error());
  set_soft_data_limit(RLIM_INFINITY);
  g_shm_base = 0;
  munmap(mem, req.shm_bytes);
  std::fflush(nullptr);  // the kernel's prints, before the parent goes on
  return rep;
}

}  // namespace

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
  std::vector<std::string> contracts;
  std::string contract_error;
  if (hello.count > 0) {
    try {
      contracts = declared_contracts(
          ks, n, reinterpret_cast<attncheck_contracts_fn>(dlsym(handle, ATTNCHECK_CONTRACTS_SYMBOL)));
    } catch (const ContractError &e) {
      contract_error = e.what();
      contracts.assign(static_cast<std::size_t>(n), "");
    }
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
    const std::string &contract = contracts[static_cast<std::size_t>(i)];
    std::snprintf(info.contract, sizeof info.contract, "%s", contract.c_str());
    info.full_contract_len = static_cast<std::int32_t>(contract.size());
    std::snprintf(info.contract_error, sizeof info.contract_error, "%s", contract_error.c_str());
    if (!send_all(sock, &info, sizeof info)) _exit(0);
  }

  while (true) {
    wire::Request req;
    if (recv_all(sock, &req, sizeof req, nullptr) != Read::ok || req.magic != wire::kMagic || req.op == wire::kQuit)
      _exit(0);
    wire::Args extra;
    const bool has_args = req.params.args != nullptr;
    if (has_args && (recv_all(sock, &extra, sizeof extra, nullptr) != Read::ok || extra.magic != wire::kMagic))
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
      rep = serve_call(req, has_args ? &extra : nullptr, ks[req.kernel], memfd);
    }
    if (!send_all(sock, &rep, sizeof rep)) _exit(0);
  }
}

}  // namespace attncheck::sandbox
