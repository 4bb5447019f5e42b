// Helpers of the bundled-kernel tests: kernel lookup through the public ABI (the rest is tests/support's
// kernel_testkit.h).
#pragma once

#include "attncheck/builtin.h"
#include "attncheck/error_model.h"
#include "attncheck/kernel_call.h"
#include "attncheck/reference.h"
#include "kernel_testkit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace implt {

using namespace attncheck;
using namespace attncheck::testkit;

/// The bundled kernel called `name`, found through attncheck_kernels() as a loader would.
inline const attncheck_kernel &kernel(std::string_view name) {
  std::int32_t n = 0;
  const attncheck_kernel *ks = attncheck_kernels(&n);
  for (std::int32_t i = 0; i < n; ++i)
    if (name == ks[i].name) return ks[i];
  throw std::invalid_argument("no bundled kernel named " + std::string(name));
}

}  // namespace implt
