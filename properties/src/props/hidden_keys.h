// Shared by causal and masked_nonfinite: under the causal mask a query row depends only on the keys it sees. For a
// row r, the keys hidden from it (j > last_visible(r), every batch and kv head) are hidden from every row i ≤ r
// (visibility grows with i under either alignment); so when they change, rows 0..r of O and LSE must come back
// identical. causal changes them to other finite values (what every correct kernel promises); masked_nonfinite
// poisons them with NaN/±Inf (what only kernels that skip masked keys promise: a dense P·V multiplies the hidden v
// by P = 0, and 0·NaN = NaN).
//
// No reference is needed: every check compares the kernel with itself. Identical means equal values: +0 and −0 are
// equal (a tiled kernel may add a masked key's 0·v and flip the sign of a zero sum), and NaN equals any NaN.
#pragma once

#include "attncheck/compare.h"
#include "attncheck/property.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace attncheck::props::hidden {

/// Rows whose hidden keys are changed, per case (spread over the distinct hidden sets): bounds the kernel calls
/// per case.
inline constexpr std::int64_t kMaxPerturbedRows = 4;

inline void require_causal(CaseOptions &o) { o.mask = Mask::causal; }  // the engine applies the declared alignment

/// The rows r whose hidden sets are tried: rows with a nonempty hidden set (last_visible(r) < Lk − 1), of which
/// rows hiding every key share one set (the largest such row checks the most rows). At most kMaxPerturbedRows of
/// the distinct sets, evenly spread, both ends included.
inline std::vector<std::int64_t> perturbed_rows(const CaseSpec &c) {
  const Shape &s = c.shape;
  std::vector<std::int64_t> candidates;
  for (std::int64_t r = 0; r < s.Lq; ++r) {
    const std::int64_t last = last_visible(c.mask, r, s.Lq, s.Lk);
    if (last >= s.Lk - 1) break;  // hides nothing, nor does any later row
    if (last < 0 && r + 1 < s.Lq && last_visible(c.mask, r + 1, s.Lq, s.Lk) < 0) continue;  // same (full) set
    candidates.push_back(r);
  }
  const auto n = static_cast<std::int64_t>(candidates.size());
  if (n <= kMaxPerturbedRows) return candidates;
  std::vector<std::int64_t> rows;
  for (std::int64_t t = 0; t < kMaxPerturbedRows; ++t)
    rows.push_back(candidates[static_cast<std::size_t>(t * (n - 1) / (kMaxPerturbedRows - 1))]);
  return rows;
}

/// One changed copy of the case and the kernel's forward on it.
struct Perturbed {
  std::int64_t row;  ///< rows 0..row must not change
  std::string what;  ///< "keys hidden from row 2 (j ≥ 3) set to NaN"
  Case changed;
  ForwardRun run;
};

inline std::string hidden_text(const CaseSpec &c, std::int64_t row, const std::string &how) {
  const std::int64_t first = std::max<std::int64_t>(0, last_visible(c.mask, row, c.shape.Lq, c.shape.Lk) + 1);
  return "keys hidden from row " + std::to_string(row) + " (j ≥ " + std::to_string(first) + ") " + how;
}

/// Runs the kernel on `c` and on each changed copy `change(c, r)` (described by `how`) for every perturbed row r,
/// and checks rows 0..r of each against the clean run: step finite — a finite element does not turn non-finite;
/// step mask — every element is unchanged. Failures record the changed copy (Ladder::judging).
template <class Change>
Outcome unchanged_rows(const Env &env, const Case &c, const std::vector<std::pair<std::string, Change>> &changes) {
  const Shape &s = c.spec.shape;
  const ForwardRun base = run_forward(env, c.problem());
  Ladder L;
  if (!L.call(base.call, "forward") || !L.intact(base.out, "O") || !L.intact(base.lse, "LSE")) return L.outcome();

  std::vector<Perturbed> runs;
  for (std::int64_t r : perturbed_rows(c.spec))
    for (const auto &[how, change] : changes) {
      Case changed = change(c, r);
      ForwardRun fr = run_forward(env, changed.problem());
      runs.push_back({r, hidden_text(c.spec, r, how), std::move(changed), std::move(fr)});
    }
  for (const Perturbed &p : runs) {
    L.judging(p.changed, p.what);
    if (!L.call(p.run.call, "forward (" + p.what + ")") || !L.intact(p.run.out, "O") || !L.intact(p.run.lse, "LSE"))
      return L.outcome();
  }
  L.judging_original();

  const std::vector<double> o = base.out.to_vector(), lse = base.lse.to_vector();
  auto same_value = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  // Rows 0..r of every perturbed run against the clean run; `same` says when an element is unchanged enough.
  auto check = [&](Step step, auto same, const char *how) {
    for (const Perturbed &p : runs) {
      L.judging(p.changed, p.what);
      const std::vector<double> po = p.run.out.to_vector(), pl = p.run.lse.to_vector();
      auto compare = [&](std::string_view name, const Tensor &t, const std::vector<double> &was,
                         const std::vector<double> &now, std::int64_t x) {
        const auto n = static_cast<std::size_t>(x);
        if (same(was[n], now[n])) return true;
        return L.fail(step,
                      element_name(name, t.shape(), x) + ": " + how + " " + hex_and_decimal(now[n]) + " with the " +
                          p.what + ", " + hex_and_decimal(was[n]) + " without",
                      element_finding(Finding::Kind::changed, name, t.shape(), x, now[n], was[n]));
      };
      for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t h = 0; h < s.Hq; ++h)
          for (std::int64_t i = 0; i <= p.row; ++i) {
            if (base.has_lse && !compare("LSE", base.lse, lse, pl, lse_offset(s, b, h, i))) return;
            for (std::int64_t x = 0; x < s.Dv; ++x)
              if (!compare("O", base.out, o, po, out_offset(s, b, h, i, x))) return;
          }
    }
  };
  check(Step::finite, [](double was, double now) { return !std::isfinite(was) || std::isfinite(now); }, "got");
  check(Step::mask, same_value, "changed to");
  return L.outcome();
}

}  // namespace attncheck::props::hidden
