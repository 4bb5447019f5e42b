// add_column_sums (column_sums.h) for every Highway target; compiled with -ffp-contract=off (error_model/CMakeLists.txt)
// so that no multiply and add are fused on one target and not on another.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "column_sums.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "column_sums.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kRound, bool kCentered>
void AddColumnSums(std::size_t keys, const double *const *rows, const double *factor, const double *w_arg,
                   const double *w_abs, const double *a, const double *O, std::size_t cols, const ColumnSumsOut &out) {
  const hn::ScalableTag<double> d;
  const std::size_t N = hn::Lanes(d);
  std::size_t c = 0;
  for (; c + N <= cols; c += N) {  // a vector of columns, every key in order
    const auto o = hn::LoadU(d, O + c);
    auto arg = hn::LoadU(d, out.arg + c), hull = hn::LoadU(d, out.hull + c), abs = hn::LoadU(d, out.abs + c),
         vmax = hn::LoadU(d, out.vmax + c), round = hn::Zero(d), centered = hn::Zero(d);
    if constexpr (kRound) round = hn::LoadU(d, out.round + c);
    if constexpr (kCentered) centered = hn::LoadU(d, out.centered + c);
    for (std::size_t t = 0; t < keys; ++t) {
      const auto v = hn::Mul(hn::Set(d, factor[t]), hn::LoadU(d, rows[t] + c));
      const auto dv = hn::Abs(hn::Sub(v, o)), av = hn::Abs(v);
      arg = hn::Add(arg, hn::Mul(hn::Set(d, w_arg[t]), dv));
      hull = hn::Max(hull, dv);
      abs = hn::Add(abs, hn::Mul(hn::Set(d, w_abs[t]), av));
      vmax = hn::Max(vmax, av);
      if constexpr (kRound) round = hn::Add(round, hn::Mul(hn::Set(d, a[t]), av));
      if constexpr (kCentered) centered = hn::Add(centered, hn::Mul(hn::Set(d, a[t]), dv));
    }
    hn::StoreU(arg, d, out.arg + c);
    hn::StoreU(hull, d, out.hull + c);
    hn::StoreU(abs, d, out.abs + c);
    hn::StoreU(vmax, d, out.vmax + c);
    if constexpr (kRound) hn::StoreU(round, d, out.round + c);
    if constexpr (kCentered) hn::StoreU(centered, d, out.centered + c);
  }
  for (; c < cols; ++c)  // the last columns one at a time: the same operations as a lane
    for (std::size_t t = 0; t < keys; ++t) {
      const double v = factor[t] * rows[t][c], dv = std::fabs(v - O[c]), av = std::fabs(v);
      out.arg[c] += w_arg[t] * dv;
      out.hull[c] = std::max(out.hull[c], dv);
      out.abs[c] += w_abs[t] * av;
      out.vmax[c] = std::max(out.vmax[c], av);
      if constexpr (kRound) out.round[c] += a[t] * av;
      if constexpr (kCentered) out.centered[c] += a[t] * dv;
    }
}

void AddColumnSumsAll(std::size_t keys, const double *const *rows, const double *factor, const double *w_arg,
                      const double *w_abs, const double *a, bool round, bool centered, const double *O,
                      std::size_t cols, const ColumnSumsOut &out) {
  if (round)
    centered ? AddColumnSums<true, true>(keys, rows, factor, w_arg, w_abs, a, O, cols, out)
             : AddColumnSums<true, false>(keys, rows, factor, w_arg, w_abs, a, O, cols, out);
  else
    centered ? AddColumnSums<false, true>(keys, rows, factor, w_arg, w_abs, a, O, cols, out)
             : AddColumnSums<false, false>(keys, rows, factor, w_arg, w_abs, a, O, cols, out);
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attncheck::detail {
HWY_EXPORT(AddColumnSumsAll);

void add_column_sums(std::size_t keys, const double *const *rows, const double *factor, const double *w_arg,
                     const double *w_abs, const double *a, bool round, bool centered, const double *O,
                     std::size_t cols, const ColumnSumsOut &out) {
  HWY_DYNAMIC_DISPATCH(AddColumnSumsAll)(keys, rows, factor, w_arg, w_abs, a, round, centered, O, cols, out);
}
}  // namespace attncheck::detail
#endif
