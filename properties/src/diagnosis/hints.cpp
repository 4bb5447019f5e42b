// evidence_hints (hints.h): hypotheses about a counterexample's defect, each a changed problem whose exact result is
// compared with what the kernel returned on the failing problem; a hint only where one reproduces it.
#include "hints.h"

#include "diagnosis.h"

#include "../effective_scale.h"
#include "attncheck/error_model.h"
#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <numbers>
#include <optional>
#include <string>

namespace attncheck {

namespace {

/// error ÷ bound up to which the kernel's value is reproduced by an exact one: within its bound.
constexpr double kReproduced = 1;
/// The reference work (Shape::work() multiply-adds per call, each call counted whole) that one family of hypotheses
/// may spend on a counterexample — about 3 s of MPFR: a family that needs more (a long minimal case) is not tried, no
/// hint rather than minutes per failure.
constexpr std::int64_t kHintWork = std::int64_t{1} << 26;

/// Reference calls on the whole problem that given_hints may need at most (its hypotheses, before each family's own
/// affordable() check): outputs given at production size get no hint rather than minutes of MPFR.
constexpr std::int64_t kGivenHintCalls = 4;

/// Whether `calls` reference calls on `p` fit kHintWork.
bool affordable(const Problem &p, std::int64_t calls) { return calls * p.shape.work() <= kHintWork; }

/// What the kernel returned on the failing problem: O, and the LSE when it returned one.
struct Observed {
  Problem p;
  PrecisionProfile precision;
  std::vector<double> out, lse;  ///< lse empty under lse=none
  std::int64_t rows = 0, dv = 0;
  /// Per row of O: the exact logits in double (−∞ for keys it does not see), how many keys it sees, and what any
  /// partial sum of its logits can reach (dot_reach).
  std::vector<std::vector<double>> logits;
  std::vector<std::int64_t> seen;
  std::vector<double> dot_reach;
};

/// The narrowest arithmetic a kernel may declare for its logits (accumulate-qk=f16, SPEC.md §3.1): float16's range
/// is the smallest a logit may need to fit.
constexpr Dtype kNarrowestLogits = Dtype::f16;

/// error ÷ bound of a kernel's value against an exact one, for verifying: where the model cannot bound the element
/// (+∞) only the very value is — a bound that excuses everything verifies nothing. A NaN is never reproduced, not even
/// by a NaN the changed problem lets in (a mask that shows a NaN key matches any NaN the kernel returns, whatever made
/// it): only nan_source, which re-runs the kernel, explains one. NaN reads as +∞: as wrong as it gets.
double hint_ratio(double got, double exact, double bound) {
  if (std::isnan(got)) return INFINITY;
  if (got == exact) return 0;
  if (!std::isfinite(bound)) return INFINITY;
  const double r = error_ratio(got, exact, bound);
  return std::isnan(r) ? INFINITY : r;
}

/// Per row of O (b, h, i), the worst hint_ratio of the kernel's O row and LSE element against `exact`. An LSE of +∞
/// where the exact one is −∞ is exact (SPEC.md §2.3) in a row that sees no key — of the problem itself: a kernel's
/// +∞ does not reproduce a row that only a changed problem leaves without keys.
std::vector<double> row_ratios(const Observed &k, const std::vector<double> &out, const std::vector<double> &lse,
                               const ForwardBounds &b) {
  std::vector<double> r(static_cast<std::size_t>(k.rows), 0);
  for (std::int64_t row = 0; row < k.rows; ++row) {
    double &w = r[static_cast<std::size_t>(row)];
    for (std::int64_t c = 0; c < k.dv; ++c) {
      const auto x = static_cast<std::size_t>(row * k.dv + c);
      w = std::max(w, hint_ratio(k.out[x], out[x], b.out[x]));
    }
    if (!k.lse.empty()) {
      const auto x = static_cast<std::size_t>(row);
      const bool empty = k.seen.empty() || k.seen[x] == 0;  // not a row a changed problem emptied
      const double got = empty && lse[x] == -INFINITY && k.lse[x] == INFINITY ? -INFINITY : k.lse[x];
      w = std::max(w, hint_ratio(got, lse[x], b.lse[x]));
    }
  }
  return r;
}

/// Row ratios of the kernel against the exact result of problem `q`.
std::vector<double> judge(const Observed &k, const Problem &q) {
  const ExactForward e = reference_forward(q);
  return row_ratios(k, e.out, e.lse, forward_bounds(q, e, k.precision));
}

double worst(const std::vector<double> &r) {
  double w = 0;
  for (const double x : r) w = std::max(w, x);
  return w;
}

bool reproduced(const std::vector<double> &r) { return worst(r) <= kReproduced; }

/// The (b, h, i) of row `row` of O.
struct RowIndex {
  std::int64_t b, h, i;
};
RowIndex row_index(const Shape &s, std::int64_t row) { return {row / (s.Hq * s.Lq), row / s.Lq % s.Hq, row % s.Lq}; }

/// "O[0,0,3]".
std::string row_name(const Shape &s, std::int64_t row) {
  const RowIndex r = row_index(s, row);
  return fmt::format("O[{},{},{}]", r.b, r.h, r.i);
}

/// `p` with the visibility `keep(b, h, i, j, seen)` (seen: whether the row sees key j in p) as a boolean mask
/// [B, Hq, Lq, Lk], the causal mask folded into it. p must have no features (evidence_hints).
Problem with_visibility(
    const Problem &p,
    const std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool)> &keep) {
  const Shape &s = p.shape;
  Problem m = p;
  m.params.mask = Mask::none;
  Features &f = m.features;
  f.mask_kind = MaskKind::boolean;
  f.mask_B = s.B;
  f.mask_H = s.Hq;
  f.mask.assign(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk), 0);
  std::size_t x = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const RowFrame fr = row_frame(p.features, p.params.mask, b, i, s.Lq, s.Lk);
        for (std::int64_t j = 0; j < s.Lk; ++j, ++x)
          f.mask[x] = keep(b, h, i, j, sees(p.features, p.params.mask, fr, s.Lq, s.Lk, b, h, i, j)) ? 1 : 0;
      }
  return m;
}

