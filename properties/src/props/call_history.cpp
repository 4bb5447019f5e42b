// call_history: a kernel's results do not depend on the calls made before them (SPEC.md §3). One case's problem is
// judged against the reference after each history that a cache keyed too loosely confuses with it:
//   1. a first call;
//   2. after a call of another shape (one more batch entry): a plan cached by (Lq, Lk, D) but not B;
//   3. the same logits at another scale — q·f with params.scale ÷ f, f a power of two that keeps q exact — right
//      after calls of this shape at the default scale, then the default again: a plan cached by shape without scale;
//   4. v negated in the same buffers (the same addresses, O → −O exactly): a result cached by input pointer;
//   5. the inputs copied to new addresses.
// Every judged call must be within its error bound of the exact value (steps finite → mask → sums → values over
// all calls, each naming its history); the exact values are computed once, the relations being exact.
#include "attncheck/gen.h"
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
/// Powers of two tried for step 3, in order: halving first (it cannot overflow), doubling when halving would lose
/// a subnormal bit.
constexpr std::array<double, 2> kScaleFactors{0.5, 2.0};

/// One judged call: its history, the case it judged (nullopt: the generated case itself), and its result.
struct Judged {
  std::string history;
  std::optional<Case> copy;
  double scale = 0;      ///< its params.scale when not the default (Ladder::judging)
  bool negated = false;  ///< exact O is the original's negated (v → −v)
  ForwardRun fr;
};

/// `c` with one more batch entry, a copy of batch 0 (a problem of another shape with the same features).
Case with_extra_batch(const Case &c) {
  Case o = c;
  o.spec.shape.B += 1;
  for (auto *t : {&o.q, &o.k, &o.v, &o.dout}) {
    const std::size_t slice = t->size() / static_cast<std::size_t>(c.spec.shape.B);
    t->insert(t->end(), t->begin(), t->begin() + static_cast<std::ptrdiff_t>(slice));
  }
  return o;
}

/// A factor of kScaleFactors for which q·f is exact in the problem `c` sends (FP8 rounding included), else nullopt.
std::optional<double> exact_factor(const Case &c, const Problem &p) {
  const std::vector<double> q = p.q.to_vector();
  for (double f : kScaleFactors) {
    Case scaled = c;
    for (double &x : scaled.q) x *= f;
    const std::vector<double> got = scaled.problem().q.to_vector();
    bool exact = true;
    for (std::size_t x = 0; x < q.size() && exact; ++x) exact = got[x] == q[x] * f;
    if (exact) return f;
  }
  return std::nullopt;
}

/// The judged calls, which returned intact outputs, against the exact values of `moved` (the case's problem) from
/// `src`: the relations of the histories to it are exact (the same logits, O → −O).
Outcome compare(const Case &c, const Problem &moved, std::vector<Judged> calls, const KernelContract &contract,
                ExactSource &src) {
  const std::pair<ExactForward, ForwardBounds> reference = src.forward(moved);
  const ExactForward &exact = reference.first;
  const ForwardBounds &bound = reference.second;
  for (Judged &j : calls) leave_unspecified_rows(contract, moved, exact, j.fr);  // every call: the same rows
  std::vector<double> negated_out = exact.out;
  for (double &x : negated_out) x = -x;
  Ladder L;
  std::vector<TensorCheck> checks;
  for (const Judged &j : calls) {
    const auto judge = [&L, &c, &j] {
      if (j.copy) L.judging(*j.copy, j.history, j.scale);
      else L.judging(c, j.history);
    };
    const std::vector<double> &out = j.negated ? negated_out : exact.out;
    checks.push_back({"O", j.fr.out, out, bound.out, Step::values, /*masked=*/true, judge});
    if (j.fr.has_lse) checks.push_back({"LSE", j.fr.lse, exact.lse, bound.lse, Step::sums, /*masked=*/true, judge});
  }
  L.each(checks);  // every call's LSE (sums) before any call's O (values)
  return L.outcome();
}

/// The declared features now and then: a plan or a result cached on one feature's path only.
void require(CaseOptions &o) { o.declared_features = true; }

Outcome run(const Env &env, const Case &c) {
  Problem p = c.problem();
  const double scale = p.params.scale;
  Ladder L;
  std::vector<Judged> calls;
  // Runs `problem` and, when `history` is set, keeps it for judging; false once a judged call failed or declined.
  auto call = [&](const Problem &problem, std::optional<Judged> j) {
    ForwardRun fr = run_forward(env, problem);
    if (!j) return true;  // history only: what it returns is not judged
    if (!L.call(fr.call, "forward " + j->history) || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE"))
      return false;
    j->fr = std::move(fr);
    calls.push_back(std::move(*j));
    return true;
  };
  if (!call(p, Judged{"(a first call)"})) return L.outcome();
  if (!is_huge(c.spec)) {
    const Case other = with_extra_batch(c);
    call(other.problem(), std::nullopt);
    if (!call(p, Judged{"after a call of shape " + other.spec.shape.describe() + " (another batch size)"}))
      return L.outcome();
  }
  if (const std::optional<double> f = exact_factor(c, p)) {
    Case scaled = c;
    for (double &x : scaled.q) x *= *f;
    Problem ps = scaled.problem();
    ps.params.scale = scale / *f;
    const std::string what = "q × " + hex_and_decimal(*f) + " with params.scale = " + hex_and_decimal(ps.params.scale) +
                             " (the same logits), after calls of this shape at scale " + hex_and_decimal(scale);
    if (!call(ps, Judged{what, scaled, ps.params.scale})) return L.outcome();
    if (!call(p, Judged{"after a call of this shape at params.scale = " + hex_and_decimal(ps.params.scale)}))
      return L.outcome();
  }
  {
    Case negated = c;
    for (double &x : negated.v) x = -x;
    std::vector<double> v = p.v.to_vector();
    for (double &x : v) x = -x;
    p.v.assign(v);  // in place: the same buffers, at the same addresses, as the calls before
    if (!call(p, Judged{"v negated in the same buffers (same addresses) as the call before", negated, 0, true}))
      return L.outcome();
  }
  const Problem moved = c.problem();  // new storage: the inputs at new addresses
  if (!call(moved, Judged{"on the inputs copied to new addresses"})) return L.outcome();

  auto judged_calls = std::make_shared<const std::vector<Judged>>(std::move(calls));
  return judged(env.precision, [c, moved, judged_calls, contract = env.contract](ExactSource &src) {
    return compare(c, moved, *judged_calls, contract, src);
  });
}
}  // namespace

const PropertyDef &call_history_property() {
  static const PropertyDef def{
      .id = "call_history",
      .formula = "f(x) is within β of exact whatever came before: after a call of another shape, at another scale "
                 "(q·f, scale/f), on the same buffers refilled (v → −v, O → −O), at new addresses",
      .summary = "the kernel's result depends on earlier calls: a plan, a scale or a result cached by shape or by "
                 "address",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
