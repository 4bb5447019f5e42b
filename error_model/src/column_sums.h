// A forward row's per-column sums over its keys (forward_bounds, SPEC.md §4.2), vectorized with Highway over the
// columns and dispatched to the CPU's best SIMD target. Every lane does the same IEEE operations in the same key order
// (multiplies and adds, never fused), so the sums have the same bits on every target.
#pragma once

#include <cstddef>

namespace attncheck::detail {

/// The running sums of one row, one value per column (each of length `cols`).
struct ColumnSumsOut {
  double *arg, *hull, *abs, *vmax, *round, *centered;
};

/// For each key t < keys, with v = factor[t]·rows[t][c] and dv = |v − O[c]|, for every column c:
///   arg += w_arg[t]·dv, hull = max(hull, dv), abs += w_abs[t]·|v|, vmax = max(vmax, |v|),
///   and with `round` round += a[t]·|v|, with `centered` centered += a[t]·dv.
void add_column_sums(std::size_t keys, const double *const *rows, const double *factor, const double *w_arg,
                     const double *w_abs, const double *a, bool round, bool centered, const double *O,
                     std::size_t cols, const ColumnSumsOut &out);

}  // namespace attncheck::detail