/// max(1, |scale|·log₂e)·Σ_d |q_id k_jd| over the keys row `row` sees (0 when none): a bound on every partial sum of
/// its logits, unscaled, scaled, or folded into exp2's domain (FlashAttention's s·scale·log₂e).
double dot_reach(const Problem &p, std::int64_t row) {
  const Shape &s = p.shape;
  const RowIndex r = row_index(s, row);
  const RowFrame fr = row_frame(p.features, p.params.mask, r.b, r.i, s.Lq, s.Lk);
  double most = 0;
  for (std::int64_t j = 0; j < s.Lk; ++j) {
    if (!sees(p.features, p.params.mask, fr, s.Lq, s.Lk, r.b, r.h, r.i, j)) continue;
    double sum = 0;
    for (std::int64_t d = 0; d < s.D; ++d)
      sum += std::abs(p.q.get({r.b, r.h, r.i, d}) * p.k.get({r.b, s.kv_head(r.h), j, d}));
    most = std::max(most, sum);
  }
  return std::max(1.0, std::abs(p.params.scale) * std::numbers::log2e) * most;
}

/// The exact logits s_ij = scale·q_i·k_j of row `row` in double (−∞ for keys it does not see; features: none).
std::vector<double> logits(const Problem &p, std::int64_t row) {
  const Shape &s = p.shape;
  const RowIndex r = row_index(s, row);
  const RowFrame fr = row_frame(p.features, p.params.mask, r.b, r.i, s.Lq, s.Lk);
  std::vector<double> out(static_cast<std::size_t>(s.Lk), -INFINITY);
  for (std::int64_t j = 0; j < s.Lk; ++j) {
    if (!sees(p.features, p.params.mask, fr, s.Lq, s.Lk, r.b, r.h, r.i, j)) continue;
    double dot = 0;
    for (std::int64_t d = 0; d < s.D; ++d) dot += p.q.get({r.b, r.h, r.i, d}) * p.k.get({r.b, s.kv_head(r.h), j, d});
    out[static_cast<std::size_t>(j)] = p.params.scale * dot;
  }
  return out;
}

/// A number for a hint's text: 4 significant digits ("0.125", "0.7071", "88.72").
std::string short_number(double x) { return fmt::format("{:.4g}", x); }

