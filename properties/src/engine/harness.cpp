// Calling the kernel for a property: outputs NaN-filled (padding included) before every call.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"

#include <algorithm>
#include <array>
#include <limits>

namespace attncheck {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The layout whose strides `t` has (with Case::kInputPad; a zero-stride dimension matches any stride), so that
/// outputs mirror the inputs; bhld if none matches.
Layout layout_of(const Tensor &t) {
  for (Layout l : {Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded}) {
    std::vector<std::int64_t> shape = t.shape();
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (t.strides()[d] == 0) shape[d] = 1;  // an expanded dimension: compare the layout of one slice
    std::vector<std::int64_t> st = Tensor::layout_strides(shape, l, Case::kInputPad);
    for (std::size_t d = 0; d < st.size(); ++d)
      if (t.strides()[d] == 0) st[d] = 0;
    if (st == t.strides()) return l;
  }
  return Layout::bhld;
}

Tensor poisoned(Dtype dt, std::vector<std::int64_t> shape, Layout layout) {
  Tensor t = Tensor::with_layout(dt, std::move(shape), layout, kOutputPad);
  t.fill_storage(kNaN);
  return t;
}
}  // namespace

ForwardRun run_forward(const Env &env, const Problem &p) {
  const Shape &s = p.shape;
  ForwardRun r;
  r.out = poisoned(p.dtype(), {s.B, s.Hq, s.Lq, s.Dv}, p.out_layout.value_or(layout_of(p.q)));
  // The LSE the contract declares: float32, the storage dtype, or none (the kernel gets NULL; r.lse stays NaN).
  r.has_lse = env.contract.lse != LseOutput::none;
  r.lse = Tensor::rows_with_layout(env.precision.lse, {s.B, s.Hq, s.Lq}, p.lse_layout.value_or(Layout::bhld), kOutputPad);
  r.lse.fill_storage(kNaN);
  r.call = call_forward(env.kernel, p, r.out, r.has_lse ? &r.lse : nullptr, &r.dropout_keep);
  return r;
}

BackwardRun run_backward(const Env &env, const Problem &p, const ForwardRun &fwd) {
  BackwardRun r;
  r.dq = poisoned(p.dtype(), p.q.shape(), layout_of(p.q));
  r.dk = poisoned(p.dtype(), p.k.shape(), layout_of(p.k));
  r.dv = poisoned(p.dtype(), p.v.shape(), layout_of(p.v));
  r.call = call_backward(env.kernel, p, fwd.out, fwd.has_lse ? &fwd.lse : nullptr, r.dq, r.dk, r.dv);
  return r;
}

namespace {
/// Whether row i of batch entry b (query head h) sees no key of `p`: the window's and the causal mask's range of keys
/// is empty, or the mask tensor hides every key in it.
bool row_sees_no_key(const Problem &p, std::int64_t b, std::int64_t h, std::int64_t i, const RowFrame &fr) {
  const Features &f = p.features;
  const KeyRange r = key_range(f, p.params.mask, fr);
  if (r.empty()) return true;
  if (f.mask.empty()) return false;
  for (std::int64_t j = r.lo; j <= r.hi; ++j)
    if (sees(f, p.params.mask, fr, p.shape.Lq, p.shape.Lk, b, h, i, j)) return false;
  return true;
}
}  // namespace

bool any_row_sees_no_key(const Problem &p) {
  const Shape &s = p.shape;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      const RowFrame fr = row_frame(p.features, p.params.mask, b, i, s.Lq, s.Lk);
      if (!fr.exists) continue;
      for (std::int64_t h = 0; h < s.Hq; ++h)
        if (row_sees_no_key(p, b, h, i, fr)) return true;
    }
  return false;
}

bool leave_unspecified_rows(const KernelContract &c, const Problem &p, const ExactForward &exact, ForwardRun &r) {
  if (c.empty_rows != EmptyRows::unspecified) return false;
  const Shape &s = p.shape;
  bool any = false;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t i = 0; i < s.Lq; ++i) {
      const RowFrame fr = row_frame(p.features, p.params.mask, b, i, s.Lq, s.Lk);
      if (!fr.exists) continue;  // no row at all: the call layer's 0
      for (std::int64_t h = 0; h < s.Hq; ++h) {
        if (!row_sees_no_key(p, b, h, i, fr)) continue;
        any = true;
        for (std::int64_t x = 0; x < s.Dv; ++x)
          r.out.set({b, h, i, x}, exact.out[static_cast<std::size_t>(out_offset(s, b, h, i, x))]);
        if (r.has_lse) r.lse.set({b, h, i}, exact.lse[static_cast<std::size_t>(lse_offset(s, b, h, i))]);
      }
    }
  return any;
}

