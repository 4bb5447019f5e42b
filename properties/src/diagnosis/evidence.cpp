// add_evidence (diagnosis.h): re-runs each counterexample's failing problem (the minimal case, or the modified copy of
// it that the failing check judged) on the kernel and keeps, element by element, what the kernel returned, the exact
// values and the bounds of the tensor the failure is in, plus the exact probabilities P. A modified copy fails only
// against the minimal case, so that is re-run too, and the rows that differ between the two are marked.
#include "diagnosis.h"

#include "attncheck/check.h"
#include "attncheck/error_model.h"
#include "attncheck/evidence.h"
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/stretch.h"
#include "hints.h"

#include <cmath>
#include <exception>
#include <optional>

namespace attncheck {

namespace {
constexpr std::pair<Hint::Kind, std::string_view> kHintKinds[] = {
    {Hint::Kind::scale, "scale"},
    {Hint::Kind::mask_shift, "mask_shift"},
    {Hint::Kind::dropped_keys, "dropped_keys"},
    {Hint::Kind::lost_rescale, "lost_rescale"},
    {Hint::Kind::exp_overflow, "exp_overflow"},
    {Hint::Kind::nan_source, "nan_source"},
};
}  // namespace

std::string_view hint_kind_name(Hint::Kind k) {
  for (const auto &[kind, name] : kHintKinds)
    if (kind == k) return name;
  return "?";
}

std::optional<Hint::Kind> parse_hint_kind(std::string_view name) {
  for (const auto &[kind, n] : kHintKinds)
    if (n == name) return kind;
  return std::nullopt;
}

namespace {
/// Product of the dimensions.
std::size_t elements(const std::vector<std::int64_t> &shape) {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}
}  // namespace

double Evidence::ratio(std::size_t x) const {
  const double g = tensor == "LSE" && exact[x] == -INFINITY && got[x] == INFINITY ? -INFINITY : got[x];
  return error_ratio(g, exact[x], bound[x]);
}

std::int64_t Evidence::worst_index() const {
  if (got.size() != exact.size() || got.size() != bound.size()) return -1;
  std::int64_t worst = -1;
  double worst_ratio = -1;
  for (std::size_t x = 0; x < got.size(); ++x) {
    double r = ratio(x);
    if (std::isnan(r)) r = INFINITY;  // a NaN result is as wrong as it gets
    if (r > worst_ratio) worst_ratio = r, worst = static_cast<std::int64_t>(x);
  }
  return worst;
}

std::int64_t Evidence::row_length() const {
  if (tensor == "LSE" || shape.empty()) return 1;
  return shape.back();
}

std::int64_t Evidence::rows() const {
  const std::int64_t n = row_length();
  return n > 0 ? static_cast<std::int64_t>(elements(shape)) / n : 0;
}

std::string Evidence::row_name(std::int64_t row) const {
  if (tensor == "LSE" || shape.empty()) return element_name(tensor, shape, row);
  return element_name(tensor, std::vector<std::int64_t>(shape.begin(), shape.end() - 1), row);
}

namespace {

bool is_gradient(std::string_view t) { return t == "dQ" || t == "dK" || t == "dV"; }

std::string call_failure(std::string_view what, const CallResult &r) {
  return std::string(what) + " returned status " + std::to_string(r.status) +
         (r.message.empty() ? "" : ": " + r.message);
}

/// P_ij = exp(s_ij − LSE_i) in double from the problem's values, its features (SPEC.md §2.7: visibility, softcap,
/// biases, FP8 descales) and the exact LSE; 0 for keys the row does not see. Dropout is not in P.
std::vector<double> probabilities(const Problem &p, const std::vector<double> &lse) {
  const Shape &s = p.shape;
  const Features &f = p.features;
  const double scale = p.params.scale * descaled_q(f) * descaled_k(f);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const double l = lse[static_cast<std::size_t>(lse_offset(s, b, h, i))];
        const RowFrame fr = row_frame(f, p.params.mask, b, i, s.Lq, s.Lk);
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!sees(f, p.params.mask, fr, s.Lq, s.Lk, b, h, i, j) || std::isinf(l)) {
            out.push_back(0);
            continue;
          }
          double dot = 0;
          for (std::int64_t d = 0; d < s.D; ++d) dot += p.q.get({b, h, i, d}) * p.k.get({b, s.kv_head(h), j, d});
          double x = scale * dot;
          if (f.softcap > 0) x = f.softcap * std::tanh(x / f.softcap);
          out.push_back(std::exp(x + logit_bias(f, fr, s.Lq, s.Lk, b, h, i, j) - l));
        }
      }
  return out;
}

