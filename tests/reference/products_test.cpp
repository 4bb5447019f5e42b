// The double matrix products (products.h): every transposition, accumulation and empty dimension on every SIMD path,
// each output within the γ_k bound of any summation order; the baseline path's bits are its own on every CPU.
#include "attncheck/products.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

using namespace attncheck;

namespace {

/// op(X)(r, c) of a row-major matrix with leading dimension ld.
double at(const std::vector<double> &x, std::int64_t ld, bool t, std::int64_t r, std::int64_t c) {
  return t ? x[static_cast<std::size_t>(c * ld + r)] : x[static_cast<std::size_t>(r * ld + c)];
}

std::vector<double> random_matrix(std::mt19937_64 &rng, std::int64_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (double &v : x) v = u(rng);
  return x;
}

}  // namespace

TEST_CASE("every path's product is within γ_k of the exact one, for every transposition and with accumulation",
          "[products]") {
  std::mt19937_64 rng(55);
  const std::int64_t m = 37, n = 29, k = 70;
  for (SimdPath path : {SimdPath::baseline, fast_simd_path()})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          // Leading dimensions past the used columns: the operands are views of wider matrices.
          const std::int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
          const auto A = random_matrix(rng, (ta ? k : m) * lda), B = random_matrix(rng, (tb ? n : k) * ldb);
          std::vector<double> C = random_matrix(rng, m * ldc), C0 = C;
          gemm(path, m, n, k, {A.data(), lda, ta}, {B.data(), ldb, tb}, C.data(), ldc, acc);
          const double gamma = (k + 1) * 0x1p-53 / (1 - (k + 1) * 0x1p-53);
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t c = 0; c < n; ++c) {
              long double exact = acc ? C0[static_cast<std::size_t>(r * ldc + c)] : 0;
              long double mag = std::fabs(static_cast<long double>(exact));
              for (std::int64_t t = 0; t < k; ++t) {
                const long double x = static_cast<long double>(at(A, lda, ta, r, t)) * at(B, ldb, tb, t, c);
                exact += x;
                mag += std::fabs(x);
              }
              INFO(simd_path_name(path) << " ta=" << ta << " tb=" << tb << " acc=" << acc);
              REQUIRE(std::fabs(C[static_cast<std::size_t>(r * ldc + c)] - exact) <= gamma * mag);
            }
          // Padding columns are left alone.
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t c = n; c < ldc; ++c)
              REQUIRE(C[static_cast<std::size_t>(r * ldc + c)] == C0[static_cast<std::size_t>(r * ldc + c)]);
        }
}

TEST_CASE("a product over no terms is zero, or leaves an accumulated result as it was", "[products]") {
  std::vector<double> C{1, 2, 3, 4};
  const double none = 0;
  gemm(fast_simd_path(), 2, 2, 0, {&none, 0, false}, {&none, 2, false}, C.data(), 2, true);
  REQUIRE(C == std::vector<double>{1, 2, 3, 4});
  gemm(fast_simd_path(), 2, 2, 0, {&none, 0, false}, {&none, 2, false}, C.data(), 2);
  REQUIRE(C == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("the fast path is AVX2 on a CPU that has it, and names itself", "[products]") {
  REQUIRE((simd_path_name(SimdPath::baseline) == "baseline" && simd_path_name(SimdPath::avx2) == "avx2"));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !std::getenv("ATTNCHECK_SIMD"))
    REQUIRE(fast_simd_path() == SimdPath::avx2);
#endif
}