/// How the problem's scale reads: "1/√D = 0.125" when it is the default (as the kernel receives it, float32).
std::string scale_name(double scale, const Shape &s) {
  const auto as_f32 = [](double x) { return static_cast<float>(x); };
  if (as_f32(scale) == as_f32(1 / std::sqrt(static_cast<double>(s.D)))) return "1/√D = " + short_number(scale);
  return short_number(scale);
}

/// log of the largest sum a kernel that does not subtract the row max forms for row `row`: Σ_j e^{s_j} (the row
/// sum, whose log is the exact LSE) or Σ_j e^{s_j}·|v_jc| over each column c of P·V — in double, shifted by the
/// largest logit so that it does not overflow itself.
double unshifted_log_sum(const Observed &k, const ExactForward &exact, std::int64_t row) {
  const Shape &s = k.p.shape;
  const RowIndex r = row_index(s, row);
  const std::vector<double> &l = k.logits[static_cast<std::size_t>(row)];
  const double top = *std::max_element(l.begin(), l.end());
  double most = exact.lse[static_cast<std::size_t>(row)];
  if (top == -INFINITY) return most;
  for (std::int64_t c = 0; c < s.Dv; ++c) {
    double sum = 0;
    for (std::int64_t j = 0; j < s.Lk; ++j)
      if (l[static_cast<std::size_t>(j)] != -INFINITY)
        sum += std::exp(l[static_cast<std::size_t>(j)] - top) * std::abs(k.p.v.get({r.b, s.kv_head(r.h), j, c}));
    if (sum > 0) most = std::max(most, top + std::log(sum));
  }
  return most;
}

/// Every row of O that the kernel returned non-finite where its exact values are finite is one whose sums without
/// the row max subtracted (unshifted_log_sum) pass the largest finite value of the accumulation dtype — there e^s, or
/// Σ e^s, or Σ e^s·v overflows: what computing without max subtraction gives — while its logits cannot overflow in
/// any arithmetic a kernel may declare for them (dot_reach within kNarrowestLogits' range),
/// so the exponential is the one place left. Needs at least one such row; the named row is the first.
std::optional<Hint> exp_overflow(const Observed &k, const ExactForward &exact) {
  const Shape &s = k.p.shape;
  const double limit = std::log(max_finite(k.precision.accumulate));
  std::optional<Hint> h;
  for (std::int64_t row = 0; row < k.rows; ++row) {
    bool non_finite = false, exact_finite = true;
    for (std::int64_t c = 0; c < k.dv; ++c) {
      const auto x = static_cast<std::size_t>(row * k.dv + c);
      non_finite = non_finite || !std::isfinite(k.out[x]);
      exact_finite = exact_finite && std::isfinite(exact.out[x]);
    }
    if (!non_finite || !exact_finite) continue;
    const double reach = unshifted_log_sum(k, exact, row);
    if (!(reach > limit)) return std::nullopt;  // a non-finite row that overflow does not account for
    if (!(k.dot_reach[static_cast<std::size_t>(row)] <= max_finite(kNarrowestLogits)))
      return std::nullopt;  // its logits may overflow themselves: the exponential is not the only suspect
    if (h) continue;
    const std::vector<double> &l = k.logits[static_cast<std::size_t>(row)];
    h.emplace();
    h->kind = Hint::Kind::exp_overflow;
    h->row = row;
    h->logit = *std::max_element(l.begin(), l.end());
    h->text = fmt::format(
        "exp overflow: {} is non-finite where, without the row max subtracted, its sums reach e^{} (largest logit "
        "{}), past max {} = e^{} — the row max not subtracted",
        row_name(s, row), fmt::format("{:.9g}", reach), short_number(h->logit), dtype_name(k.precision.accumulate),
        fmt::format("{:.9g}", limit));
  }
  if (h) h->baseline = INFINITY;
  return h;
}

/// Kernel re-runs nan_source may spend: one per candidate key, the first that clears the row ends it.
constexpr int kMaxProvenanceRuns = 8;

/// "NaN", "+Inf", "−Inf".
std::string non_finite_name(double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "−Inf"; }

