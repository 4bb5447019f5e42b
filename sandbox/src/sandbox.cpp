// The public face: sandboxed kernels as ordinary attncheck_kernel structs. Their function pointers are
// trampolines, one set per slot of a fixed table; a slot names the SandboxedPlugin and kernel it stands for.
#include "attncheck/sandbox.h"

#include "attncheck/kernel_call.h"
#include "server.h"

#include <array>
#include <mutex>
#include <set>
#include <utility>

namespace attncheck::sandbox {

std::string_view fault_kind_name(CallFault::Kind k) {
  switch (k) {
    case CallFault::none: return "none";
    case CallFault::signal: return "signal";
    case CallFault::timeout: return "timeout";
    case CallFault::memory: return "memory";
    case CallFault::wrote_input: return "wrote_input";
    case CallFault::wrote_outside: return "wrote_outside";
    case CallFault::protocol: return "protocol";
  }
  return "?";
}

struct SandboxedPlugin::Impl {
  std::string path;
  Server server;
  std::mutex mu;  // one call at a time: the server is one process
  std::vector<std::string> names;
  std::vector<std::string> contracts;
  std::vector<attncheck_kernel> kernels;
  std::vector<std::size_t> slots;
  std::vector<CallFault> faults;
  std::vector<std::string> messages;  // what last_error() returns, per kernel

  Impl(const std::string &p, SandboxOptions o) : path(p), server(p, o) {}
  ~Impl();
  int call(std::size_t index, wire::Op op, const attncheck_params *params, std::vector<Arg> args) {
    std::lock_guard lock(mu);
    Server::Result r = server.call(op, static_cast<int>(index), *params, args);
    faults[index] = r.fault;
    if (r.fault.kind == CallFault::memory) ++CallRecord::of_this_thread().memory_faults;
    messages[index] = r.fault ? r.fault.message : r.message;
    return r.fault ? ATTNCHECK_ERROR : r.status;
  }
};

namespace {

/// Sandboxed kernels that can be alive at once (each needs its own trampolines).
constexpr std::size_t kMaxSlots = 256;

struct Slot {
  SandboxedPlugin::Impl *impl = nullptr;
  std::size_t index = 0;
};
std::mutex g_slots_mu;
std::array<Slot, kMaxSlots> g_slots;

Slot slot(std::size_t i) {
  std::lock_guard lock(g_slots_mu);
  return g_slots[i];
}

/// The call's arguments: the kernel's tensors and, for a call with ABI 1.2 args, the args tensors after them (forward
/// writes dropout_mask, backward reads it). A call without args carries exactly what it did before ABI 1.2.
std::vector<Arg> with_args(std::vector<Arg> core, const attncheck_params *params, bool forward) {
  if (!params->args) return core;
  core.resize(static_cast<std::size_t>(wire::kMaxTensors), Arg{"", nullptr, nullptr});
  const attncheck_args a = wire::read_args(*params->args);
  for (int i = 0; i < wire::kMaxArgTensors; ++i) {
    DLTensor *writes = forward && i == wire::kDropoutMaskArg ? a.dropout_mask : nullptr;
    core.push_back(Arg{wire::kArgTensorNames[i], wire::arg_tensor(a, i), writes});
  }
  return core;
}

template <std::size_t I>
int forward_trampoline(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                       DLTensor *out, DLTensor *lse) {
  const Slot s = slot(I);
  return s.impl->call(s.index, wire::kForward, params,
                      with_args({{"q", q, nullptr}, {"k", k, nullptr}, {"v", v, nullptr}, {"out", out, out},
                                 {"lse", lse, lse}},
                                params, true));
}

template <std::size_t I>
int backward_trampoline(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                        const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq,
                        DLTensor *dk, DLTensor *dv) {
  const Slot s = slot(I);
  return s.impl->call(s.index, wire::kBackward, params,
                      with_args({{"q", q, nullptr}, {"k", k, nullptr}, {"v", v, nullptr}, {"out", out, nullptr},
                                 {"lse", lse, nullptr}, {"dout", dout, nullptr}, {"dq", dq, dq}, {"dk", dk, dk},
                                 {"dv", dv, dv}},
                                params, false));
}

template <std::size_t I>
const char *last_error_trampoline() {
  const Slot s = slot(I);
  const std::string &m = s.impl->messages[s.index];
  return m.empty() ? nullptr : m.c_str();
}

struct Trampolines {
  decltype(&forward_trampoline<0>) forward;
  decltype(&backward_trampoline<0>) backward;
  decltype(&last_error_trampoline<0>) last_error;
};
template <std::size_t... I>
constexpr std::array<Trampolines, sizeof...(I)> make_trampolines(std::index_sequence<I...>) {
  return {Trampolines{&forward_trampoline<I>, &backward_trampoline<I>, &last_error_trampoline<I>}...};
}
constexpr auto kTrampolines = make_trampolines(std::make_index_sequence<kMaxSlots>{});

}  // namespace

SandboxedPlugin::Impl::~Impl() {
  std::lock_guard lock(g_slots_mu);
  for (std::size_t s : slots) g_slots[s] = Slot{};
}

SandboxedPlugin SandboxedPlugin::load(const std::string &path, SandboxOptions options) {
  auto impl = std::make_unique<Impl>(path, options);
  const std::vector<KernelDesc> ks = impl->server.start();
  // The checks the CLI's in-process loader makes (cli/plugin.cpp), with its wording.
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const KernelDesc &k = ks[i];
    if (k.abi_version != ATTNCHECK_ABI_VERSION)
      throw SandboxError("plugin '" + path + "': kernel '" + k.name + "' has ABI version " +
                         std::to_string(k.abi_version) + ", this attncheck speaks version " +
                         std::to_string(ATTNCHECK_ABI_VERSION) + ": rebuild the plugin against this kernel_abi.h");
    if (k.name.empty() || !k.has_forward || !seen.insert(k.name).second)
      throw SandboxError("plugin '" + path + "': kernel #" + std::to_string(i) +
                         (k.name.empty() ? " has no name" : !k.has_forward ? " ('" + k.name + "') has no forward"
                                                                           : " repeats the name '" + k.name + "'") +
                         ": every kernel needs a unique name and a forward function");
  }
  impl->names.reserve(ks.size());  // kernels[i].name points into names: no reallocation after this
  for (const KernelDesc &k : ks) {
    impl->names.push_back(k.name);
    impl->contracts.push_back(k.contract);
  }
  impl->faults.resize(ks.size());
  impl->messages.resize(ks.size());
  {
    std::lock_guard lock(g_slots_mu);
    for (std::size_t i = 0; i < ks.size(); ++i) {
      std::size_t s = 0;
      while (s < kMaxSlots && g_slots[s].impl) ++s;
      if (s == kMaxSlots) {
        for (std::size_t taken : impl->slots) g_slots[taken] = Slot{};
        impl->slots.clear();
        throw SandboxError("sandbox: more than " + std::to_string(kMaxSlots) +
                           " sandboxed kernels at once; unload a plugin first");
      }
      g_slots[s] = Slot{impl.get(), i};
      impl->slots.push_back(s);
      const Trampolines &t = kTrampolines[s];
      impl->kernels.push_back(attncheck_kernel{ATTNCHECK_ABI_VERSION, impl->names[i].c_str(), t.forward,
                                               ks[i].has_backward ? t.backward : nullptr, t.last_error});
    }
  }
  return SandboxedPlugin(std::move(impl));
}

