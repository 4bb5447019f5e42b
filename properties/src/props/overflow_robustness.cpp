// overflow_robustness: finite inputs have a finite exact O (a convex combination of finite values) and a finite LSE
// (−∞ only for a row that sees no key), however large the logits — so a kernel must not return NaN or Inf there. A
// kernel that exponentiates logits without subtracting the row max overflows exp (s ≳ 88.7 in float32) and fails.
// Cases are drawn from Family::large (|s| ≈ 10²…10⁴); each is also checked amplified: q multiplied by the power of
// two that brings the largest |s_ij| to about kAmplifiedLogit, as far as the storage dtype allows (exact: scaling by
// 2^e only moves exponents). Only the finite step is checked; accuracy checks the values.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace attncheck::props {

namespace {
/// The largest |logit| of the amplified problem, about: far past exp's range in every dtype, while the error
/// model's log-space error (≈ u_a·|s|) stays below 1, so its bounds stay finite and the case decided.
constexpr double kAmplifiedLogit = 0x1p20;

void require(CaseOptions &o) {
  o.family = Family::large;  // logits 10²…10⁴: past exp's overflow in float32 (88.7) and float16 (11.1)
}

/// max over rows and visible keys of |scale·q_i·k_j|, in double from the case's exact values.
double max_abs_logit(const Case &c) {
  const Shape &s = c.spec.shape;
  const double scale = default_scale(s.D);
  double m = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i)
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!visible(c.spec.mask, i, j, s.Lq, s.Lk)) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < s.D; ++d)
            dot += c.q[static_cast<std::size_t>(((b * s.Hq + h) * s.Lq + i) * s.D + d)] *
                   c.k[static_cast<std::size_t>(((b * s.Hkv + s.kv_head(h)) * s.Lk + j) * s.D + d)];
          m = std::max(m, std::abs(scale * dot));
        }
  return m;
}

/// The exponent e ≥ 0 of the amplification: 2^e·max|s| ≤ kAmplifiedLogit and 2^e·max|q| ≤ the dtype's largest
/// finite value. 0 when the case is already that large (or has no nonzero logit).
int amplification(const Case &c) {
  const double logit = max_abs_logit(c);
  double q_max = 0;
  for (double x : c.q) q_max = std::max(q_max, std::abs(x));
  if (logit == 0 || q_max == 0) return 0;
  const int by_logit = static_cast<int>(std::floor(std::log2(kAmplifiedLogit / logit)));
  const int by_dtype = static_cast<int>(std::floor(std::log2(max_finite(c.spec.dtype) / q_max)));
  return std::max(0, std::min(by_logit, by_dtype));
}

/// Step finite on `got`, except where the bound is +∞: there the model cannot bound the element (e.g. a profile
/// whose accumulation may overflow, SPEC.md §4.5), a correct kernel may return NaN or Inf, and the element is
/// undecided.
bool finite_where_bounded(Ladder &L, std::string_view name, const Tensor &got, std::vector<double> exact,
                          const std::vector<double> &bound) {
  const std::vector<double> g = got.to_vector();
  for (std::size_t x = 0; x < g.size(); ++x)
    if (std::isinf(bound[x]) && !std::isfinite(g[x])) {
      L.undecided(Step::finite, element_name(name, got.shape(), static_cast<std::int64_t>(x)) +
                                    ": not finite where the error model has no finite bound");
      exact[x] = std::numeric_limits<double>::quiet_NaN();  // finite() leaves an element of NaN exact undecided
    }
  return L.finite(name, got, exact, bound);
}

/// The suffix of the amplified problem's tensor names.
std::string amplified_tag(int e) { return "(q·2^" + std::to_string(e) + ")"; }

/// Checks of problem n judge it: the case itself (n = 0) or its copy amplified by 2^e (n = 1); a failure records it.
void judge(Ladder &L, std::size_t n, const Case &amplified, int e) {
  if (n == 0) L.judging_original();
  else L.judging(amplified, "q·2^" + std::to_string(e) + " on every query (exact amplification of the logits)");
}

Outcome run(const Env &env, const Case &c) {
  Case amplified = c;
  const int e = amplification(c);
  for (double &x : amplified.q) x = std::ldexp(x, e);  // exact: |x|·2^e stays finite in the dtype
  std::vector<Problem> problems{c.problem()};
  if (e > 0) problems.push_back(amplified.problem());  // else the case is already as large as it may get
  std::vector<ForwardRun> runs;
  Ladder L;
  for (const Problem &p : problems) {
    judge(L, runs.size(), amplified, e);
    runs.push_back(run_forward(env, p));
    const ForwardRun &fr = runs.back();
    if (!L.call(fr.call, "forward") || !L.intact(fr.out, "O") || !L.intact(fr.lse, "LSE")) return L.outcome();
  }
  auto judged_runs = std::make_shared<const std::vector<ForwardRun>>(std::move(runs));
  auto amplified_case = std::make_shared<const Case>(std::move(amplified));
  return judged(env.precision, [problems, judged_runs, amplified_case, e](ExactSource &src) {
    const std::vector<ForwardRun> &runs = *judged_runs;
    src.values_not_compared();  // the finite step only
    Ladder L;
    for (std::size_t n = 0; n < problems.size() && !L.failed(); ++n) {
      const auto [exact, bound] = src.forward(problems[n]);
      const std::string suffix = n == 0 ? "" : amplified_tag(e);
      judge(L, n, *amplified_case, e);
      finite_where_bounded(L, "O" + suffix, runs[n].out, exact.out, bound.out);
      if (runs[n].has_lse) finite_where_bounded(L, "LSE" + suffix, runs[n].lse, exact.lse, bound.lse);
    }
    return L.outcome();
  });
}
}  // namespace

const PropertyDef &overflow_robustness_property() {
  static const PropertyDef def{
      .id = "overflow_robustness",
      .formula =
          "q, k, v finite ⇒ Ô, L̂SE finite wherever O, LSE are (every row that sees a key), for |s_ij| up to "
          "10⁴ and amplified to ≈ 2²⁰",
      .summary =
          "the kernel returns NaN or Inf for large logits whose exact output is finite (exp overflows: no "
          "max subtraction, or a rescale that overflows)",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