/// The tensor the evidence shows: the output the failure's finding is in, else a guess from the property.
std::string evidence_tensor(const Counterexample &cx, const PropertyDef *def, const RunReport &report) {
  static constexpr std::string_view kOutputs[] = {"O", "LSE", "dQ", "dK", "dV"};
  // Unnamed (a derived quantity, a call, a statistic): a gradient property's failure is most likely in dQ, any
  // other's in O.
  std::string_view tensor = def && def->needs_backward ? "dQ" : "O";
  if (const std::optional<Finding> &f = cx.outcome.finding; f && f->kind != Finding::Kind::wrote_input)
    for (const std::string_view t : kOutputs)
      if (f->tensor == t) tensor = t;
  if (is_gradient(tensor) && cx.judged().dout.empty()) tensor = "O";  // no dout: the backward cannot run
  if (tensor == "LSE" && report.contract.lse == LseOutput::none) tensor = "O";  // the kernel returns no LSE
  return std::string(tensor);
}

/// The kernel, the reference and the error model on case `c` at `scale`, over `tensor`.
Evidence evidence_on(const Counterexample &cx, const Case &c, double scale, std::string_view tensor,
                     const attncheck_kernel &kernel, const RunReport &report) {
  Evidence ev;
  ev.tensor.assign(tensor.begin(), tensor.end());
  const Shape s = c.spec.problem_shape();
  try {
    Problem p = c.problem();
    p.params.scale = scale;
    const Env env{kernel, report.precision(), report.contract};
    // A stretched (long) problem's exact values and bounds come from its core (stretch.h); it is forward only, and its
    // probabilities are not the case's values'.
    std::optional<StretchedForward> stretched;
    if (c.spec.stretch.active()) stretched = stretched_forward(c, report.precision());
    // The call itself failed (crashed, hung, declined, wrote outside): there are no results to show, and running it
    // again would only cost another timeout. Otherwise the forward runs first: with dropout, the exact values are
    // those of the mask it returns.
    const bool call_failed = cx.outcome.step == Step::shape;
    std::optional<ForwardRun> fr;
    if (!call_failed) fr = run_forward(env, p);
    if (p.features.dropout_p > 0) {
      if (call_failed || !fr->call.ok()) {
        ev.call_error = call_failed ? cx.outcome.detail : call_failure("forward", fr->call);
        return ev;
      }
      p.features.dropout_keep = fr->dropout_keep;
    }
    const ExactForward exact = stretched ? stretched->exact : reference_forward(p);
    if (!stretched && static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk) <= Evidence::kMaxProbabilities)
      ev.probabilities = probabilities(p, exact.lse);
    if (call_failed) {
      ev.call_error = cx.outcome.detail;
      return ev;
    }
    if (!fr->call.ok()) ev.call_error = call_failure("forward", fr->call);
    if (!is_gradient(ev.tensor)) {
      const ForwardBounds fb = stretched ? stretched->bounds : forward_bounds(p, exact, report.precision());
      const bool lse = ev.tensor == "LSE";
      ev.shape = lse ? std::vector<std::int64_t>{s.B, s.Hq, s.Lq} : std::vector<std::int64_t>{s.B, s.Hq, s.Lq, s.Dv};
      ev.exact = lse ? exact.lse : exact.out;
      ev.bound = lse ? fb.lse : fb.out;
      if (fr->call.ok()) ev.got = (lse ? fr->lse : fr->out).to_vector();
    } else {
      const ExactBackward grad = reference_backward(p);
      const BackwardBounds bb = backward_bounds(p, exact, report.precision());
      const int which = ev.tensor == "dQ" ? 0 : ev.tensor == "dK" ? 1 : 2;
      ev.shape = which == 0   ? std::vector<std::int64_t>{s.B, s.Hq, s.Lq, s.D}
                 : which == 1 ? std::vector<std::int64_t>{s.B, s.Hkv, s.Lk, s.D}
                              : std::vector<std::int64_t>{s.B, s.Hkv, s.Lk, s.Dv};
      ev.exact = which == 0 ? grad.dq : which == 1 ? grad.dk : grad.dv;
      ev.bound = which == 0 ? bb.dq : which == 1 ? bb.dk : bb.dv;
      if (fr->call.ok()) {
        const BackwardRun br = run_backward(env, p, *fr);
        if (!br.call.ok())
          ev.call_error = call_failure("backward", br.call);
        else
          ev.got = (which == 0 ? br.dq : which == 1 ? br.dk : br.dv).to_vector();
      }
    }
  } catch (const std::exception &e) {
    ev.call_error = std::string("evidence could not be computed: ") + e.what();
  }
  return ev;
}

