// shift_invariance: softmax ignores a constant added to all of a row's logits, and its weights sum to 1. Adding one
// vector u to every key adds q_i·u to every logit of row i, so O is unchanged; adding one vector w to every value
// adds w to every output row that sees a key (a row that sees none stays 0). Both are checked kernel against
// kernel: the kernel's O on the shifted problem against its own O on the original, within the sum of the two
// problems' error bounds (SPEC.md §4.2) — plus the exact change of O when storing k + u or v + w rounds (0 when
// the sums are exact, as with small integers).
#include "case_copies.h"

#include "attncheck/property.h"
#include "attncheck/reference.h"
#include "../slack.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
/// u_d for every coordinate d: an integer, exactly representable in every storage dtype (and q·u ≠ 0 for most q).
constexpr double kKeyShift = 1;
/// w_c for every column c: an integer, exactly representable in every storage dtype.
constexpr double kValueShift = 1;

/// `x` plus `shift` on every element, each sum rounded to the storage dtype.
std::vector<double> shifted(const std::vector<double> &x, double shift, Dtype dt) {
  std::vector<double> out(x.size());
  for (std::size_t n = 0; n < x.size(); ++n) out[n] = round_to(dt, x[n] + shift);
  return out;
}

/// Per output element of `p`: `w` in rows that see a key, 0 in rows that see none (their exact O is 0, not w).
std::vector<double> row_offsets(const Problem &p, double w) {
  const Shape &s = p.shape;
  std::vector<double> off(static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Dv));
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const double row = visible_count(p.params.mask, i, s.Lq, s.Lk) > 0 ? w : 0;
        for (std::int64_t x = 0; x < s.Dv; ++x) off[static_cast<std::size_t>(out_offset(s, b, h, i, x))] = row;
      }
  return off;
}

/// |Ô_b − (Ô_a + off)| ≤ β_a + β_b + |O_b − (O_a + off)| element-wise (within_each_other).
bool related(Ladder &L, std::string_view name, const ForwardSide &a, const ForwardSide &b,
             const std::vector<double> &off) {
  const std::vector<double> got_a = a.fr.out.to_vector();
  std::vector<double> shifted_got(got_a.size()), shifted_exact(got_a.size()), extra(got_a.size());
  for (std::size_t x = 0; x < got_a.size(); ++x) {
    shifted_got[x] = got_a[x] + off[x];
    shifted_exact[x] = a.exact.out[x] + off[x];
    const double magnitude =
        std::abs(got_a[x]) + std::abs(a.exact.out[x]) + std::abs(b.exact.out[x]) + 2 * std::abs(off[x]);
    extra[x] = std::abs(b.exact.out[x] - shifted_exact[x]) + kDoubleOpsUlps * kDoubleRoundoff * magnitude;
  }
  return within_each_other(L, name, shifted_got, shifted_exact, a.bound.out, b, extra);
}

/// The comparisons of the case (side 0) and its shifted copies (k + u: 1, v + w: 2), whose forwards returned
/// intact outputs; exact values and bounds from `src`.
Outcome compare(const CaseCopies &cc, ExactSource &src) {
  ForwardSide base = cc.sides[0], key_side = cc.sides[1], value_side = cc.sides[2];
  for (ForwardSide *side : {&base, &key_side, &value_side}) std::tie(side->exact, side->bound) = src.forward(side->p);
  Ladder L;
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  // Side n's finite and mask steps, judging side n; its values step is a relation to the base (below).
  const auto side = [&cc, &L](const char *name, const ForwardSide &s, std::size_t n) {
    const auto judge = [&cc, &L, n] { cc.judge(L, n); };
    return TensorCheck{name, s.fr.out, s.exact.out, s.bound.out, Step::mask, /*masked=*/true, judge};
  };
  L.each({side("O", base, 0), side("O(k+u)", key_side, 1), side("O(v+w)", value_side, 2)});
  cc.judge(L, 1);
  related(L, "O(k+u) vs O", base, key_side, row_offsets(base.p, 0));
  cc.judge(L, 2);
  related(L, "O(v+w) vs O + w", base, value_side, row_offsets(base.p, kValueShift));
  return L.outcome();
}

Outcome run(const Env &env, const Case &c) {
  Case keys = c, values = c;
  keys.k = shifted(c.k, kKeyShift, c.spec.dtype);
  values.v = shifted(c.v, kValueShift, c.spec.dtype);
  return run_copies(env, c, {std::move(keys), std::move(values)}, {"k + 1 on every key", "v + 1 on every value"},
                    {"O", "O(k+u)", "O(v+w)"}, &compare);
}
}  // namespace

const PropertyDef &shift_invariance_property() {
  static const PropertyDef def{
      .id = "shift_invariance",
      .formula =
          "O(q, k + u, v) = O(q, k, v);  O(q, k, v + w) = O(q, k, v) + w on rows that see a key, each within "
          "β_O of both problems",
      .summary =
          "the output moves when every logit of a row moves by the same amount, or does not follow a shift "
          "of every value (weights that do not sum to 1, a key that is not the row's own)",
      .screened = true,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