/// Where a non-finite input reached O: the first row the kernel returned non-finite where its exact values are finite
/// (so the row does not see the key that carries it), and the key of its batch entry and kv head with a non-finite k
/// or v element whose k and v, set to 0 (all else as it was), make the kernel's row finite — an intervention on the
/// kernel, re-run once per candidate key (ascending, at most kMaxProvenanceRuns), the first that clears it.
std::optional<Hint> nan_source(const Observed &k, const ExactForward &exact, const Case &c, const Env &env) {
  const Shape &s = k.p.shape;
  const auto row_finite = [&](const std::vector<double> &out, std::int64_t row) {
    for (std::int64_t x = row * k.dv; x < (row + 1) * k.dv; ++x)
      if (!std::isfinite(out[static_cast<std::size_t>(x)])) return false;
    return true;
  };
  std::int64_t named = -1;
  for (std::int64_t row = 0; row < k.rows && named < 0; ++row)
    if (!row_finite(k.out, row) && row_finite(exact.out, row)) named = row;
  if (named < 0) return std::nullopt;
  const RowIndex r = row_index(s, named);
  const std::int64_t hk = s.kv_head(r.h);
  // Offsets into the case's row-major k [B,Hkv,Lk,D] and v [B,Hkv,Lk,Dv].
  const auto k_at = [&](std::int64_t j, std::int64_t d) {
    return static_cast<std::size_t>(((r.b * s.Hkv + hk) * s.Lk + j) * s.D + d);
  };
  const auto v_at = [&](std::int64_t j, std::int64_t d) {
    return static_cast<std::size_t>(((r.b * s.Hkv + hk) * s.Lk + j) * s.Dv + d);
  };
  int runs = 0;
  for (std::int64_t j = 0; j < s.Lk && runs < kMaxProvenanceRuns; ++j) {
    Case cleared = c;
    std::string first;  // the first non-finite element of key j: "v[0,0,3,1] = NaN"
    for (std::int64_t d = 0; d < s.D; ++d)
      if (double &x = cleared.k[k_at(j, d)]; !std::isfinite(x)) {
        if (first.empty()) first = fmt::format("k[{},{},{},{}] = {}", r.b, hk, j, d, non_finite_name(x));
        x = 0;
      }
    for (std::int64_t d = 0; d < s.Dv; ++d)
      if (double &x = cleared.v[v_at(j, d)]; !std::isfinite(x)) {
        if (first.empty()) first = fmt::format("v[{},{},{},{}] = {}", r.b, hk, j, d, non_finite_name(x));
        x = 0;
      }
    if (first.empty()) continue;
    ++runs;
    Problem q = cleared.problem();
    q.params.scale = k.p.params.scale;
    const ForwardRun fr = run_forward(env, q);
    if (!fr.call.ok() || !row_finite(fr.out.to_vector(), named)) continue;
    Hint h;
    h.kind = Hint::Kind::nan_source;
    h.row = named;
    h.first_key = h.last_key = j;
    h.baseline = INFINITY;
    const bool seen = k.logits[static_cast<std::size_t>(named)][static_cast<std::size_t>(j)] != -INFINITY;
    h.text = fmt::format("{} is non-finite through key {} ({}{}): with that key's k and v non-finite values set to 0 "
                         "the kernel's row is finite",
                         row_name(s, named), j, first, seen ? "" : ", a key the row does not see");
    return h;
  }
  return std::nullopt;
}