/// The row-major index in `ev`'s tensor of the element the failure's finding names; −1 when it names another
/// tensor, a derived quantity or no element of this shape.
std::int64_t found_element(const Outcome &o, const Evidence &ev) {
  if (!o.finding || o.finding->tensor != ev.tensor || o.finding->index.size() != ev.shape.size() ||
      (o.finding->kind != Finding::Kind::value && o.finding->kind != Finding::Kind::changed))
    return -1;
  std::int64_t index = 0;
  for (std::size_t d = 0; d < ev.shape.size(); ++d) {
    const std::int64_t v = o.finding->index[d];
    if (v < 0 || v >= ev.shape[d]) return -1;
    index = index * ev.shape[d] + v;
  }
  return ev.shape.empty() ? -1 : index;
}

/// Whether element x changed from the original to the modified problem beyond what the property allows (see
/// Evidence::differing_rows); `fixed`: unchanged exact values must come back identical.
bool changed_beyond(const Evidence &m, const Evidence::Original &o, std::size_t x, bool fixed) {
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  // An LSE of +∞ where the exact LSE is −∞ (a row that sees no key) is exact (SPEC.md §2.3).
  const auto got = [&](double g, double exact) {
    return m.tensor == "LSE" && exact == -INFINITY && g == INFINITY ? exact : g;
  };
  const double exact_was = o.exact[x], exact_now = m.exact[x];
  const double was = got(o.got[x], exact_was), now = got(m.got[x], exact_now);
  if (same(was, now) && same(exact_was, exact_now)) return false;
  if (std::isnan(exact_was) || std::isnan(exact_now)) return false;  // the math has no value there to follow
  const double allowed = o.bound[x] + m.bound[x];
  if (exact_was == exact_now) return fixed ? !same(was, now) : !(std::abs(now - was) <= allowed);
  if (std::isinf(exact_was) || std::isinf(exact_now))  // no finite change to follow: each result within its own bound
    return error_ratio(was, exact_was, o.bound[x]) > 1 || error_ratio(now, exact_now, m.bound[x]) > 1;
  return !(std::abs((now - was) - (exact_now - exact_was)) <= allowed);
}

/// Evidence::differing_rows of `m` against its original (empty unless both have every value, in one shape), for a
/// failure `failed`.
std::vector<std::int64_t> differing_rows(const Evidence &m, const Evidence::Original &o, const Outcome &failed) {
  const std::size_t n = elements(m.shape);
  std::vector<std::int64_t> rows;
  const auto complete = [n](const auto &v) { return v.got.size() == n && v.exact.size() == n && v.bound.size() == n; };
  if (o.shape != m.shape || n == 0 || !complete(o) || !complete(m)) return rows;
  // An exact check failed (error ÷ bound +∞ at step mask or values: bits, or a value the contract fixes): where the
  // exact value is unchanged, the kernel's must come back identical.
  const bool fixed = (failed.step == Step::mask || failed.step == Step::values) && std::isinf(failed.worst_ratio);
  const auto len = static_cast<std::size_t>(m.row_length());
  for (std::size_t x = 0; x < n; ++x)
    if (const auto row = static_cast<std::int64_t>(x / len);
        (rows.empty() || rows.back() != row) && changed_beyond(m, o, x, fixed))
      rows.push_back(row);
  return rows;
}

Evidence evidence_of(const Counterexample &cx, const PropertyDef *def, const attncheck_kernel &kernel,
                     const RunReport &report) {
  // The problem that failed: a property that judged a modified copy (shifted, permuted, rescaled …) recorded it.
  const std::string tensor = evidence_tensor(cx, def, report);
  Evidence ev = evidence_on(cx, cx.judged(), cx.judged_scale(), tensor, kernel, report);
  ev.hints = diagnosis::evidence_hints(cx, kernel, report);
  // The original too, unless the call itself failed (another try would only cost another timeout) or it has no dout
  // for the backward the tensor needs.
  if (!cx.outcome.failing_case || cx.outcome.step == Step::shape || (is_gradient(tensor) && cx.minimal.dout.empty()))
    return ev;
  Evidence was = evidence_on(cx, cx.minimal, cx.minimal.spec.scale(), tensor, kernel, report);
  ev.original = Evidence::Original{std::move(was.shape), std::move(was.got), std::move(was.exact),
                                   std::move(was.bound), std::move(was.call_error)};
  ev.differing_rows = differing_rows(ev, *ev.original, cx.outcome);
  const std::int64_t element = found_element(cx.outcome, ev);
  if (element >= 0) ev.marked_row = element / ev.row_length();
  return ev;
}

}  // namespace

void diagnosis::add_evidence(RunReport &r, const attncheck_kernel &kernel) {
  for (PropertyReport &p : r.properties)
    if (p.counterexample) p.counterexample->evidence = evidence_of(*p.counterexample, find_property(p.id), kernel, r);
}

}  // namespace attncheck
