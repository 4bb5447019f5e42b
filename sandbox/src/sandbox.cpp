// The public face: sandboxed kernels as ordinary attncheck_kernel structs, bound (bound_kernel.h) to their plugin's
// server.
#include "attncheck/sandbox.h"

#include "attncheck/bound_kernel.h"
#include "attncheck/kernel_call.h"
#include "server.h"

#include <map>
#include <memory>
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
  std::vector<attncheck_kernel> kernels;  // copies of bound's, contiguous for kernels()
  std::vector<CallFault> faults;
  /// Last: unbound first (waiting for calls in flight) when the Impl goes.
  std::vector<std::unique_ptr<BoundKernel>> bound;

  Impl(const std::string &p, SandboxOptions o) : path(p), server(p, o) {}
  ~Impl();
  KernelAnswer call(std::size_t index, wire::Op op, const attncheck_params *params, std::vector<Arg> args) {
    std::lock_guard lock(mu);
    Server::Result r = server.call(op, static_cast<int>(index), *params, args);
    faults[index] = r.fault;
    if (r.fault.kind == CallFault::memory) ++CallRecord::of_this_thread().memory_faults;
    return {r.fault ? ATTNCHECK_ERROR : r.status, r.fault ? r.fault.message : r.message};
  }
};

namespace {

/// Which plugin and kernel each bound forward function stands for: last_fault(kernel) looks them up.
std::mutex g_faults_mu;
std::map<decltype(attncheck_kernel::forward), std::pair<const SandboxedPlugin::Impl *, std::size_t>> g_by_forward;

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

/// The sandbox arguments of a bound call: each tensor with what the child may write back into it.
std::vector<Arg> args_of(const KernelCall &c) {
  std::vector<Arg> args;
  for (std::size_t i = 0; i < c.in.size(); ++i) args.push_back({c.in_names[i], c.in[i], nullptr});
  for (std::size_t i = 0; i < c.out.size(); ++i) args.push_back({c.out_names[i], c.out[i], c.out[i]});
  return with_args(std::move(args), &c.params, !c.backward);
}

}  // namespace

SandboxedPlugin::Impl::~Impl() {
  std::lock_guard lock(g_faults_mu);
  for (const attncheck_kernel &k : kernels) g_by_forward.erase(k.forward);
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
  Impl *self = impl.get();
  try {
    for (std::size_t i = 0; i < ks.size(); ++i) {
      impl->bound.push_back(std::make_unique<BoundKernel>(
          impl->names[i],
          [self, i](const KernelCall &c) {
            return self->call(i, c.backward ? wire::kBackward : wire::kForward, &c.params, args_of(c));
          },
          ks[i].has_backward));
      impl->kernels.push_back(impl->bound.back()->kernel());
    }
  } catch (const std::runtime_error &e) {  // every slot taken
    throw SandboxError(std::string("sandbox: ") + e.what());
  }
  {
    std::lock_guard lock(g_faults_mu);
    for (std::size_t i = 0; i < ks.size(); ++i) g_by_forward[impl->kernels[i].forward] = {self, i};
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
  std::lock_guard lock(g_faults_mu);
  const auto it = g_by_forward.find(kernel.forward);
  return it == g_by_forward.end() ? nullptr : &it->second.first->faults[it->second.second];
}

}  // namespace attncheck::sandbox