/// O at another scale: the named scales a kernel mistakes for its own (1, 1/D, 1/√D, 1/√Dv, the log₂e fold applied
/// twice or undone; names of one value read together, "1/D = 1/√Dv", but 1 is just 1), then the scale the
/// effective-scale probe fits on the kernel (properties/src/effective_scale.h) — the first whose exact result reproduces the
/// kernel's.
std::optional<Hint> other_scale(const Observed &k, const std::vector<double> &baseline, const Case *c,
                                const Env *env) {
  const Shape &s = k.p.shape;
  const double scale = k.p.params.scale, D = static_cast<double>(s.D), Dv = static_cast<double>(s.Dv);
  struct Candidate {
    std::string name;
    double value;
  };
  const std::pair<const char *, double> named[] = {
      {"1", 1},
      {"1/D", 1 / D},
      {"1/√D", 1 / std::sqrt(D)},
      {"1/√Dv", 1 / std::sqrt(Dv)},
      {"scale·log₂e", scale * std::numbers::log2e},
      {"scale·ln 2", scale * std::numbers::ln2},
  };
  // As the kernel would hold them: float32. The problem's own scale is no candidate.
  const auto same = [](double a, double b) { return static_cast<float>(a) == static_cast<float>(b); };
  std::vector<Candidate> candidates;
  for (const auto &[name, value] : named) {
    if (same(value, scale)) continue;
    const auto it = std::find_if(candidates.begin(), candidates.end(),
                                 [&, v = value](const Candidate &x) { return same(x.value, v); });
    if (it == candidates.end()) candidates.push_back({name, value});
    else if (it->name != "1") it->name += std::string(" = ") + name;  // 1 is the plainest name of 1 (D or Dv = 1)
  }
  for (Candidate &x : candidates)
    if (!x.name.starts_with("1 ") && x.name != "1") x.name += " = " + short_number(x.value);
  const auto hint = [&](const Candidate &cand) -> std::optional<Hint> {
    Problem q = k.p;
    q.params.scale = cand.value;
    const std::vector<double> r = judge(k, q);
    if (!reproduced(r)) return std::nullopt;
    Hint h;
    h.kind = Hint::Kind::scale;
    h.scale = cand.value;
    h.ratio = worst(r);
    h.baseline = worst(baseline);
    h.text = fmt::format("O{} the exact attention at scale {}, not {}", k.lse.empty() ? " is" : " and LSE are",
                         cand.name, scale_name(scale, s));
    return h;
  };
  for (const Candidate &cand : candidates)
    if (std::optional<Hint> h = hint(cand)) return h;
  if (!c || !env) return std::nullopt;  // outputs given without their kernel: nothing to probe
  // The probe: one query against two keys whose logit gap is an integer g, v = identity (O = the weights); the
  // middle of the interval of scales its weights allow.
  try {
    const props::probe::ScaleProbe pr = props::probe::scale_probe(c->spec);
    Problem pp = pr.c.problem();
    pp.params.scale = scale;
    const ForwardRun fr = run_forward(*env, pp);
    if (!fr.call.ok()) return std::nullopt;
    const ExactForward e = reference_forward(pp);
    const ForwardBounds b = forward_bounds(pp, e, k.precision);
    const props::probe::Interval fit = props::probe::effective_scale(pr, fr.out.to_vector(), b.out);
    if (!fit.finite() || fit.contains(scale)) return std::nullopt;
    // A scale that logits rounded to float16 could mimic (a declarable precision, accumulate-qk=f16) is no wrong
    // scale: the interval the looser bounds allow must exclude the problem's scale too.
    PrecisionProfile loose = k.precision;
    if (loose.accumulate_qk == Dtype::f32) loose.accumulate_qk = kNarrowestLogits;
    const ForwardBounds lb = forward_bounds(pp, e, loose);
    if (props::probe::effective_scale(pr, fr.out.to_vector(), lb.out).contains(scale)) return std::nullopt;
    const double mid = (fit.lo + fit.hi) / 2;
    return hint({short_number(mid) + " (fitted by the scale probe)", mid});
  } catch (const std::exception &) {
    return std::nullopt;  // the probe could not run (the kernel declines its shape)
  }
}

/// The causal mask of the other alignment (bottom-right ↔ top-left), whose diagonal is Lk − Lq keys away: a
/// declaration (causal=top-left), which diagnose() names — so never a hint.
Mask other_alignment(Mask m) { return m == Mask::causal ? Mask::causal_top_left : Mask::causal; }
std::int64_t other_alignment_shift(const Problem &p) {
  return p.params.mask == Mask::causal ? p.shape.Lq - p.shape.Lk : p.shape.Lk - p.shape.Lq;
}

