// The hot loops of "flash", vectorized with Highway and dispatched at run time to the best instruction set the
// CPU has (HWY_DYNAMIC_DISPATCH over the targets foreach_target.h compiles: SSE4, AVX2/FMA, AVX-512, …).
//
// Tiles are row-major float32 with a leading dimension (ld, in floats). Every row of a tile that a function writes
// or reads "up to n columns" must be padded to round_up(n, kTilePadFloats) floats: the loops run whole vectors
// over the padding instead of a scalar tail. Padding values may be anything, ∞ and NaN included (scratch keeps a
// previous task's values there): no result depends on them.
#pragma once

#include "attncheck/dtype.h"

#include <cstddef>
#include <cstdint>

namespace attncheck::builtin::simd {

/// Row padding, in floats, that the functions below may read and write past n: 64 bytes, one cache line and one
/// AVX-512 vector (vectors wider than this are capped to it).
inline constexpr std::int64_t kTilePadFloats = 16;

/// gemm's band when every term reaches every column (far beyond any tile, far from overflow).
inline constexpr std::int64_t kNoBand = std::int64_t{1} << 60;

/// C[i][j] = (accumulate ? C[i][j] : 0) + Σ_{p<k, j+lower ≤ p ≤ j+band} A(i,p)·B[p][j] for i < m, j < n, with
/// A(i,p) = A[i·a_row + p·a_col] (so a row-major A is (lda, 1) and a transposed one (1, lda)). Each sum runs over p
/// in order with fused multiply-adds (one rounding per term). B and C rows are padded (see above). With accumulate
/// and a non-null col_scale (padded like a row of C), C[i][j] is first multiplied by col_scale[j] (the online-softmax
/// rescale of a transposed accumulator, fused into the load of C). Terms outside the band (p > j + band: keys the
/// causal mask or a window hides from query column j; p < j + lower: keys a window leaves behind) are never
/// computed, so A may hold ∞ or NaN there.
void gemm(const float *A, std::int64_t a_row, std::int64_t a_col, const float *B, std::int64_t ldb, float *C,
          std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
          const float *col_scale = nullptr, std::int64_t band = kNoBand, std::int64_t lower = -kNoBand);

/// The online-softmax step of online_softmax on a transposed tile, in base 2 (S holds scores times log2 e; m is
/// in the same units): S is rows (keys) × n (queries), each column one query. For each column c < n (vectorized
/// across columns; m, l, alpha padded like a row):
///   m' = max(m[c], max_{r<rows} S[r][c]),  S[r][c] ← 2^(S[r][c] − m'),  alpha[c] = 2^(m[c]−m'),
///   l[c] ← alpha[c]·l[c] + Σ_r S[r][c],  m[c] ← m'.   A column with m' = −∞ keeps P = 0, l = 0, alpha = 0.
void online_softmax_cols(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, float *m, float *l,
                         float *alpha);

/// x[i] ← 2^x[i] for i < n (x[i] ≤ 0 or NaN; results below 2⁻¹²⁶ flush to 0): the exp2 of online_softmax_cols,
/// for tests. Within 2 ulps of the exact value (a degree-6 minimax polynomial on [−½, ½]).
void exp2_inplace(float *x, std::int64_t n);

/// X[r][j] /= a[j] for r < rows, j < n (a padded like a row; a[j] ≠ 0 for j < n).
void divide_cols(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a);

/// One online-softmax step for each row r < rows of a tile of n scores (−∞ where masked):
///   m' = max(m[r], max_j S[r][j]),  S[r][j] ← exp(S[r][j] − m'),  l[r] ← e^{m[r]−m'}·l[r] + Σ_j S[r][j],
///   alpha[r] = e^{m[r]−m'},  m[r] ← m'.
/// A row that has seen only masked keys (m' = −∞) keeps P = 0, l = 0 and gets alpha = 0 (never NaN).
void online_softmax(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, float *m, float *l,
                    float *alpha);

/// P[r][j] = exp(S[r][j] − lse[r]) in place, for r < rows, j < n; 0 for a row with lse = −∞.
void exp_minus_lse(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, const float *lse);

/// The same on a transposed tile (one query per column, lse padded like a row): P[r][c] = exp(S[r][c] − lse[c]).
void exp_minus_lse_cols(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, const float *lse);

/// dP[r][c] ← P[r][c]·(dP[r][c] − delta[c]) on transposed tiles (delta padded like a row).
void score_gradient_cols(const float *P, float *dP, std::int64_t ld, std::int64_t rows, std::int64_t n,
                         const float *delta);

/// dP[r][j] ← P[r][j]·(dP[r][j] − delta[r]) for r < rows, j < n (dS of the FlashAttention backward).
void score_gradient(const float *P, float *dP, std::int64_t ld, std::int64_t rows, std::int64_t n,
                    const float *delta);

/// Softcapping of a tile: T = tanh(in·X[r][j]), X[r][j] ← out·T for r < rows, j < n; T is also stored at
/// tanh_out[r·ldx + j] (padded like X) when tanh_out is not null. With in = 1/c and out = c: c·tanh(x/c).
void softcap(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float in, float out, float *tanh_out);

/// dS[r][j] ← dS[r][j]·(1 − T[r][j]²) for r < rows, j < n (T laid out like dS): softcap's chain rule.
void softcap_grad(float *dS, const float *T, std::int64_t ld, std::int64_t rows, std::int64_t n);

/// X[r][c] ← X[r][c] − slope·|off + c − r| for r < rows, c < n (one rounding): ALiBi's bias on a tile whose row r
/// and column c lie off + c − r positions apart. Distances must stay below 2²⁴ (exact in float).
void distance_bias(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, std::int64_t off, float slope);

/// X[r][j] *= a for r < rows, j < n.
void scale(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float a);
/// X[r][j] *= a[r] for r < rows, j < n.
void scale_rows(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a);
/// X[r][j] /= a[r] for r < rows, j < n (a[r] ≠ 0).
void divide_rows(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a);

/// out[r] = Σ_{j<n} A[r][j]·B[r][j] for r < rows. The padding of A and B never enters the sum, whatever it holds.
void row_dots(const float *A, std::int64_t lda, const float *B, std::int64_t ldb, std::int64_t rows, std::int64_t n,
              float *out);

/// dst[x] = src[x] widened exactly to float32, for x < n; src is contiguous storage of dtype dt (any alignment).
/// dst needs no padding.
void widen(const std::byte *src, Dtype dt, std::int64_t n, float *dst);

/// dst[x] = src[x] rounded to nearest even to dtype dt (as float_to_f16_bits / float_to_bf16_bits do), for
/// x < n; dst is contiguous storage of dtype dt (any alignment), written only at [0, n).
void narrow(const float *src, Dtype dt, std::int64_t n, std::byte *dst);

/// Name of the instruction set the dispatch chose on this CPU (e.g. "AVX2"), for benchmarks and reports.
const char *target_name();

}  // namespace attncheck::builtin::simd
