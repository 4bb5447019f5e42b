#include "attncheck/kernel_call.h"

#include <algorithm>
#include <stdexcept>

namespace attncheck {

namespace {
thread_local std::optional<std::chrono::milliseconds> t_call_timeout;
}  // namespace

CallTimeout::CallTimeout(std::chrono::milliseconds limit) : previous_(t_call_timeout) { t_call_timeout = limit; }
CallTimeout::~CallTimeout() { t_call_timeout = previous_; }
std::chrono::milliseconds CallTimeout::current(std::chrono::milliseconds own) {
  return t_call_timeout ? std::min(*t_call_timeout, own) : own;
}

CallRecord &CallRecord::of_this_thread() {
  thread_local CallRecord record;
  return record;
}

Tensor make_out(const Shape &s, Dtype dt) { return Tensor::contiguous(dt, {s.B, s.Hq, s.Lq, s.Dv}); }
Tensor make_lse(const Shape &s) { return Tensor::contiguous(Dtype::f32, {s.B, s.Hq, s.Lq}); }

namespace {
CallResult finish(const attncheck_kernel &kernel, int status) {
  CallResult r{status, {}};
  if (status != ATTNCHECK_OK && kernel.last_error) {
    const char *msg = kernel.last_error();
    if (msg) r.message = msg;
  }
  return r;
}
}  // namespace

CallResult call_forward(const attncheck_kernel &kernel, const Problem &p, Tensor &out, Tensor *lse) {
  const attncheck_params params = p.params.to_abi();
  const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl();
  DLTensor o = out.dl();
  DLTensor l{};
  if (lse) l = lse->dl();
  return finish(kernel, kernel.forward(&params, &q, &k, &v, &o, lse ? &l : nullptr));
}

CallResult call_backward(const attncheck_kernel &kernel, const Problem &p, const Tensor &out, const Tensor *lse,
                         Tensor &dq, Tensor &dk, Tensor &dv) {
  if (!kernel.backward) return CallResult{ATTNCHECK_UNSUPPORTED, "kernel has no backward"};
  if (!p.dout) throw std::invalid_argument("call_backward: the problem has no dout");
  const attncheck_params params = p.params.to_abi();
  const DLTensor q = p.q.dl(), k = p.k.dl(), v = p.v.dl(), o = out.dl(), dout = p.dout->dl();
  DLTensor l{};
  if (lse) l = lse->dl();
  DLTensor gq = dq.dl(), gk = dk.dl(), gv = dv.dl();
  return finish(kernel, kernel.backward(&params, &q, &k, &v, &o, lse ? &l : nullptr, &dout, &gq, &gk, &gv));
}

}  // namespace attncheck
