#include "attncheck/bound_kernel.h"

#include <array>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <utility>

namespace attncheck {

namespace {

struct Slot {
  std::shared_mutex mu;  // calls share it; unbinding waits for them
  KernelBody body;       // empty: free, or unbound while a stale struct still points here
  std::string name;
  bool used = false;
};
std::mutex g_alloc_mu;
std::array<Slot, BoundKernel::kMaxBoundKernels> g_slots;
/// last_error() per slot and per thread: the ABI's last_error has no arguments.
thread_local std::array<std::string, BoundKernel::kMaxBoundKernels> t_last_error;

constexpr const char *kForwardIn[] = {"q", "k", "v"};
constexpr const char *kForwardOut[] = {"out", "lse"};
constexpr const char *kBackwardIn[] = {"q", "k", "v", "out", "lse", "dout"};
constexpr const char *kBackwardOut[] = {"dq", "dk", "dv"};

int run_slot(std::size_t s, const KernelCall &call) {
  Slot &slot = g_slots[s];
  KernelAnswer a{ATTNCHECK_ERROR, "kernel was closed (the object that bound it no longer exists)"};
  {
    std::shared_lock lock(slot.mu);
    if (slot.body) {
      try {
        a = slot.body(call);
      } catch (const std::exception &e) {
        a = {ATTNCHECK_ERROR, slot.name + ": " + e.what()};
      }
    }
  }
  t_last_error[s] = std::move(a.message);
  return a.status;
}

template <std::size_t S>
int forward_tramp(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
                  DLTensor *lse) {
  const DLTensor *in[] = {q, k, v};
  DLTensor *outs[] = {out, lse};
  return run_slot(S, KernelCall{false, *p, in, outs, kForwardIn, kForwardOut});
}

template <std::size_t S>
int backward_tramp(const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v,
                   const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
                   DLTensor *dv) {
  const DLTensor *in[] = {q, k, v, out, lse, dout};
  DLTensor *outs[] = {dq, dk, dv};
  return run_slot(S, KernelCall{true, *p, in, outs, kBackwardIn, kBackwardOut});
}

template <std::size_t S>
const char *last_error_tramp() {
  return t_last_error[S].c_str();
}

struct Trampolines {
  decltype(&forward_tramp<0>) forward;
  decltype(&backward_tramp<0>) backward;
  decltype(&last_error_tramp<0>) last_error;
};
template <std::size_t... S>
constexpr std::array<Trampolines, sizeof...(S)> make_trampolines(std::index_sequence<S...>) {
  return {Trampolines{&forward_tramp<S>, &backward_tramp<S>, &last_error_tramp<S>}...};
}
constexpr auto kTrampolines = make_trampolines(std::make_index_sequence<BoundKernel::kMaxBoundKernels>{});

}  // namespace

BoundKernel::BoundKernel(std::string name, KernelBody body, bool has_backward) : name_(std::move(name)) {
  std::lock_guard alloc(g_alloc_mu);
  std::size_t s = 0;
  while (s < kMaxBoundKernels && g_slots[s].used) ++s;
  if (s == kMaxBoundKernels)
    throw std::runtime_error("too many kernels bound at once (at most " + std::to_string(kMaxBoundKernels) +
                             "): close the kernels you no longer need");
  {
    std::unique_lock lock(g_slots[s].mu);
    g_slots[s].body = std::move(body);
    g_slots[s].name = name_;
    g_slots[s].used = true;
  }
  slot_ = s;
  const Trampolines &t = kTrampolines[s];
  abi_ = attncheck_kernel{ATTNCHECK_ABI_VERSION, name_.c_str(), t.forward, has_backward ? t.backward : nullptr,
                          t.last_error};
}

BoundKernel::~BoundKernel() {
  {
    std::unique_lock lock(g_slots[slot_].mu);  // waits for calls in flight
    g_slots[slot_].body = nullptr;
  }
  std::lock_guard alloc(g_alloc_mu);
  g_slots[slot_].used = false;
}

}  // namespace attncheck