namespace {
/// The accuracy ladder's comparisons of a forward whose call returned intact outputs.
Outcome accuracy_ladder(const ForwardRun &fr, const ExactForward &exact, const ForwardBounds &bound) {
  std::vector<TensorCheck> checks{{"O", fr.out, exact.out, bound.out}};
  if (fr.has_lse) checks.push_back({"LSE", fr.lse, exact.lse, bound.lse, Step::sums});  // the log of the row sum
  Ladder L;
  L.each(checks);
  return L.outcome();
}
}  // namespace

Outcome forward_ladder(const PrecisionProfile &precision, const KernelContract &contract, const Problem &p,
                       std::shared_ptr<const ForwardRun> fr, SeenTensor seen) {
  return judged(precision, [p, fr, contract, seen = std::move(seen)](ExactSource &src) {
    const auto [exact, bound] = src.forward(p);
    ForwardRun judged_run = *fr;
    leave_unspecified_rows(contract, p, exact, judged_run);
    if (seen) {
      seen("O", judged_run.out, exact.out, bound.out);
      if (judged_run.has_lse) seen("LSE", judged_run.lse, exact.lse, bound.lse);
    }
    return accuracy_ladder(judged_run, exact, bound);
  });
}

Outcome backward_ladder(const PrecisionProfile &precision, const Problem &p, std::shared_ptr<const ForwardRun> fr,
                        std::shared_ptr<const BackwardRun> br, SeenTensor seen) {
  return judged(precision, [p, fr, br, seen = std::move(seen)](ExactSource &src) {
    const auto [exact, fb] = src.forward(p);
    const auto [grad, bb] = src.backward(p, exact);
    // The forward's O and LSE: finite and values, no mask step. The gradients' mask step: rows that see no key, keys
    // no query sees, exactly 0.
    std::vector<TensorCheck> checks{{"O (forward)", fr->out, exact.out, fb.out, Step::values, /*masked=*/false}};
    if (fr->has_lse) checks.push_back({"LSE (forward)", fr->lse, exact.lse, fb.lse, Step::values, /*masked=*/false});
    checks.push_back({"dQ", br->dq, grad.dq, bb.dq});
    checks.push_back({"dK", br->dk, grad.dk, bb.dk});
    checks.push_back({"dV", br->dv, grad.dv, bb.dv});
    if (seen)
      for (std::size_t i = checks.size() - 3; i < checks.size(); ++i)
        seen(checks[i].name, checks[i].got, checks[i].exact, checks[i].bound);
    Ladder J;
    J.each(checks);
    return J.outcome();
  });
}

Outcome forward_accuracy(const Env &env, const Problem &p) {
  auto fr = std::make_shared<const ForwardRun>(run_forward(env, p));
  Ladder L;
  if (!L.call(fr->call, "forward") || !L.intact(fr->out, "O") || !L.intact(fr->lse, "LSE")) return L.outcome();
  return forward_ladder(env.precision, env.contract, p, fr);
}

Outcome forward_accuracy(const Env &env, const Problem &p,
                         const std::function<std::pair<ExactForward, ForwardBounds>()> &exact_and_bounds) {
  ForwardRun fr = run_forward(env, p);
  Ladder L;
  if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  const auto [exact, bound] = exact_and_bounds();
  leave_unspecified_rows(env.contract, p, exact, fr);
  return accuracy_ladder(fr, exact, bound);
}

bool within_each_other(Ladder &L, std::string_view name, const std::vector<double> &a_got,
                       const std::vector<double> &a_exact, const std::vector<double> &a_bound, const ForwardSide &b,
                       const std::vector<double> &extra) {
  const std::vector<double> b_got = b.fr.out.to_vector();
  const Dtype dt = b.p.dtype();
  std::vector<double> bound(b_got.size());
  for (std::size_t x = 0; x < b_got.size(); ++x) {
    bound[x] = a_bound[x] + b.bound.out[x] + (extra.empty() ? 0.0 : extra[x]);
    if (overflow_within_bound(a_got[x], a_exact[x], a_bound[x], dt) ||
        overflow_within_bound(b_got[x], b.exact.out[x], b.bound.out[x], dt))
      bound[x] = std::numeric_limits<double>::infinity();
  }
  return L.within(Step::values, name, b_got, a_got, bound, b.fr.out.shape());
}

}  // namespace attncheck
