// determinism: the same inputs give the same bits (SPEC.md §3: "must give the same bits for the same inputs", "must
// not depend on what out held before"). The forward runs three times — twice into NaN-filled outputs, once into
// outputs pre-filled with garbage — and O, LSE must be bit-identical across the three; with a backward, dQ, dK, dV
// likewise (all three backward calls given the first forward's O and LSE).
//
// A difference where one result is NaN and the other is not fails the finite step (typically an output accumulated
// onto, or never written over, what the buffer held); any other bit difference fails the values step.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace attncheck::props {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
/// A modest garbage value: accumulating onto it gives a finite, plainly wrong result.
constexpr double kGarbage = 7;

void require(CaseOptions &o) { o.backward = true; }  // dout, for kernels that have a backward

/// The garbage written over output elements before the third call: kGarbage, the dtype's largest finite values,
/// −0 and ±∞, cycling (each rounded to the dtype by Tensor::set). Padding stays NaN so that Ladder::intact applies.
void fill_garbage(Tensor &t) {
  const double big = max_finite(t.dtype());
  const std::array<double, 6> pattern{kGarbage, big, -big, -0.0, kInf, -kInf};
  std::size_t n = 0;
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { t.set(idx, pattern[n++ % pattern.size()]); });
}

/// A forward into garbage-filled outputs of the same layout as run_forward's.
ForwardRun forward_into_garbage(const Env &env, const Problem &p, const ForwardRun &like) {
  ForwardRun r{.call = {}, .out = like.out, .lse = like.lse};
  r.out.fill_storage(kNaN);
  r.lse.fill_storage(kNaN);
  fill_garbage(r.out);
  fill_garbage(r.lse);
  r.call = call_forward(env.kernel, p, r.out, &r.lse);
  return r;
}

/// A backward into garbage-filled gradients of the same layout as run_backward's.
BackwardRun backward_into_garbage(const Env &env, const Problem &p, const ForwardRun &fwd, const BackwardRun &like) {
  BackwardRun r{.call = {}, .dq = like.dq, .dk = like.dk, .dv = like.dv};
  for (Tensor *t : {&r.dq, &r.dk, &r.dv}) {
    t->fill_storage(kNaN);
    fill_garbage(*t);
  }
  r.call = call_backward(env.kernel, p, fwd.out, &fwd.lse, r.dq, r.dk, r.dv);
  return r;
}

/// One output tensor of the three calls.
struct Triple {
  std::string name;
  const Tensor *first, *second, *garbage;
};

/// Fails at the first element where call `other` differs from the first call: at step finite only where exactly
/// one of the two is NaN, at step values for any bit difference.
bool compare(Ladder &L, const Triple &t, Step step) {
  const std::vector<double> a = t.first->to_vector();
  for (const auto &[other, what] : {std::pair{t.second, "a second call"},
                                    std::pair{t.garbage, "a call into garbage-filled outputs"}}) {
    const std::vector<double> b = other->to_vector();
    for (std::size_t x = 0; x < a.size(); ++x) {
      const bool differs = step == Step::finite ? std::isnan(a[x]) != std::isnan(b[x]) : !same_bits(a[x], b[x]);
      if (differs)
        return L.fail(step, element_name(t.name, t.first->shape(), static_cast<std::int64_t>(x)) + ": " +
                                hex_and_decimal(a[x]) + " from the first call (NaN-filled outputs), " +
                                hex_and_decimal(b[x]) + " from " + what + " on the same inputs");
    }
  }
  return true;
}

Outcome run(const Env &env, const Case &c) {
  const Problem p = c.problem();
  Ladder L;
  const ForwardRun f1 = run_forward(env, p);
  if (!L.call(f1.call, "forward") || !L.intact(f1.out, "O") || !L.intact(f1.lse, "LSE")) return L.outcome();
  const ForwardRun f2 = run_forward(env, p);
  if (!L.call(f2.call, "forward (second call)") || !L.intact(f2.out, "O") || !L.intact(f2.lse, "LSE"))
    return L.outcome();
  const ForwardRun f3 = forward_into_garbage(env, p, f1);
  if (!L.call(f3.call, "forward (garbage-filled outputs)") || !L.intact(f3.out, "O") || !L.intact(f3.lse, "LSE"))
    return L.outcome();
  std::vector<Triple> outputs{{"O", &f1.out, &f2.out, &f3.out}, {"LSE", &f1.lse, &f2.lse, &f3.lse}};

  BackwardRun b1, b2, b3;
  if (env.kernel.backward != nullptr && p.dout) {
    b1 = run_backward(env, p, f1);
    // A kernel that declines the backward for this case is still checked on its forward.
    if (b1.call.status != ATTNCHECK_UNSUPPORTED) {
      if (!L.call(b1.call, "backward") || !L.intact(b1.dq, "dQ") || !L.intact(b1.dk, "dK") ||
          !L.intact(b1.dv, "dV"))
        return L.outcome();
      b2 = run_backward(env, p, f1);
      if (!L.call(b2.call, "backward (second call)") || !L.intact(b2.dq, "dQ") || !L.intact(b2.dk, "dK") ||
          !L.intact(b2.dv, "dV"))
        return L.outcome();
      b3 = backward_into_garbage(env, p, f1, b1);
      if (!L.call(b3.call, "backward (garbage-filled outputs)") || !L.intact(b3.dq, "dQ") ||
          !L.intact(b3.dk, "dK") || !L.intact(b3.dv, "dV"))
        return L.outcome();
      outputs.push_back({"dQ", &b1.dq, &b2.dq, &b3.dq});
      outputs.push_back({"dK", &b1.dk, &b2.dk, &b3.dk});
      outputs.push_back({"dV", &b1.dv, &b2.dv, &b3.dv});
    }
  }
  for (const Triple &t : outputs) compare(L, t, Step::finite);
  for (const Triple &t : outputs) compare(L, t, Step::values);
  return L.outcome();
}
}  // namespace

const PropertyDef &determinism_property() {
  static const PropertyDef def{
      .id = "determinism",
      .formula = "f(x) ≡ f(x) bitwise for O, LSE (and dQ, dK, dV): across calls, and whatever the outputs held before",
      .summary = "the kernel is nondeterministic, or its results depend on what the output buffers held",
      .require = &require,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
