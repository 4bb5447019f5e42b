// causal: under the causal mask a query row depends only on the keys it sees (SPEC.md §2.2–2.3). For a row r, the
// keys hidden from it (j > r + Lk − Lq, every batch and kv head) are also hidden from every row i ≤ r; so when they
// change — to other finite values, or to NaN/±Inf poison (with_hidden_poison) — rows 0..r of O and LSE must come
// back identical, and finite. Rows that see no key must give O = 0 and LSE = −∞ exactly (never NaN).
//
// No reference is needed: every check compares the kernel with itself. Identical means equal values: +0 and −0 are
// equal (a tiled kernel may add a masked key's 0·v and flip the sign of a zero sum), and NaN equals any NaN.
#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace attncheck::props {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
/// The poisons put in hidden k and v: each reaches a visible row through any arithmetic that touches it.
constexpr std::array<double, 3> kPoisons{kNaN, kInf, -kInf};
/// The finite replacement of a hidden value: kAltValue, or −kAltValue where the value already is kAltValue (so
/// every hidden element changes). Exact in every storage dtype.
constexpr double kAltValue = 2;
/// Rows whose hidden keys are changed, per case (spread over the distinct hidden sets): bounds the kernel calls
/// per case at 1 + kMaxPerturbedRows · (1 + kPoisons.size()).
constexpr std::int64_t kMaxPerturbedRows = 4;

void require(CaseOptions &o) { o.mask = Mask::causal; }

/// The rows r whose hidden sets are tried. Row r hides keys j ≥ r + Lk − Lq + 1; rows with a nonempty hidden set are
/// r ≤ Lq − 2, and every row r ≤ Lq − Lk − 1 hides all keys (the largest of them checks the most rows). At most
/// kMaxPerturbedRows of the distinct sets, evenly spread, both ends included.
std::vector<std::int64_t> perturbed_rows(const Shape &s) {
  const std::int64_t first = std::max<std::int64_t>(0, s.Lq - s.Lk - 1), last = s.Lq - 2;
  std::vector<std::int64_t> rows;
  if (last < first) return rows;
  const std::int64_t n = last - first + 1;
  if (n <= kMaxPerturbedRows) {
    for (std::int64_t r = first; r <= last; ++r) rows.push_back(r);
    return rows;
  }
  for (std::int64_t t = 0; t < kMaxPerturbedRows; ++t) rows.push_back(first + t * (n - 1) / (kMaxPerturbedRows - 1));
  return rows;
}

/// The case with the keys hidden from row r (k and v) changed to other finite values.
Case with_hidden_changed(const Case &c, std::int64_t r) {
  const Case marked = with_hidden_poison(c, r, kNaN);  // NaN marks exactly the hidden elements
  Case out = c;
  auto change = [](std::vector<double> &x, const std::vector<double> &mark) {
    for (std::size_t n = 0; n < x.size(); ++n)
      if (std::isnan(mark[n])) x[n] = x[n] == kAltValue ? -kAltValue : kAltValue;
  };
  change(out.k, marked.k);
  change(out.v, marked.v);
  return out;
}

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

/// One forward call on a changed case, and what changed.
struct Perturbed {
  std::int64_t row;  ///< rows 0..row must not change
  std::string what;  ///< "set to NaN", "changed to other finite values", …
  ForwardRun run;
};

std::string hidden_text(const Shape &s, const Perturbed &p) {
  return "keys hidden from row " + std::to_string(p.row) + " (j ≥ " +
         std::to_string(std::max<std::int64_t>(0, p.row + s.Lk - s.Lq + 1)) + ") " + p.what;
}