/// O under the causal mask with its diagonal moved by one key either way (row i sees j ≤ i + Lk − Lq ± 1), unless
/// that is the other alignment.
std::optional<Hint> mask_shift(const Observed &k, const std::vector<double> &baseline) {
  const Mask m = k.p.params.mask;
  if (!is_causal(m)) return std::nullopt;
  const Shape &s = k.p.shape;
  for (const std::int64_t shift : {1, -1}) {
    if (shift == other_alignment_shift(k.p)) continue;
    const Problem q = with_visibility(k.p, [&](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j, bool) {
      const RowFrame fr = row_frame(k.p.features, m, b, i, s.Lq, s.Lk);
      return fr.exists && j < fr.Lk_b && j <= fr.aligned + shift;
    });
    const std::vector<double> r = judge(k, q);
    if (!reproduced(r)) continue;
    Hint h;
    h.kind = Hint::Kind::mask_shift;
    h.shift = shift;
    h.ratio = worst(r);
    h.baseline = worst(baseline);
    const std::string diagonal = m == Mask::causal_top_left ? "i" : "i + Lk − Lq";
    h.text = fmt::format("O matches a causal mask off by one (diagonal {:+}: row i sees keys j ≤ {} {} 1)", shift,
                         diagonal, shift > 0 ? "+" : "−");
    return h;
  }
  return std::nullopt;
}

/// O = Σ_t e^{LSE_t + M − M_t − LSE} O_t over tiles t of `tile` keys (from key 0): O_t and LSE_t the exact attention
/// over the keys of tile t the row sees, M_t the row's largest logit up to tile t, M the largest of all — each
/// tile's partial output added at the running max of its time and never rescaled when the max grew, while the row
/// sum was. Tried for tiles of 1, 2, 4, … keys, fewer than the row's keys.
std::optional<Hint> lost_rescale(const Observed &k, const ExactForward &exact, const ForwardBounds &bounds,
                                 const std::vector<double> &baseline) {
  const Shape &s = k.p.shape;
  const std::vector<std::vector<double>> &row_logits = k.logits;
  const std::int64_t longest = *std::max_element(k.seen.begin(), k.seen.end());
  if (!affordable(k.p, 2 * s.Lk)) return std::nullopt;  // Σ over tile sizes of ⌈Lk / tile⌉ calls < 2·Lk
  for (std::int64_t tile = 1; tile < longest; tile *= 2) {
    std::vector<double> out(exact.out.size(), 0);
    std::vector<double> running(static_cast<std::size_t>(k.rows), -INFINITY), top(running.size(), -INFINITY);
    for (std::int64_t row = 0; row < k.rows; ++row) {
      const std::vector<double> &l = row_logits[static_cast<std::size_t>(row)];
      top[static_cast<std::size_t>(row)] = *std::max_element(l.begin(), l.end());
    }
    for (std::int64_t t0 = 0; t0 < s.Lk; t0 += tile) {
      const Problem q = with_visibility(
          k.p, [&](std::int64_t, std::int64_t, std::int64_t, std::int64_t j, bool seen) {
            return seen && j >= t0 && j < t0 + tile;
          });
      const ExactForward e = reference_forward(q);
      for (std::int64_t row = 0; row < k.rows; ++row) {
        const auto r = static_cast<std::size_t>(row);
        const std::vector<double> &l = row_logits[r];
        for (std::int64_t j = t0; j < std::min(t0 + tile, s.Lk); ++j)
          running[r] = std::max(running[r], l[static_cast<std::size_t>(j)]);
        if (e.lse[r] == -INFINITY) continue;  // the row sees no key of this tile
        const double w = std::exp(e.lse[r] + top[r] - running[r] - exact.lse[r]);
        for (std::int64_t c = 0; c < k.dv; ++c) {
          const auto x = static_cast<std::size_t>(row * k.dv + c);
          out[x] += w * e.out[x];
        }
      }
    }
    const std::vector<double> r = row_ratios(k, out, exact.lse, bounds);
    if (!reproduced(r)) continue;
    Hint h;
    h.kind = Hint::Kind::lost_rescale;
    h.tile = tile;
    h.ratio = worst(r);
    h.baseline = worst(baseline);
    h.text = fmt::format(
        "a lost rescale: O is the sum of the partial outputs of tiles of {} key{}, each at the running max of its "
        "tile, never rescaled when a later tile raised the max",
        tile, tile == 1 ? "" : "s");
    return h;
  }
  return std::nullopt;
}

