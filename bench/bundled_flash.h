// The bundled flash kernel and its declared contract, for the benchmarks that judge it (linked with
// attncheck_builtin).
#pragma once

#include "attncheck/kernel_abi.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attncheck::bench {

/// The bundled kernels' "flash" entry; throws std::runtime_error when they export none.
inline const attncheck_kernel &bundled_flash() {
  std::int32_t n = 0;
  const attncheck_kernel *ks = attncheck_kernels(&n);
  const auto *k = std::find_if(ks, ks + n, [](const attncheck_kernel &x) { return std::string_view(x.name) == "flash"; });
  if (k == ks + n) throw std::runtime_error("the bundled kernels export no flash");
  return *k;
}

/// flash's declared contract text (contract.h), "" when it declares none.
inline std::string bundled_flash_contract() {
  std::int32_t n = 0;
  const attncheck_kernel_contract *cs = attncheck_contracts(&n);
  for (std::int32_t e = 0; e < n; ++e)
    if (std::string_view(cs[e].kernel) == "flash") return cs[e].contract;
  return "";
}

}  // namespace attncheck::bench
