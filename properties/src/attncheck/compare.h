// Comparing a kernel's tensor with exact values under per-element bounds.
#pragma once

#include "attncheck/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attncheck {

/// The element with the largest error ratio |got − exact| / bound (error_ratio conventions).
struct Worst {
  double ratio = 0;          ///< 0 when every element is exact
  std::int64_t index = -1;   ///< row-major element index, −1 for an empty tensor
  double got = 0, exact = 0, bound = 0;
  /// Keeps the larger of the two.
  void merge(const Worst &o) {
    if (o.ratio > ratio || index < 0) *this = o;
  }
  std::string describe() const;  ///< "ratio 3.2 at [12]: got 0x1.8p-1 (0.75), exact …, bound …"
};

/// Worst element of `got` (read in row-major order of its logical shape) against `exact` and `bound`.
Worst compare(const Tensor &got, const std::vector<double> &exact, const std::vector<double> &bound);

/// A float printed as hex and decimal: "0x1.8p-1 (0.75)".
std::string hex_and_decimal(double x);

}  // namespace attncheck
