// dropout: attention dropout (SPEC.md §2.7) — O, LSE and the gradients within their bounds given the mask the kernel
// returned (kept weights scaled by 1/(1 − p)); the mask written for every key a row sees; the same seed giving the
// same mask and bits; another seed another mask; and the keep rate within a binomial interval: on n decisions,
// |kept/n − (1 − p)| ≤ √(ln(2/α)/(2n)) (Hoeffding), α = 10⁻⁶ the false-alarm probability of a correct kernel.
// Independence: two decisions a correct kernel draws independently, each kept with probability r, agree with
// probability a(r) = r² + (1 − r)². On m disjoint pairs that differ in one index — the head, the batch entry, the
// row or the key — the share that agrees exceeds max a(r) over the rate interval above by more than √(ln(4/α)/(2m))
// with probability at most α/4 (one-sided Hoeffding, four axes); a draw shared across that index agrees always.
#include "feature_checks.h"
#include "../slack.h"

#include <array>
#include <cstring>

namespace attncheck::props {

namespace {
/// The rate problem: kRateBatch entries of kRateHeads heads of kRateRows × kRateKeys decisions (zeros: no reference
/// needed); two of each index, so that every axis of the independence test has pairs.
constexpr std::int64_t kRateBatch = 2, kRateHeads = 2, kRateRows = 64, kRateKeys = 128;
/// The axes of the independence test, in the mask's index order [B, Hq, Lq, Lk].
constexpr std::array<const char *, 4> kAxes{"batch entries", "query heads", "rows", "keys"};

/// The finding of a dropout-mask element [b, h, i, j] that holds `z`, neither 0 nor 1.
Finding mask_element(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, std::uint8_t z) {
  Finding f;
  f.kind = Finding::Kind::value;
  f.name = "dropout mask";
  f.index = {b, h, i, j};
  f.got = z;
  return f;
}

std::size_t mask_index(const Shape &s, const std::array<std::int64_t, 4> &x) {
  return dropout_index(s.Hq, s.Lq, s.Lk, x[0], x[1], x[2], x[3]);
}

/// Pairs of decisions that differ only in index `axis` (its even values and the next one), and how many agree.
struct Agreement {
  std::int64_t pairs = 0, agree = 0;
};
Agreement agreement(const std::vector<std::uint8_t> &z, const Shape &s, std::size_t axis) {
  const std::array<std::int64_t, 4> dims{s.B, s.Hq, s.Lq, s.Lk};
  Agreement a;
  std::array<std::int64_t, 4> x{};
  for (x[0] = 0; x[0] < dims[0]; ++x[0])
    for (x[1] = 0; x[1] < dims[1]; ++x[1])
      for (x[2] = 0; x[2] < dims[2]; ++x[2])
        for (x[3] = 0; x[3] < dims[3]; ++x[3]) {
          if (x[axis] % 2 == 1 || x[axis] + 1 >= dims[axis]) continue;
          std::array<std::int64_t, 4> y = x;
          ++y[axis];
          ++a.pairs;
          a.agree += z[mask_index(s, x)] == z[mask_index(s, y)] ? 1 : 0;
        }
  return a;
}

/// Decisions the kernel made for keys rows see; false (with L failed) when one is not 0 or 1.
bool written(Ladder &L, const FeatureRun &r, std::int64_t *kept, std::int64_t *n) {
  const Shape &s = r.p.shape;
  const Features &f = r.p.features;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hq; ++h)
      for (std::int64_t i = 0; i < s.Lq; ++i) {
        const RowFrame fr = row_frame(f, r.p.params.mask, b, i, s.Lq, s.Lk);
        for (std::int64_t j = 0; j < s.Lk; ++j) {
          if (!sees(f, r.p.params.mask, fr, s.Lq, s.Lk, b, h, i, j)) continue;
          const std::uint8_t z = r.fr.dropout_keep[mask_index(s, {b, h, i, j})];
          if (z > 1)
            return L.fail(Step::shape,
                          "the dropout mask holds " + std::to_string(z) + " at [" + std::to_string(b) + "," +
                              std::to_string(h) + "," + std::to_string(i) + "," + std::to_string(j) +
                              "], a key the row sees (1 kept, 0 dropped)",
                          mask_element(b, h, i, j, z));
          *kept += z;
          ++*n;
        }
      }
  return true;
}

Outcome run(const Env &env, const Case &c) {
  Ladder L;
  // The keep rate, and another seed, on a problem of kRateHeads·kRateRows·kRateKeys decisions.
  Case rate;
  rate.spec = c.spec;
  rate.spec.mask = Mask::none;
  rate.spec.shape = Shape{kRateBatch, kRateHeads, kRateHeads, kRateRows, kRateKeys, 1, 1};
  rate.resize_values(false);
  Case other = rate;
  other.spec.features.seed += 1;
  FeatureRun a, again, r1, r2;
  std::int64_t kept = 0, n = 0, rate_kept = 0, rate_n = 0;
  // Judged under MPFR only: the statistical checks below read the runs after the ladder (no screen, screen.h).
  // Only `a` is compared with exact values; the repeat is the same problem (its empty rows are a's), and the rate
  // problems are read for their masks.
  ExactSource mpfr(ExactSource::Mode::mpfr, env.precision);
  if (!run_feature(env, c.problem(), L, a, "forward", true) ||
      !call_feature(env, c.problem(), L, again, "forward again (same seed)") ||
      !call_feature(env, rate.problem(), L, r1, "forward of the rate problem") ||
      !call_feature(env, other.problem(), L, r2, "forward of the rate problem, another seed"))
    return L.outcome();
  again.exact = a.exact;
  if (leave_unspecified_rows(env.contract, again.p, again.exact, again.fr)) again.br.reset();
  if (!written(L, a, &kept, &n) || !written(L, r1, &rate_kept, &rate_n) || !feature_accuracy(a, mpfr, L))
    return L.outcome();
  // The same seed again: the same mask, the same bits.
  if (again.fr.dropout_keep != a.fr.dropout_keep)
    return (L.fail(Step::values, "the same seed gave another dropout mask",
                   aggregate_finding("dropout mask of the same seed")),
            L.outcome());
  const std::vector<double> o1 = a.fr.out.to_vector(), o2 = again.fr.out.to_vector();
  for (std::size_t x = 0; x < o1.size(); ++x)
    if (!same_bits(o1[x], o2[x]))
      return (L.fail(Step::values,
                     element_name("O", a.fr.out.shape(), static_cast<std::int64_t>(x)) +
                         " changed between two calls with the same seed: " + hex_and_decimal(o1[x]) + " then " +
                         hex_and_decimal(o2[x]),
                     element_finding(Finding::Kind::changed, "O", a.fr.out.shape(), static_cast<std::int64_t>(x),
                                     o2[x], o1[x])),
              L.outcome());
  const double p = c.spec.features.dropout_p, share = static_cast<double>(rate_kept) / static_cast<double>(rate_n);
  const double tol = std::sqrt(std::log(2 / kFalseAlarm) / (2 * static_cast<double>(rate_n)));
  L.note(std::fabs(share - (1 - p)) / tol, "keep rate " + std::to_string(share) + " of " + std::to_string(rate_n));
  if (std::fabs(share - (1 - p)) > tol)
    return (L.fail(Step::values, "kept " + std::to_string(rate_kept) + " of " + std::to_string(rate_n) +
                                     " weights (" + std::to_string(share) + ") at p = " + std::to_string(p) +
                                     ": outside " + std::to_string(1 - p) + " ± " + std::to_string(tol) +
                                     " (false-alarm probability 1e-6)",
                   aggregate_finding("dropout keep rate")),
            L.outcome());
  if (r1.fr.dropout_keep == r2.fr.dropout_keep)
    return (L.fail(Step::values, "seeds " + std::to_string(r1.p.features.dropout_seed) + " and " +
                                     std::to_string(r2.p.features.dropout_seed) + " gave the same dropout mask of " +
                                     std::to_string(rate_n) + " decisions",
                   aggregate_finding("dropout mask of another seed")),
            L.outcome());
  // Independence across each index (see the file comment): agreeing too often is a shared draw.
  const auto agree_at = [](double r) { return r * r + (1 - r) * (1 - r); };  // convex: its max is at an end
  const double a_max = std::max(agree_at(std::max(0.0, 1 - p - tol)), agree_at(std::min(1.0, 1 - p + tol)));
  for (std::size_t axis = 0; axis < kAxes.size(); ++axis) {
    const Agreement g = agreement(r1.fr.dropout_keep, r1.p.shape, axis);
    const double m = static_cast<double>(g.pairs), share = static_cast<double>(g.agree) / m;
    const double slack = std::sqrt(std::log(static_cast<double>(kAxes.size()) / kFalseAlarm) / (2 * m));
    if (share > a_max + slack && a_max + slack < 1)
      return (L.fail(Step::values, "dropout decisions of two " + std::string(kAxes[axis]) + " agree on " +
                                       std::to_string(g.agree) + " of " + std::to_string(g.pairs) +
                                       " pairs (" + std::to_string(share) + ") at p = " + std::to_string(p) +
                                       ": independent draws agree on at most " + std::to_string(a_max + slack) +
                                       " (false-alarm probability 1e-6) — one draw shared across the " +
                                       kAxes[axis],
                     aggregate_finding("dropout decisions across " + std::string(kAxes[axis]))),
              L.outcome());
  }
  return L.outcome();
}
}  // namespace

const PropertyDef &dropout_property() {
  static const PropertyDef def{
      .id = "dropout",
      .formula = "O_i = Σ_j P_ij z_ij v_j, z ∈ {0, 1/(1−p)} the returned mask, within β; same seed ⇒ same mask; keep "
                 "rate within Hoeffding's 1e-6 interval; decisions independent across batch entries, heads, rows and "
                 "keys (1e-6)",
      .summary = "dropout keeps the wrong share, applies another mask than it returns (not reproducible from the "
                 "seed), forgets 1/(1−p), ignores the seed, or shares one draw across heads, batch entries, rows or "
                 "keys",
      .require = &with_feature<ATTNCHECK_FEATURE_DROPOUT>,
      .tier = &feature_tier<ATTNCHECK_FEATURE_DROPOUT>,
      .feature = ATTNCHECK_FEATURE_DROPOUT,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
