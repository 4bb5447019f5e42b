// Double-precision matrix products for the fast reference and the error model's bounds: Eigen's GEMM, compiled for
// more than one SIMD path and chosen at run time (SPEC.md §5.1).
//
// Eigen picks its vector width when it is compiled, so the products are compiled twice — for x86-64's baseline
// (SSE2) and for AVX2 with FMA (about 2.6× the baseline's speed on a 4-wide FMA core) — each inside its own copy of
// Eigen's namespace, and `fast_simd_path()` picks one. Whatever the path, each output of a product is a sum of the
// k products in some order: callers bound its rounding for any order (γ_k), so no bound depends on the path.
// `SimdPath::baseline` gives the same bits on every x86-64 CPU: the error model uses it for bounds a report prints.
//
// Example:
//   // S = Q·Kᵀ: Q [m, d] and K [n, d] row-major, S [m, n]
//   attncheck::gemm(attncheck::fast_simd_path(), m, n, d, {q, d, false}, {k, d, true}, s, n);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace attncheck {

/// The SIMD code path of a double matrix product.
enum class SimdPath {
  baseline,  ///< x86-64's SSE2 (or the architecture's own baseline): the same bits on every CPU of the architecture
  avx2,      ///< AVX2 with FMA (x86-64 only)
};

/// "baseline" or "avx2".
std::string simd_path_name(SimdPath path);

/// The path fast products take in this process: avx2 where the CPU (and the build) has AVX2 and FMA, else baseline.
/// The environment variable ATTNCHECK_SIMD=baseline forces the baseline (ATTNCHECK_SIMD=best, or unset: the best);
/// any other value throws std::invalid_argument naming it. Read once.
SimdPath fast_simd_path();

/// A row-major double matrix operand: element (r, c) of the stored matrix at data[r·ld + c]; `transposed` uses its
/// transpose.
struct MatrixOperand {
  const double *data;
  std::int64_t ld;
  bool transposed;
};

/// |x| element by element: the operand of a magnitude product (|Q|·|K|ᵀ, W·|V|, …).
std::vector<double> magnitudes(const std::vector<double> &x);

/// Multiply-adds (Shape::work()) below which a problem's products and bounds stay on one thread: waking OpenMP's
/// threads would cost more than they save.
inline constexpr std::int64_t kThreadedWork = std::int64_t{1} << 22;

/// The parts a backward splits each of its `groups` (b, kv) groups into, over `units` units of work per group (row
/// tiles): ⌈4 / groups⌉, at most `units`, at least 1. Each part is a thread's task with its own sums of dK and dV,
/// added in part order at the end: a problem of one kv head spreads over the cores, and the bits depend on the shape
/// alone, never on the thread count.
inline std::int64_t backward_parts(std::int64_t groups, std::int64_t units) {
  constexpr std::int64_t kParts = 4;  // enough tasks for the cores of a workstation; each costs a copy of dK and dV
  const std::int64_t per_group = groups > 0 ? (kParts + groups - 1) / groups : 1;
  return std::max<std::int64_t>(1, std::min(per_group, units));
}

/// C = op(A)·op(B) (or C += op(A)·op(B) with `accumulate`), op(A) m×k, op(B) k×n, C m×n row-major with leading
/// dimension ldc, on `path`. m, n or k may be 0 (k = 0: C = 0, or unchanged with accumulate). Single-threaded:
/// callers spread work over threads themselves, so the bits do not depend on the thread count.
void gemm(SimdPath path, std::int64_t m, std::int64_t n, std::int64_t k, MatrixOperand A, MatrixOperand B, double *C,
          std::int64_t ldc, bool accumulate = false);

}  // namespace attncheck
