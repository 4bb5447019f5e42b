// Dispatch of the double matrix products to a SIMD path (products.h).
#include "attncheck/products.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace attncheck {
namespace gemm_paths {
#define ATTNCHECK_DECLARE_GEMM_PATH(path)                                                                          \
  namespace path {                                                                                                 \
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const double *a, std::int64_t lda, bool ta,            \
            const double *b, std::int64_t ldb, bool tb, double *c, std::int64_t ldc, bool accumulate);              \
  }
ATTNCHECK_DECLARE_GEMM_PATH(baseline)
#ifdef ATTNCHECK_HAVE_AVX2_PATH
ATTNCHECK_DECLARE_GEMM_PATH(avx2)
#endif
#undef ATTNCHECK_DECLARE_GEMM_PATH
}  // namespace gemm_paths

namespace {

SimdPath best_path() {
#ifdef ATTNCHECK_HAVE_AVX2_PATH
  // Highway's HWY_AVX2 target requires AVX2, FMA, BMI2 and the OS's saving of the YMM state.
  if (hwy::SupportedTargets() & (HWY_AVX2 | HWY_AVX3)) return SimdPath::avx2;
#endif
  return SimdPath::baseline;
}

SimdPath chosen_path() {
  const char *env = std::getenv("ATTNCHECK_SIMD");
  const std::string_view v = env ? env : "";
  if (v.empty() || v == "best") return best_path();
  if (v == "baseline") return SimdPath::baseline;
  throw std::invalid_argument("ATTNCHECK_SIMD=" + std::string(v) + " is not a SIMD path: use baseline or best");
}

}  // namespace

std::vector<double> magnitudes(const std::vector<double> &x) {
  std::vector<double> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), [](double y) { return std::fabs(y); });
  return out;
}

std::string simd_path_name(SimdPath path) { return path == SimdPath::avx2 ? "avx2" : "baseline"; }

SimdPath fast_simd_path() {
  static const SimdPath path = chosen_path();
  return path;
}

void gemm(SimdPath path, std::int64_t m, std::int64_t n, std::int64_t k, MatrixOperand A, MatrixOperand B, double *C,
          std::int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
#ifdef ATTNCHECK_HAVE_AVX2_PATH
  static const bool avx2 = best_path() == SimdPath::avx2;  // never the AVX2 code on a CPU without it
  if (path == SimdPath::avx2 && avx2)
    return gemm_paths::avx2::gemm(m, n, k, A.data, A.ld, A.transposed, B.data, B.ld, B.transposed, C, ldc,
                                  accumulate);
#endif
  (void)path;
  gemm_paths::baseline::gemm(m, n, k, A.data, A.ld, A.transposed, B.data, B.ld, B.transposed, C, ldc, accumulate);
}

}  // namespace attncheck
