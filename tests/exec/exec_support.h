// Helpers of the exec tests: the interpreters and scripts CMake found, quiet ExecOptions, and random problems in
// random layouts.
#pragma once

#include "attncheck/exec_kernel.h"
#include "attncheck/kernel_call.h"
#include "attncheck/problem.h"

#include <chrono>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace exect {

using namespace attncheck;

/// `python3 script args` as a shell command, paths quoted.
inline std::string python_command(const char *python, const char *script, const std::string &args = "") {
  std::string cmd = shell_quote(python) + " " + shell_quote(script);
  if (!args.empty()) cmd.append(" ").append(args);
  return cmd;
}
/// A misbehaving peer (tests/exec/peer.py MODE ARG).
inline std::string peer(const std::string &mode, const std::string &arg = "") {
  std::string args = mode;
  if (!arg.empty()) args.append(" ").append(shell_quote(arg));
  return python_command(ATTNCHECK_TEST_PYTHON, ATTNCHECK_EXEC_PEER, args);
}
#if ATTNCHECK_HAVE_NUMPY
/// examples/exec/numpy_kernel.py with `args`.
inline std::string numpy_kernel(const std::string &args = "") {
  return python_command(ATTNCHECK_NUMPY_PYTHON, ATTNCHECK_NUMPY_KERNEL, args);
}
#endif

/// Timeout of the tests that wait for a peer that never answers.
inline constexpr std::chrono::milliseconds kShortTimeout{1000};

/// Options that collect the child's stderr instead of printing it.
struct Quiet {
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  ExecOptions options(std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000)) const {
    ExecOptions o;
    o.start_timeout = o.call_timeout = timeout;
    o.on_stderr = [l = lines, m = mu](std::string_view s) {
      std::lock_guard lock(*m);
      l->emplace_back(s);
    };
    return o;
  }
};

inline constexpr Layout kLayouts[] = {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
inline constexpr std::int64_t kPad = 3;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A rank-4 tensor in a random layout with padding, all storage NaN.
inline Tensor random_layout_tensor(std::mt19937_64 &rng, Dtype dt, std::vector<std::int64_t> shape) {
  Tensor t = Tensor::with_layout(dt, std::move(shape), kLayouts[rng() % std::size(kLayouts)], kPad);
  t.fill_storage(kNaN);
  return t;
}

inline void fill_normal(std::mt19937_64 &rng, Tensor &t) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (double &x : v) x = nd(rng);
  t.assign(v);
}

/// A problem with N(0,1) inputs and dout in random layouts.
inline Problem make_problem(std::mt19937_64 &rng, Dtype dt, const Shape &s, Mask mask) {
  Problem p;
  p.shape = s;
  p.params = Params{default_scale(s.D), mask};
  p.q = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.D});
  p.k = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.D});
  p.v = random_layout_tensor(rng, dt, {s.B, s.Hkv, s.Lk, s.Dv});
  p.dout = random_layout_tensor(rng, dt, {s.B, s.Hq, s.Lq, s.Dv});
  for (Tensor *t : {&p.q, &p.k, &p.v, &*p.dout}) fill_normal(rng, *t);
  return p;
}

/// A kernel's results in random layouts, pre-filled with NaN.
struct Outputs {
  Tensor out, lse, dq, dk, dv;
  Outputs(std::mt19937_64 &rng, const Problem &p) {
    const Shape &s = p.shape;
    out = random_layout_tensor(rng, p.dtype(), {s.B, s.Hq, s.Lq, s.Dv});
    lse = make_lse(s);
    lse.fill_storage(kNaN);
    dq = random_layout_tensor(rng, p.dtype(), {s.B, s.Hq, s.Lq, s.D});
    dk = random_layout_tensor(rng, p.dtype(), {s.B, s.Hkv, s.Lk, s.D});
    dv = random_layout_tensor(rng, p.dtype(), {s.B, s.Hkv, s.Lk, s.Dv});
  }
};

/// Forward, then backward on forward's out and lse; the first non-OK result, or OK.
inline CallResult run(const attncheck_kernel &k, const Problem &p, Outputs &o) {
  CallResult r = call_forward(k, p, o.out, &o.lse);
  if (!r.ok()) return r;
  return call_backward(k, p, o.out, &o.lse, o.dq, o.dk, o.dv);
}

}  // namespace exect