/// Every wrong row (baseline beyond its bound) is the exact output without a tail of keys: all keys from some t on
/// (a dropped last block), or its own last n visible keys — but not the tail that leaves it the keys the other
/// causal alignment shows it (a declaration). The named row is the worst; its smallest such tail.
std::optional<Hint> dropped_keys(const Observed &k, const std::vector<double> &baseline) {
  const Shape &s = k.p.shape;
  struct Match {
    std::int64_t first = -1, last = -1, count = 0;
    double ratio = 0;
  };
  std::vector<std::optional<Match>> match(static_cast<std::size_t>(k.rows));
  std::vector<std::int64_t> wrong;
  const std::int64_t longest = *std::max_element(k.seen.begin(), k.seen.end());
  for (std::int64_t row = 0; row < k.rows; ++row)
    if (baseline[static_cast<std::size_t>(row)] > kReproduced) wrong.push_back(row);
  if (wrong.empty() || !affordable(k.p, s.Lk + (is_causal(k.p.params.mask) ? longest : 0))) return std::nullopt;
  // The keys each row sees under the other causal alignment (−1: no mask, no other alignment).
  std::vector<std::int64_t> aligned_other(static_cast<std::size_t>(k.rows), -1);
  if (is_causal(k.p.params.mask))
    for (std::int64_t row = 0; row < k.rows; ++row) {
      const RowIndex r = row_index(s, row);
      const Mask o = other_alignment(k.p.params.mask);
      const RowFrame fr = row_frame(k.p.features, o, r.b, r.i, s.Lq, s.Lk);
      std::int64_t n = 0;
      for (std::int64_t j = 0; j < s.Lk; ++j) n += sees(k.p.features, o, fr, s.Lq, s.Lk, r.b, r.h, r.i, j);
      aligned_other[static_cast<std::size_t>(row)] = n;
    }
  // The keys of row `row` that `keep` leaves out: [first, last] (a tail) and their count.
  const auto note = [&](const std::vector<double> &r, const auto &kept) {
    for (const std::int64_t row : wrong) {
      const auto x = static_cast<std::size_t>(row);
      if (r[x] > kReproduced) continue;
      const std::vector<double> &l = k.logits[x];
      Match m;
      for (std::int64_t j = 0; j < s.Lk; ++j)
        if (l[static_cast<std::size_t>(j)] != -INFINITY && !kept(row, j)) {
          if (m.first < 0) m.first = j;
          m.last = j;
          ++m.count;
        }
      m.ratio = r[x];
      if (k.seen[x] - m.count == aligned_other[x]) continue;  // the other alignment's keys
      if (m.count > 0 && (!match[x] || m.count < match[x]->count)) match[x] = m;
    }
  };
  // All keys from t on (every row): t = Lk − 1 down to 0.
  for (std::int64_t t = s.Lk - 1; t >= 0; --t) {
    const auto kept = [t](std::int64_t, std::int64_t j) { return j < t; };
    note(judge(k, with_visibility(k.p, [&](std::int64_t, std::int64_t, std::int64_t, std::int64_t j, bool seen) {
           return seen && j < t;
         })),
         kept);
  }
  // Each row's last n visible keys, where rows see different keys (a causal mask). after[row·Lk + j]: the keys
  // the row sees past j.
  std::vector<std::int64_t> after(static_cast<std::size_t>(k.rows * s.Lk), 0);
  for (std::int64_t row = 0; row < k.rows; ++row)
    for (std::int64_t j = s.Lk - 2, n = 0; j >= 0; --j) {
      if (k.logits[static_cast<std::size_t>(row)][static_cast<std::size_t>(j + 1)] != -INFINITY) ++n;
      after[static_cast<std::size_t>(row * s.Lk + j)] = n;
    }
  if (is_causal(k.p.params.mask))
    for (std::int64_t n = 1; n <= longest; ++n) {
      // Key j is kept when at least n keys the row sees follow it: its rank among them from the end.
      const auto kept = [&](std::int64_t row, std::int64_t j) {
        return after[static_cast<std::size_t>(row * s.Lk + j)] >= n;
      };
      const Problem q = with_visibility(k.p, [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j,
                                                 bool seen) {
        return seen && kept((b * s.Hq + h) * s.Lq + i, j);
      });
      note(judge(k, q), kept);
    }
  std::int64_t named = -1;
  for (const std::int64_t row : wrong) {
    if (!match[static_cast<std::size_t>(row)]) return std::nullopt;  // a wrong row no dropped tail reproduces
    if (named < 0 || baseline[static_cast<std::size_t>(row)] > baseline[static_cast<std::size_t>(named)]) named = row;
  }
  const Match &m = *match[static_cast<std::size_t>(named)];
  Hint h;
  h.kind = Hint::Kind::dropped_keys;
  h.row = named;
  h.first_key = m.first;
  h.last_key = m.last;
  h.ratio = m.ratio;
  h.baseline = worst(baseline);
  const std::string keys = m.first == m.last ? fmt::format("key {}", m.first)
                                             : fmt::format("keys {}…{}", m.first, m.last);
  const std::int64_t seen = k.seen[static_cast<std::size_t>(named)];
  const std::string of = m.count != seen ? fmt::format("{} of the {} keys it sees", m.count, seen)
                         : seen == 1      ? std::string("the only key it sees")
                                          : fmt::format("all {} keys it sees", seen);
  h.text = fmt::format("{} is the exact output without {} ({}): a dropped tail tile", row_name(s, named), keys, of);
  if (wrong.size() > 1)
    h.text += fmt::format("; each of the {} wrong rows is the exact output without a tail", wrong.size());
  return h;
}

