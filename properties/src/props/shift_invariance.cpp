// shift_invariance: softmax ignores a constant added to all of a row's logits, and its weights sum to 1. Adding one
// vector u to every key adds q_i·u to every logit of row i, so O is unchanged; adding one vector w to every value
// adds w to every output row that sees a key (a row that sees none stays 0). Both are checked kernel against
// kernel: the kernel's O on the shifted problem against its own O on the original, within the sum of the two
// problems' error bounds (SPEC.md §4.2) — plus the exact change of O when storing k + u or v + w rounds (0 when
// the sums are exact, as with small integers).
#include "attncheck/property.h"
#include "attncheck/reference.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace attncheck::props {

namespace {
/// u_d for every coordinate d: an integer, exactly representable in every storage dtype (and q·u ≠ 0 for most q).
constexpr double kKeyShift = 1;
/// w_c for every column c: an integer, exactly representable in every storage dtype.
constexpr double kValueShift = 1;
/// Relative rounding of the few double operations here (forming Ô + w and the exact change), with room to spare.
constexpr double kDoubleSlack = 4 * 0x1p-53;

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

/// A problem with its kernel output, exact values and bounds.
struct Side {
  explicit Side(Problem problem) : p(std::move(problem)) {}
  Problem p;
  ForwardRun fr;
  ExactForward exact;
  ForwardBounds bound;
};

/// Step values, kernel against kernel: |Ô_b − (Ô_a + off)| ≤ β_a + β_b + |O_b − (O_a + off)| element-wise.
/// The triangle inequality through the exact values: a correct kernel on both problems stays within it.
bool related(Ladder &L, std::string_view name, const Side &a, const Side &b, const std::vector<double> &off) {
  const std::vector<double> got_a = a.fr.out.to_vector(), got_b = b.fr.out.to_vector();
  std::vector<double> expected(got_a.size()), bound(got_a.size());
  for (std::size_t x = 0; x < got_a.size(); ++x) {
    expected[x] = got_a[x] + off[x];
    const double exact_change = std::abs(b.exact.out[x] - (a.exact.out[x] + off[x]));
    const double magnitude =
        std::abs(got_a[x]) + std::abs(a.exact.out[x]) + std::abs(b.exact.out[x]) + 2 * std::abs(off[x]);
    bound[x] = a.bound.out[x] + b.bound.out[x] + exact_change + kDoubleSlack * magnitude;
    const Dtype dt = b.p.dtype();  // a legitimate overflow on either side (SPEC.md §4.5) leaves the element undecided
    if (overflow_within_bound(got_a[x], a.exact.out[x], a.bound.out[x], dt) ||
        overflow_within_bound(got_b[x], b.exact.out[x], b.bound.out[x], dt))
      bound[x] = std::numeric_limits<double>::infinity();
  }
  return L.within(Step::values, name, got_b, expected, bound, b.fr.out.shape());
}

Outcome run(const Env &env, const Case &c) {
  Case keys = c, values = c;
  keys.k = shifted(c.k, kKeyShift, c.spec.dtype);
  values.v = shifted(c.v, kValueShift, c.spec.dtype);
  Side base(c.problem()), key_side(keys.problem()), value_side(values.problem());
  Ladder L;
  for (auto [side, what] : {std::pair{&base, "O"}, std::pair{&key_side, "O(k+u)"}, std::pair{&value_side, "O(v+w)"}}) {
    side->fr = run_forward(env, side->p);
    if (!L.call(side->fr.call, "forward") || !L.intact(side->fr.out, what)) return L.outcome();
  }
  for (Side *side : {&base, &key_side, &value_side}) {
    side->exact = reference_forward(side->p);
    side->bound = forward_bounds(side->p, side->exact, env.profile);
  }
  // Each check is a no-op once one has failed: the outcome names the first failing step.
  L.finite("O", base.fr.out, base.exact.out, base.bound.out);
  L.finite("O(k+u)", key_side.fr.out, key_side.exact.out, key_side.bound.out);
  L.finite("O(v+w)", value_side.fr.out, value_side.exact.out, value_side.bound.out);
  L.masked("O", base.fr.out, base.exact.out, base.bound.out);
  L.masked("O(k+u)", key_side.fr.out, key_side.exact.out, key_side.bound.out);
  L.masked("O(v+w)", value_side.fr.out, value_side.exact.out, value_side.bound.out);
  related(L, "O(k+u) vs O", base, key_side, row_offsets(base.p, 0));
  related(L, "O(v+w) vs O + w", base, value_side, row_offsets(base.p, kValueShift));
  return L.outcome();
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
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
