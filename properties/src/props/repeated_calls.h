// Shared by determinism and bitwise_determinism: the same inputs, three times. The forward runs twice into
// NaN-filled outputs and once into outputs pre-filled with garbage; with a backward, so does the backward (all
// three given the first forward's O and LSE). What must agree, and how closely, is the kernel's contract's
// (forward-determinism, backward-determinism): bitwise, or within the error bound.
#pragma once

#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attncheck::props::repeated {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
/// A modest garbage value: accumulating onto it gives a finite, plainly wrong result.
inline constexpr double kGarbage = 7;

/// dout, for kernels that have a backward; the declared features now and then (a path only a feature takes).
inline void require(CaseOptions &o) {
  o.backward = true;
  o.declared_features = true;
}

/// The garbage written over output elements before the third call: kGarbage, the dtype's largest finite values,
/// −0 and ±∞, cycling (each rounded to the dtype by Tensor::set). Padding stays NaN so that Ladder::intact applies.
inline void fill_garbage(Tensor &t) {
  const double big = max_finite(t.dtype());
  const std::array<double, 6> pattern{kGarbage, big, -big, -0.0, kInf, -kInf};
  std::size_t n = 0;
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, pattern[n++ % pattern.size()]); });
}

/// One output tensor of the three calls.
struct Triple {
  std::string name;
  const Tensor *first, *second, *garbage;
  bool backward;  ///< an output of the backward (judged by backward-determinism)
};

/// The three forward and (when the kernel has one and does not decline) three backward calls.
struct Calls {
  ForwardRun f1, f2, f3;
  std::optional<BackwardRun> b1, b2, b3;
  std::vector<Triple> outputs;  ///< O, LSE (when the kernel returns one), dQ, dK, dV
};

/// Runs the calls; false (with the ladder's outcome set) when a call failed, declined or wrote outside.
inline bool run_calls(const Env &env, const Problem &p, Ladder &L, Calls &c) {
  auto forward_ok = [&](const ForwardRun &r, const std::string &what) {
    return L.call(r.call, what) && L.intact(r.out, "O") && L.intact(r.lse, "LSE");
  };
  c.f1 = run_forward(env, p);
  if (!forward_ok(c.f1, "forward")) return false;
  c.f2 = run_forward(env, p);
  if (!forward_ok(c.f2, "forward (second call)")) return false;
  c.f3 = c.f1;  // the same layouts and LSE dtype, refilled with garbage
  c.f3.out.fill_storage(kNaN);
  fill_garbage(c.f3.out);
  if (c.f3.has_lse) {
    c.f3.lse.fill_storage(kNaN);
    fill_garbage(c.f3.lse);
  }
  c.f3.call = call_forward(env.kernel, p, c.f3.out, c.f3.has_lse ? &c.f3.lse : nullptr);
  if (!forward_ok(c.f3, "forward (garbage-filled outputs)")) return false;
  c.outputs = {{"O", &c.f1.out, &c.f2.out, &c.f3.out, false}};
  if (c.f1.has_lse) c.outputs.push_back({"LSE", &c.f1.lse, &c.f2.lse, &c.f3.lse, false});

  if (env.kernel.backward == nullptr || !p.dout) return true;
  auto backward_ok = [&](const BackwardRun &r, const std::string &what) {
    return L.call(r.call, what) && L.intact(r.dq, "dQ") && L.intact(r.dk, "dK") && L.intact(r.dv, "dV");
  };
  c.b1 = run_backward(env, p, c.f1);
  if (c.b1->call.status == ATTNCHECK_UNSUPPORTED) {  // still checked on its forward
    c.b1.reset();
    return true;
  }
  if (!backward_ok(*c.b1, "backward")) return false;
  c.b2 = run_backward(env, p, c.f1);
  if (!backward_ok(*c.b2, "backward (second call)")) return false;
  c.b3 = *c.b1;
  for (Tensor *t : {&c.b3->dq, &c.b3->dk, &c.b3->dv}) {
    t->fill_storage(kNaN);
    fill_garbage(*t);
  }
  c.b3->call = call_backward(env.kernel, p, c.f1.out, c.f1.has_lse ? &c.f1.lse : nullptr, c.b3->dq, c.b3->dk,
                             c.b3->dv);
  if (!backward_ok(*c.b3, "backward (garbage-filled outputs)")) return false;
  c.outputs.push_back({"dQ", &c.b1->dq, &c.b2->dq, &c.b3->dq, true});
  c.outputs.push_back({"dK", &c.b1->dk, &c.b2->dk, &c.b3->dk, true});
  c.outputs.push_back({"dV", &c.b1->dv, &c.b2->dv, &c.b3->dv, true});
  return true;
}

/// The later calls of `t` against the first. `bound` empty: every bit (step finite where exactly one of the two is
/// NaN, step values for any other difference); else |a − b| ≤ 2·bound element-wise at step values (the triangle
/// inequality through the exact value: each call within its bound).
inline bool agree(Ladder &L, const Triple &t, Step step, const std::vector<double> &bound) {
  const std::vector<double> a = t.first->to_vector();
  for (const auto &[other, what] : {std::pair{t.second, "a second call"},
                                    std::pair{t.garbage, "a call into garbage-filled outputs"}}) {
    const std::vector<double> b = other->to_vector();
    if (!bound.empty() && step == Step::values) {
      std::vector<double> twice(bound.size());
      for (std::size_t x = 0; x < bound.size(); ++x) twice[x] = 2 * bound[x];
      if (!L.within(step, t.name + " (" + what + ")", b, a, twice, t.first->shape())) return false;
      continue;
    }
    for (std::size_t x = 0; x < a.size(); ++x) {
      const bool differs = step == Step::finite ? std::isnan(a[x]) != std::isnan(b[x]) : !same_bits(a[x], b[x]);
      if (differs)
        return L.fail(step,
                      element_name(t.name, t.first->shape(), static_cast<std::int64_t>(x)) + ": " +
                          hex_and_decimal(a[x]) + " from the first call (NaN-filled outputs), " +
                          hex_and_decimal(b[x]) + " from " + what + " on the same inputs",
                      element_finding(Finding::Kind::changed, t.name, t.first->shape(),
                                      static_cast<std::int64_t>(x), b[x], a[x]));
    }
  }
  return true;
}

/// Whether the contract promises `t`'s output bitwise.
inline bool promised_bitwise(const KernelContract &k, const Triple &t) {
  return (t.backward ? k.backward_determinism : k.forward_determinism) == Determinism::bitwise;
}

}  // namespace attncheck::props::repeated
