// sum_to_one: softmax rows are probability vectors. With v = ones every visible row of O is 1; with v = identity
// (Dv = Lk) row i of O is P_i itself, whose entries are ≥ 0 and sum to 1. Bounds are the error model's
// (SPEC.md §4.2) on each modified problem; a row's sum may be off by at most the sum of its elements' bounds.
#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "attncheck/screen.h"
#include "../slack.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace attncheck::props {

namespace {
/// Dv = Lk makes work ≈ B·Hq·Lq·Lk², twice per case: room for long rows (Lk ≥ 1024, Lq = 1).
constexpr std::int64_t kSumToOneMaxWork = 1'200'000;

void require(CaseOptions &o) {
  o.draw_v = false;  // v is replaced by ones and the identity
  o.dv_equals_lk = true;
  o.max_work = kSumToOneMaxWork;
}

/// The exact O of the v = ones problem: 1 in rows that see a key, 0 in rows that see none.
std::vector<double> ones_exact(const Problem &p) {
  const Shape &s = p.shape;
  std::vector<double> e(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv));
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const double row = visible_count(p.params.mask, i, s.Lq, s.Lk) > 0 ? 1 : 0;
        for (std::int64_t x = 0; x < s.Dv; ++x) e[static_cast<std::size_t>(out_offset(s, b, h, i, x))] = row;
      }
  return e;
}

/// The case with v[b, h, j, c] = f(j, c) (its problem is the kernel's, and a failure on it reports it): one image of
/// a kv head's Lk × Dv values, copied to every (b, h).
template <class F>
Case with_v_case(const Case &c, F f) {
  Case out = c;
  const Shape &s = c.spec.shape;
  std::vector<double> head(static_cast<std::size_t>(s.Lk * s.Dv));
  for (std::int64_t j = 0; j < s.Lk; ++j)
    for (std::int64_t x = 0; x < s.Dv; ++x) head[static_cast<std::size_t>(j * s.Dv + x)] = f(j, x);
  out.v.clear();
  out.v.reserve(head.size() * static_cast<std::size_t>(s.B * s.Hkv));
  for (std::int64_t n = 0; n < s.B * s.Hkv; ++n) out.v.insert(out.v.end(), head.begin(), head.end());
  return out;
}

constexpr const char *kOnesWhat = "v = 1 (every value one)";
constexpr const char *kIdentWhat = "v = I (value j is the j-th unit vector, Dv = Lk)";

/// The comparisons of O(v=1) and O(v=I), whose calls returned intact outputs, against the exact values e2 and the
/// bounds b1, b2 (MPFR's or the screen's: screen.h).
Outcome ladder(const Problem &ones, const ForwardRun &f1, const ForwardRun &f2, const Case &ones_case,
               const Case &ident_case, const ForwardBounds &b1, const ExactForward &e2, const ForwardBounds &b2) {
  const Shape &s = ones.shape;
  const std::vector<double> one = ones_exact(ones);
  Ladder L;
  const auto judge_ones = [&] { L.judging(ones_case, kOnesWhat); };
  const auto judge_ident = [&] { L.judging(ident_case, kIdentWhat); };

  // Row sums of O(v=I) and their bounds: |Σ_c Ô_ic − 1| ≤ Σ_c β_ic (+ the rounding of summing here).
  const std::vector<double> p_hat = f2.out.to_vector();
  const std::size_t rows = static_cast<std::size_t>(s.B * s.Hq * s.Lq), width = static_cast<std::size_t>(s.Dv);
  std::vector<double> sum(rows), sum_exact(rows), sum_bound(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    double acc = 0, mag = 0, bound = 0;
    for (std::size_t x = 0; x < width; ++x) {
      acc += p_hat[r * width + x];
      mag += std::abs(p_hat[r * width + x]);
      bound += b2.out[r * width + x];
    }
    sum[r] = acc;
    sum_exact[r] = one[r * width];  // 1, or 0 for a row that sees no key
    sum_bound[r] = bound + static_cast<double>(width) * kDoubleRoundoff * mag;
  }
  // Non-negativity of O(v=I): the negative part against 0, within the element's bound.
  std::vector<double> negative(p_hat.size()), zero(p_hat.size(), 0.0);
  for (std::size_t x = 0; x < p_hat.size(); ++x) negative[x] = std::min(p_hat[x], 0.0);

  // Each check is a no-op once one has failed: the outcome names the first failing step.
  L.each({{"O(v=1)", f1.out, one, b1.out, Step::sums, /*masked=*/true, judge_ones},
          {"O(v=I)", f2.out, e2.out, b2.out, Step::mask, /*masked=*/true, judge_ident}});  // its sums: below
  judge_ident();
  L.within(Step::sums, "Σ_c O(v=I)", sum, sum_exact, sum_bound, {s.B, s.Hq, s.Lq});
  L.within(Step::values, "min(O(v=I), 0)", negative, zero, b2.out, f2.out.shape());
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  const auto one_fn = [](std::int64_t, std::int64_t) { return 1.0; };
  const auto ident_fn = [](std::int64_t j, std::int64_t x) { return j == x ? 1.0 : 0.0; };
  // The checks that follow judge one of the two modified problems; a failure records it.
  auto ones_case = std::make_shared<const Case>(with_v_case(c, one_fn));
  auto ident_case = std::make_shared<const Case>(with_v_case(c, ident_fn));
  const Problem ones = ones_case->problem();
  const Problem ident = ident_case->problem();
  auto f1 = std::make_shared<const ForwardRun>(run_forward(env, ones));
  auto f2 = std::make_shared<const ForwardRun>(run_forward(env, ident));
  {
    Ladder L;
    L.judging(*ones_case, kOnesWhat);
    if (!L.call(f1->call, "forward (v = ones)")) return L.outcome();
    L.judging(*ident_case, kIdentWhat);
    if (!L.call(f2->call, "forward (v = identity)")) return L.outcome();
    L.judging(*ones_case, kOnesWhat);
    if (!L.intact(f1->out, "O(v=1)")) return L.outcome();
    L.judging(*ident_case, kIdentWhat);
    if (!L.intact(f2->out, "O(v=I)")) return L.outcome();
  }
  return judged(env.precision, [ones, ident, f1, f2, ones_case, ident_case](ExactSource &src) {
    src.values_not_compared();  // against 1 and 0, which the math fixes
    const auto [e1, b1] = src.forward(ones);
    const auto [e2, b2] = src.forward(ident);
    (void)e1;  // O(v=1) is 1 exactly in every row that sees a key: ones_exact
    return ladder(ones, *f1, *f2, *ones_case, *ident_case, b1, e2, b2);
  });
}
}  // namespace

const PropertyDef &sum_to_one_property() {
  static const PropertyDef def{
      .id = "sum_to_one",
      .formula = "v = 1 ⇒ O_ic = 1;  v = I (Dv = Lk) ⇒ O_ij = P_ij ≥ 0 and Σ_j O_ij = 1, each within its bound",
      .summary = "the softmax weights do not form a probability vector (lost rescale, dropped or doubled weight)",
      .require = &require,
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