SandboxedPlugin::SandboxedPlugin(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SandboxedPlugin::SandboxedPlugin(SandboxedPlugin &&) noexcept = default;
SandboxedPlugin &SandboxedPlugin::operator=(SandboxedPlugin &&) noexcept = default;
SandboxedPlugin::~SandboxedPlugin() = default;

std::span<const attncheck_kernel> SandboxedPlugin::kernels() const { return impl_->kernels; }

const attncheck_kernel &SandboxedPlugin::find(const std::string &name) const {
  std::string known;
  for (const attncheck_kernel &k : impl_->kernels) {
    if (name == k.name) return k;
    known += (known.empty() ? "" : ", ") + std::string(k.name);
  }
  throw SandboxError("no kernel named '" + name + "' in plugin '" + impl_->path + "'; it has: " + known);
}

const CallFault &SandboxedPlugin::last_fault(std::size_t index) const { return impl_->faults.at(index); }
const std::string &SandboxedPlugin::contract(std::size_t index) const { return impl_->contracts.at(index); }
const std::string &SandboxedPlugin::path() const { return impl_->path; }
int SandboxedPlugin::server_starts() const { return impl_->server.starts(); }

const CallFault *last_fault(const attncheck_kernel &kernel) {
  std::lock_guard lock(g_slots_mu);
  for (std::size_t s = 0; s < kMaxSlots; ++s)
    if (g_slots[s].impl && kTrampolines[s].forward == kernel.forward)
      return &g_slots[s].impl->faults[g_slots[s].index];
  return nullptr;
}

}  // namespace attncheck::sandbox