Outcome run(const Env &env, const Case &c) {
  const Shape &s = c.spec.shape;
  const ForwardRun base = run_forward(env, c.problem());
  Ladder L;
  if (!L.call(base.call, "forward") || !L.intact(base.out, "O") || !L.intact(base.lse, "LSE")) return L.outcome();

  std::vector<Perturbed> runs;
  for (std::int64_t r : perturbed_rows(s)) {
    runs.push_back({r, "changed to other finite values", run_forward(env, with_hidden_changed(c, r).problem())});
    for (double poison : kPoisons)
      runs.push_back({r, "set to " + hex_and_decimal(poison), run_forward(env, with_hidden_poison(c, r, poison).problem())});
  }
  for (const Perturbed &p : runs)
    if (!L.call(p.run.call, "forward (" + hidden_text(s, p) + ")") || !L.intact(p.run.out, "O") ||
        !L.intact(p.run.lse, "LSE"))
      return L.outcome();

  const std::vector<double> o = base.out.to_vector(), lse = base.lse.to_vector();
  const std::vector<std::int64_t> o_shape = base.out.shape(), lse_shape = base.lse.shape();
  // Visits every (O or LSE) element of rows 0..last: f(name, shape, index, row) returns false to stop.
  auto rows_upto = [&](std::int64_t last, auto &&f) {
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t h = 0; h < s.Hq; ++h)
        for (std::int64_t i = 0; i <= last; ++i) {
          if (!f("LSE", lse_shape, lse_offset(s, b, h, i), i)) return false;
          for (std::int64_t x = 0; x < s.Dv; ++x)
            if (!f("O", o_shape, out_offset(s, b, h, i, x), i)) return false;
        }
    return true;
  };
  auto value = [](const std::vector<double> &o_or, const std::vector<double> &lse_or, std::string_view name,
                  std::int64_t x) { return (name == "O" ? o_or : lse_or)[static_cast<std::size_t>(x)]; };
  auto empty = [&](std::int64_t i) { return visible_count(Mask::causal, i, s.Lq, s.Lk) == 0; };
  auto fixed = [](std::string_view name) { return name == "O" ? 0.0 : -kInf; };  // a row that sees no key

  // A row that sees no key must hold the contract's fixed value (O = 0, LSE = −∞); `ok` says when it does.
  auto check_empty_rows = [&](Step step, auto ok) {
    rows_upto(s.Lq - 1, [&](std::string_view name, const auto &shape, std::int64_t x, std::int64_t i) {
      const double got = value(o, lse, name, x);
      if (!empty(i) || ok(name, got)) return true;
      return L.fail(step, element_name(name, shape, x) + ": got " + hex_and_decimal(got) +
                              " in a row that sees no key (the contract fixes " + hex_and_decimal(fixed(name)) + ")");
    });
  };
  // Rows 0..r of every perturbed run against the clean run; `same` says when an element is unchanged enough.
  auto check_perturbed = [&](Step step, auto same, const char *how) {
    for (const Perturbed &p : runs) {
      const std::vector<double> po = p.run.out.to_vector(), pl = p.run.lse.to_vector();
      rows_upto(p.row, [&](std::string_view name, const auto &shape, std::int64_t x, std::int64_t) {
        const double was = value(o, lse, name, x), now = value(po, pl, name, x);
        if (same(was, now)) return true;
        return L.fail(step, element_name(name, shape, x) + ": " + how + " " + hex_and_decimal(now) + " with the " +
                                hidden_text(s, p) + ", " + hex_and_decimal(was) + " without");
      });
    }
  };
  // Step finite: a row that sees no key is not NaN (its LSE is −∞, as Ladder::finite: −∞ comes back −∞); no poison
  // makes a finite row non-finite.
  check_empty_rows(Step::finite, [&](std::string_view name, double got) {
    return name == "O" ? std::isfinite(got) : got == fixed(name);
  });
  check_perturbed(
      Step::finite, [](double was, double now) { return !std::isfinite(was) || std::isfinite(now); }, "got");
  // Step mask: rows that see no key are exactly O = 0, LSE = −∞; no hidden key changes a row that cannot see it.
  check_empty_rows(Step::mask, [&](std::string_view name, double got) { return got == fixed(name); });
  check_perturbed(Step::mask, same_value, "changed to");
  return L.outcome();
}
}  // namespace

const PropertyDef &causal_property() {
  static const PropertyDef def{
      .id = "causal",
      .formula = "i ≤ r ⇒ (O_i, LSE_i) unchanged when k_j, v_j (j > r + Lk − Lq) change or become NaN/±Inf; "
                 "V(i) = ∅ ⇒ O_i = 0, LSE_i = −∞",
      .summary = "a query row reads a key the causal mask hides from it, or a row that sees no key is not 0 / −∞",
      .require = &require,
      .run = &run,
  };
  return def;
}

}  // namespace attncheck::props