/// The first verified hypothesis on the kernel's outputs `k`, in evidence_hints' order; the two that re-run the kernel
/// (the NaN source, the scale probe) only with `c` and `env`.
std::vector<Hint> hints_on(Observed &k, const Case *c, const Env *env) {
  const Shape &s = k.p.shape;
  k.rows = s.B * s.Hq * s.Lq;
  k.dv = s.Dv;
  if (k.rows == 0 || s.Lk == 0) return {};
  for (std::int64_t row = 0; row < k.rows; ++row) {
    k.logits.push_back(logits(k.p, row));
    const std::vector<double> &l = k.logits.back();
    k.seen.push_back(std::count_if(l.begin(), l.end(), [](double x) { return x != -INFINITY; }));
    k.dot_reach.push_back(dot_reach(k.p, row));
  }
  const ExactForward exact = reference_forward(k.p);
  const ForwardBounds bounds = forward_bounds(k.p, exact, k.precision);
  const std::vector<double> baseline = row_ratios(k, exact.out, exact.lse, bounds);
  if (reproduced(baseline)) return {};  // O and LSE are right here: the failure is elsewhere
  std::optional<Hint> h = exp_overflow(k, exact);
  // A non-finite input's trace first: the hypotheses below judge finite elements only.
  if (!h && c && env) h = nan_source(k, exact, *c, *env);
  if (!h) h = other_scale(k, baseline, c, env);
  if (!h) h = mask_shift(k, baseline);
  if (!h) h = lost_rescale(k, exact, bounds, baseline);
  if (!h) h = dropped_keys(k, baseline);
  if (h) return {*h};
  return {};
}

}  // namespace

std::vector<Hint> diagnosis::evidence_hints(const Counterexample &cx, const attncheck_kernel &kernel,
                                            const RunReport &report) {
  const Case &c = cx.judged();
  if (!cx.explained_by.empty() || cx.outcome.step == Step::shape || c.spec.stretch.active()) return {};
  try {
    Problem p = c.problem();
    p.params.scale = cx.judged_scale();
    if (p.features.any()) return {};
    const Env env{kernel, report.precision(), report.contract};
    const ForwardRun fr = run_forward(env, p);
    if (!fr.call.ok()) return {};
    Observed k;
    k.p = p;
    k.precision = report.precision();
    k.out = fr.out.to_vector();
    if (fr.has_lse && report.contract.lse != LseOutput::none) k.lse = fr.lse.to_vector();
    return hints_on(k, &c, &env);
  } catch (const std::exception &) {
    // A problem the reference or the error model declines: no hint.
  }
  return {};
}

std::vector<Hint> diagnosis::given_hints(const Problem &p, const PrecisionProfile &precision,
                                         const KernelContract &contract, const Tensor &out, const Tensor *lse) {
  if (p.features.any() || !affordable(p, kGivenHintCalls)) return {};
  try {
    Observed k;
    k.p = p;
    k.precision = precision;
    k.out = out.to_vector();
    if (lse && contract.lse != LseOutput::none) k.lse = lse->to_vector();
    return hints_on(k, nullptr, nullptr);
  } catch (const std::exception &) {
    return {};  // a problem the reference or the error model declines: no hint
  }
}

}  // namespace attncheck
