#include "attncheck/compare.h"

#include "attncheck/error_model.h"

#include <cstdio>
#include <stdexcept>

namespace attncheck {

std::string hex_and_decimal(double x) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%a (%.9g)", x, x);
  return buf;
}

std::string Worst::describe() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ratio %.3g at [%lld]: ", ratio, static_cast<long long>(index));
  return buf + ("got " + hex_and_decimal(got) + ", exact " + hex_and_decimal(exact) + ", bound " +
                hex_and_decimal(bound));
}

Worst compare(const Tensor &got, const std::vector<double> &exact, const std::vector<double> &bound) {
  const std::vector<double> g = got.to_vector();
  if (g.size() != exact.size() || g.size() != bound.size())
    throw std::invalid_argument("compare: sizes differ (" + got.describe() + ")");
  Worst w;
  for (std::size_t x = 0; x < g.size(); ++x) {
    const double r = error_ratio(g[x], exact[x], bound[x]);
    if (w.index < 0 || r > w.ratio) w = Worst{r, static_cast<std::int64_t>(x), g[x], exact[x], bound[x]};
  }
  return w;
}

}  // namespace attncheck
