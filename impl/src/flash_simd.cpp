// Highway implementations of flash_simd.h, compiled once per SIMD target (foreach_target.h re-includes this file)
// and chosen at run time by HWY_DYNAMIC_DISPATCH.
#include "flash_simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash_simd.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attncheck::builtin::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// float32 vectors, capped at the tile padding so that whole-vector loops stay inside padded rows.
using DF = hn::CappedTag<float, static_cast<std::size_t>(kTilePadFloats)>;
using VF = hn::Vec<DF>;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

/// Register block of the matrix product: kGemmRows rows of C × kGemmVecs vectors of columns. FMA latency (4 cycles)
/// × 2 FMA ports needs ≥ 8 independent accumulators. AVX2 has 16 registers: 4 × 2 accumulators + 2 B vectors + the
/// broadcast A element. AVX-512 has 32: 4 × 4 accumulators (a whole kBlockK = 64-key row of S per panel).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr std::size_t kGemmRows = 4;
constexpr std::size_t kGemmVecs = 4;
#else
constexpr std::size_t kGemmRows = 4;
constexpr std::size_t kGemmVecs = 2;
#endif

/// C block of R rows × U vectors at (i, j): c (+)= Σ_p A(i+r, p)·B[p][j + u·N].
template <std::size_t R, std::size_t U>
HWY_INLINE void GemmBlock(const float *HWY_RESTRICT A, std::int64_t a_row, std::int64_t a_col,
                          const float *HWY_RESTRICT B, std::int64_t ldb, float *HWY_RESTRICT C, std::int64_t ldc,
                          std::int64_t i, std::int64_t j, std::int64_t k, bool accumulate,
                          const float *HWY_RESTRICT col_scale, std::int64_t band, std::int64_t lower) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  VF c[R][U];
  if (accumulate && col_scale) {
    VF cs[U];
    for (std::size_t u = 0; u < U; ++u) cs[u] = hn::LoadU(d, col_scale + j + static_cast<std::int64_t>(u) * N);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t u = 0; u < U; ++u)
        c[r][u] = hn::Mul(
            hn::LoadU(d, C + (i + static_cast<std::int64_t>(r)) * ldc + j + static_cast<std::int64_t>(u) * N), cs[u]);
  } else {
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t u = 0; u < U; ++u)
        c[r][u] = accumulate ? hn::LoadU(d, C + (i + static_cast<std::int64_t>(r)) * ldc + j +
                                                static_cast<std::int64_t>(u) * N)
                             : hn::Zero(d);
  }
  const float *a = A + i * a_row;
  // Column col takes the terms col + lower ≤ p ≤ col + band. Of the block's columns [j, j + U·N): terms in
  // [j + U·N − 1 + lower, j + band] reach every one, terms in [j + lower, j + U·N − 1 + band] some of them.
  const std::int64_t width = static_cast<std::int64_t>(U) * N;
  const std::int64_t k_lo = std::clamp<std::int64_t>(j + lower, 0, k);
  const std::int64_t k_hi = std::clamp<std::int64_t>(j + width + band, 0, k);
  const std::int64_t all_lo = std::clamp<std::int64_t>(j + width - 1 + lower, k_lo, k_hi);
  const std::int64_t all_hi = std::clamp<std::int64_t>(j + band + 1, all_lo, k_hi);
  // The band's edges: lanes of columns the term does not reach keep C as it is — selected, not multiplied by a
  // zero B, because A may hold ∞ or NaN there (a key the causal mask or a window hides) and 0·∞ = NaN.
  const auto edge = [&](std::int64_t p_begin, std::int64_t p_end) {
    for (std::int64_t p = p_begin; p < p_end; ++p) {
      VF b[U];
      hn::Mask<DF> in[U];
      for (std::size_t u = 0; u < U; ++u) {
        const std::int64_t col = j + static_cast<std::int64_t>(u) * N;
        b[u] = hn::LoadU(d, B + p * ldb + col);
        // Lanes col + lane with p − band ≤ col + lane ≤ p − lower.
        const auto before = hn::FirstN(d, static_cast<std::size_t>(std::clamp<std::int64_t>(p - band - col, 0, N)));
        const auto upto = hn::FirstN(d, static_cast<std::size_t>(std::clamp<std::int64_t>(p - lower - col + 1, 0, N)));
        in[u] = hn::AndNot(before, upto);
      }
      for (std::size_t r = 0; r < R; ++r) {
        const VF ar = hn::Set(d, a[static_cast<std::int64_t>(r) * a_row + p * a_col]);
        for (std::size_t u = 0; u < U; ++u) c[r][u] = hn::IfThenElse(in[u], hn::MulAdd(ar, b[u], c[r][u]), c[r][u]);
      }
    }
  };
  edge(k_lo, all_lo);
  for (std::int64_t p = all_lo; p < all_hi; ++p) {
    VF b[U];
    for (std::size_t u = 0; u < U; ++u) b[u] = hn::LoadU(d, B + p * ldb + j + static_cast<std::int64_t>(u) * N);
    for (std::size_t r = 0; r < R; ++r) {
      const VF ar = hn::Set(d, a[static_cast<std::int64_t>(r) * a_row + p * a_col]);
      for (std::size_t u = 0; u < U; ++u) c[r][u] = hn::MulAdd(ar, b[u], c[r][u]);
    }
  }
  edge(all_hi, k_hi);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t u = 0; u < U; ++u)
      hn::StoreU(c[r][u], d, C + (i + static_cast<std::int64_t>(r)) * ldc + j + static_cast<std::int64_t>(u) * N);
}

/// The last m − i < R rows of a panel, as one block of that many rows.
template <std::size_t R, std::size_t U>
HWY_INLINE void GemmTail(const float *HWY_RESTRICT A, std::int64_t a_row, std::int64_t a_col,
                         const float *HWY_RESTRICT B, std::int64_t ldb, float *HWY_RESTRICT C, std::int64_t ldc,
                         std::int64_t rows, std::int64_t i, std::int64_t j, std::int64_t k, bool accumulate,
                         const float *HWY_RESTRICT col_scale, std::int64_t band, std::int64_t lower) {
  if constexpr (R > 1) {
    if (rows == static_cast<std::int64_t>(R) - 1) {
      GemmBlock<R - 1, U>(A, a_row, a_col, B, ldb, C, ldc, i, j, k, accumulate, col_scale, band, lower);
      return;
    }
    GemmTail<R - 1, U>(A, a_row, a_col, B, ldb, C, ldc, rows, i, j, k, accumulate, col_scale, band, lower);
  }
}

/// All rows of C for the U-vector column panel at j.
template <std::size_t U>
HWY_INLINE void GemmPanel(const float *HWY_RESTRICT A, std::int64_t a_row, std::int64_t a_col,
                          const float *HWY_RESTRICT B, std::int64_t ldb, float *HWY_RESTRICT C, std::int64_t ldc,
                          std::int64_t m, std::int64_t j, std::int64_t k, bool accumulate,
                          const float *HWY_RESTRICT col_scale, std::int64_t band, std::int64_t lower) {
  constexpr std::int64_t R = static_cast<std::int64_t>(kGemmRows);
  std::int64_t i = 0;
  for (; i + R <= m; i += R)
    GemmBlock<kGemmRows, U>(A, a_row, a_col, B, ldb, C, ldc, i, j, k, accumulate, col_scale, band, lower);
  if (i < m)
    GemmTail<kGemmRows, U>(A, a_row, a_col, B, ldb, C, ldc, m - i, i, j, k, accumulate, col_scale, band, lower);
}

void Gemm(const float *HWY_RESTRICT A, std::int64_t a_row, std::int64_t a_col, const float *HWY_RESTRICT B,
          std::int64_t ldb, float *HWY_RESTRICT C, std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate, const float *HWY_RESTRICT col_scale, std::int64_t band, std::int64_t lower) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d)), panel = N * static_cast<std::int64_t>(kGemmVecs);
  std::int64_t j = 0;
  for (; j + panel <= n; j += panel)
    GemmPanel<kGemmVecs>(A, a_row, a_col, B, ldb, C, ldc, m, j, k, accumulate, col_scale, band, lower);
  if constexpr (kGemmVecs > 2)
    for (; j + 2 * N <= n; j += 2 * N)
      GemmPanel<2>(A, a_row, a_col, B, ldb, C, ldc, m, j, k, accumulate, col_scale, band, lower);
  // The rest, one vector at a time; the last one runs into the row padding.
  for (; j < n; j += N) GemmPanel<1>(A, a_row, a_col, B, ldb, C, ldc, m, j, k, accumulate, col_scale, band, lower);
}

/// Lanes j0 + lane < n of a vector starting at column j0.
HWY_INLINE hn::Mask<DF> Valid(std::int64_t j0, std::int64_t n) {
  return hn::FirstN(DF(), static_cast<std::size_t>(n - j0));
}

void OnlineSoftmax(float *HWY_RESTRICT S, std::int64_t lds, std::int64_t rows, std::int64_t n, float *HWY_RESTRICT m,
                   float *HWY_RESTRICT l, float *HWY_RESTRICT alpha) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF minus_inf = hn::Set(d, kMinusInf);
  for (std::int64_t r = 0; r < rows; ++r) {
    float *s = S + r * lds;
    VF vmax = minus_inf;
    for (std::int64_t j = 0; j < n; j += N)
      vmax = hn::Max(vmax, hn::IfThenElse(Valid(j, n), hn::LoadU(d, s + j), minus_inf));
    const float m_new = std::max(m[r], hn::GetLane(hn::MaxOfLanes(d, vmax)));
    // A row that has seen only masked keys shifts by 0: exp(−∞ − 0) = 0 rather than exp(−∞ + ∞) = NaN.
    const float shift = m_new == kMinusInf ? 0.0f : m_new;
    const VF vshift = hn::Set(d, shift);
    VF vsum = hn::Zero(d);
    for (std::int64_t j = 0; j < n; j += N) {
      const VF p = hn::IfThenElseZero(Valid(j, n), hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), vshift)));
      hn::StoreU(p, d, s + j);
      vsum = hn::Add(vsum, p);
    }
    alpha[r] = std::exp(m[r] - shift);
    l[r] = l[r] * alpha[r] + hn::GetLane(hn::SumOfLanes(d, vsum));
    m[r] = m_new;
  }
}

/// 2^x for x ≤ 0 (or NaN): 2^n · p(f) with n = round(x), f = x − n ∈ [−½, ½] (exact), p a degree-6 minimax
/// polynomial of 2^f (relative error 1.9e-9, far below float's 6e-8; the Horner evaluation adds about one
/// rounding). Arguments below −126 give 0 (the flush below the smallest normal the error model allows).
HWY_INLINE VF Exp2(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  const VF lowest = hn::Set(d, -126.0f);
  const VF xc = hn::Max(x, lowest);
  const VF n = hn::Round(xc);
  const VF f = hn::Sub(xc, n);
  VF p = hn::Set(d, 1.5345812161311629e-4f);
  p = hn::MulAdd(p, f, hn::Set(d, 1.3399931177239738e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 9.618488956331182e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.550328777105325e-2f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.24022646890645522f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.6931472057371958f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0000000005541647f));
  const VF two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  const VF y = hn::Mul(p, two_n);
  // NaN stays NaN (x ≠ x); −∞ and anything below −126 give 0.
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenZeroElse(hn::Lt(x, lowest), y));
}

void Exp2Inplace(float *HWY_RESTRICT x, std::int64_t n) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(Exp2(d, hn::LoadU(d, x + i)), d, x + i);
  if (i < n) {
    HWY_ALIGN float tail[kTilePadFloats] = {};
    std::memcpy(tail, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    hn::Store(Exp2(d, hn::Load(d, tail)), d, tail);
    std::memcpy(x + i, tail, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

void OnlineSoftmaxCols(float *HWY_RESTRICT S, std::int64_t lds, std::int64_t rows, std::int64_t n,
                       float *HWY_RESTRICT m, float *HWY_RESTRICT l, float *HWY_RESTRICT alpha) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF minus_inf = hn::Set(d, kMinusInf);
  for (std::int64_t c = 0; c < n; c += N) {
    VF vmax = minus_inf;
    for (std::int64_t r = 0; r < rows; ++r) vmax = hn::Max(vmax, hn::LoadU(d, S + r * lds + c));
    const VF m_old = hn::LoadU(d, m + c), m_new = hn::Max(m_old, vmax);
    // A column that has seen only masked keys shifts by 0: 2^(−∞ − 0) = 0 rather than 2^(−∞ + ∞) = NaN.
    const VF shift = hn::IfThenZeroElse(hn::Eq(m_new, minus_inf), m_new);
    const VF a = Exp2(d, hn::Sub(m_old, shift));
    VF sum0 = hn::Zero(d), sum1 = hn::Zero(d);
    std::int64_t r = 0;
    for (; r + 2 <= rows; r += 2) {
      float *s0 = S + r * lds + c, *s1 = s0 + lds;
      const VF p0 = Exp2(d, hn::Sub(hn::LoadU(d, s0), shift));
      const VF p1 = Exp2(d, hn::Sub(hn::LoadU(d, s1), shift));
      hn::StoreU(p0, d, s0);
      hn::StoreU(p1, d, s1);
      sum0 = hn::Add(sum0, p0);
      sum1 = hn::Add(sum1, p1);
    }
    if (r < rows) {
      float *s0 = S + r * lds + c;
      const VF p0 = Exp2(d, hn::Sub(hn::LoadU(d, s0), shift));
      hn::StoreU(p0, d, s0);
      sum0 = hn::Add(sum0, p0);
    }
    hn::StoreU(hn::MulAdd(a, hn::LoadU(d, l + c), hn::Add(sum0, sum1)), d, l + c);
    hn::StoreU(a, d, alpha + c);
    hn::StoreU(m_new, d, m + c);
  }
}

void DivideCols(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n,
                const float *HWY_RESTRICT a) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t c = 0; c < n; c += N) {
    const VF va = hn::LoadU(d, a + c);
    for (std::int64_t r = 0; r < rows; ++r)
      hn::StoreU(hn::Div(hn::LoadU(d, X + r * ldx + c), va), d, X + r * ldx + c);
  }
}

void ExpMinusLse(float *HWY_RESTRICT S, std::int64_t lds, std::int64_t rows, std::int64_t n,
                 const float *HWY_RESTRICT lse) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float *s = S + r * lds;
    if (lse[r] == kMinusInf) {  // a row without keys: exp(S + ∞) would be +∞
      std::memset(s, 0, static_cast<std::size_t>(n) * sizeof(float));
      continue;
    }
    const VF shift = hn::Set(d, lse[r]);
    for (std::int64_t j = 0; j < n; j += N)
      hn::StoreU(hn::IfThenElseZero(Valid(j, n), hn::Exp(d, hn::Sub(hn::LoadU(d, s + j), shift))), d, s + j);
  }
}

void ExpMinusLseCols(float *HWY_RESTRICT S, std::int64_t lds, std::int64_t rows, std::int64_t n,
                     const float *HWY_RESTRICT lse) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t c = 0; c < n; c += N) {
    const VF shift = hn::LoadU(d, lse + c);
    const auto empty = hn::Eq(shift, hn::Set(d, kMinusInf));  // a row without keys: exp(S + ∞) would be +∞
    for (std::int64_t r = 0; r < rows; ++r) {
      float *s = S + r * lds + c;
      hn::StoreU(hn::IfThenZeroElse(empty, hn::Exp(d, hn::Sub(hn::LoadU(d, s), shift))), d, s);
    }
  }
}

void ScoreGradientCols(const float *HWY_RESTRICT P, float *HWY_RESTRICT dP, std::int64_t ld, std::int64_t rows,
                       std::int64_t n, const float *HWY_RESTRICT delta) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t c = 0; c < n; c += N) {
    const VF dc = hn::LoadU(d, delta + c);
    for (std::int64_t r = 0; r < rows; ++r) {
      float *g = dP + r * ld + c;
      hn::StoreU(hn::Mul(hn::LoadU(d, P + r * ld + c), hn::Sub(hn::LoadU(d, g), dc)), d, g);
    }
  }
}

void ScoreGradient(const float *HWY_RESTRICT P, float *HWY_RESTRICT dP, std::int64_t ld, std::int64_t rows,
                   std::int64_t n, const float *HWY_RESTRICT delta) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const VF dr = hn::Set(d, delta[r]);
    for (std::int64_t j = 0; j < n; j += N) {
      float *g = dP + r * ld + j;
      hn::StoreU(hn::Mul(hn::LoadU(d, P + r * ld + j), hn::Sub(hn::LoadU(d, g), dr)), d, g);
    }
  }
}

void Softcap(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float in, float out,
             float *HWY_RESTRICT tanh_out) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF vin = hn::Set(d, in), vout = hn::Set(d, out);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += N) {
      float *x = X + r * ldx + j;
      const VF t = hn::Tanh(d, hn::Mul(hn::LoadU(d, x), vin));
      hn::StoreU(hn::Mul(t, vout), d, x);
      if (tanh_out) hn::StoreU(t, d, tanh_out + r * ldx + j);
    }
}

void SoftcapGrad(float *HWY_RESTRICT dS, const float *HWY_RESTRICT T, std::int64_t ld, std::int64_t rows,
                 std::int64_t n) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF one = hn::Set(d, 1.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += N) {
      const VF t = hn::LoadU(d, T + r * ld + j);
      float *g = dS + r * ld + j;
      hn::StoreU(hn::Mul(hn::LoadU(d, g), hn::NegMulAdd(t, t, one)), d, g);
    }
}

void DistanceBias(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n, std::int64_t off,
                  float slope) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF vslope = hn::Set(d, slope), lane = hn::Iota(d, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += N) {
      float *x = X + r * ldx + j;
      // off + c − r for the lanes' columns c = j + lane: integers, exact in float.
      const VF dist = hn::Abs(hn::Add(lane, hn::Set(d, static_cast<float>(off + j - r))));
      hn::StoreU(hn::NegMulAdd(vslope, dist, hn::LoadU(d, x)), d, x);
    }
}

void Scale(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float a) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  const VF va = hn::Set(d, a);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, X + r * ldx + j), va), d, X + r * ldx + j);
}

void ScaleRows(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *HWY_RESTRICT a) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (a[r] == 1.0f) continue;
    const VF va = hn::Set(d, a[r]);
    for (std::int64_t j = 0; j < n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, X + r * ldx + j), va), d, X + r * ldx + j);
  }
}

void DivideRows(float *HWY_RESTRICT X, std::int64_t ldx, std::int64_t rows, std::int64_t n,
                const float *HWY_RESTRICT a) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const VF va = hn::Set(d, a[r]);
    for (std::int64_t j = 0; j < n; j += N) hn::StoreU(hn::Div(hn::LoadU(d, X + r * ldx + j), va), d, X + r * ldx + j);
  }
}

void RowDots(const float *HWY_RESTRICT A, std::int64_t lda, const float *HWY_RESTRICT B, std::int64_t ldb,
             std::int64_t rows, std::int64_t n, float *HWY_RESTRICT out) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    VF acc = hn::Zero(d);
    // Both operands masked: padding may hold a previous task's ∞ or NaN, and 0·∞ = NaN would enter the sum.
    for (std::int64_t j = 0; j < n; j += N) {
      const auto valid = Valid(j, n);
      acc = hn::MulAdd(hn::IfThenElseZero(valid, hn::LoadU(d, A + r * lda + j)),
                       hn::IfThenElseZero(valid, hn::LoadU(d, B + r * ldb + j)), acc);
    }
    out[r] = hn::GetLane(hn::SumOfLanes(d, acc));
  }
}

/// dst[x] = widen(src[x]) for 16-bit storage T (hwy::float16_t or hwy::bfloat16_t): whole vectors, then a
/// scalar tail (dst is not padded, src must not be over-read).
template <class T, class Scalar>
HWY_INLINE void Widen16(const std::byte *HWY_RESTRICT src, std::int64_t n, float *HWY_RESTRICT dst, Scalar scalar) {
  const DF d;
  const hn::Rebind<T, DF> d16;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + N <= n; x += N)
    hn::StoreU(hn::PromoteTo(d, hn::LoadU(d16, reinterpret_cast<const T *>(src) + x)), d, dst + x);
  for (; x < n; ++x) {
    std::uint16_t bits;
    std::memcpy(&bits, src + 2 * x, sizeof bits);
    dst[x] = scalar(bits);
  }
}

void Widen(const std::byte *HWY_RESTRICT src, Dtype dt, std::int64_t n, float *HWY_RESTRICT dst) {
  switch (dt) {
    case Dtype::f32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case Dtype::f16:
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      Widen16<hwy::float16_t>(src, n, dst, f16_bits_to_float);  // vcvtph2ps: exact, subnormals included
#else
      // Highway's emulated float16 promotion on the other targets mis-widens subnormals: scalar, exact.
      for (std::int64_t x = 0; x < n; ++x) {
        std::uint16_t bits;
        std::memcpy(&bits, src + 2 * x, sizeof bits);
        dst[x] = f16_bits_to_float(bits);
      }
#endif
      return;
    case Dtype::bf16: Widen16<hwy::bfloat16_t>(src, n, dst, bf16_bits_to_float); return;
  }
}

/// dst[x] = round_to_nearest_even(src[x]) in 16-bit storage T, whole vectors then a scalar tail.
template <class T, class Round, class Scalar>
HWY_INLINE void Narrow16(const float *HWY_RESTRICT src, std::int64_t n, std::byte *HWY_RESTRICT dst, Round round,
                         Scalar scalar) {
  const DF d;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + N <= n; x += N) round(hn::LoadU(d, src + x), reinterpret_cast<T *>(dst) + x);
  for (; x < n; ++x) {
    const std::uint16_t bits = scalar(src[x]);
    std::memcpy(dst + 2 * x, &bits, sizeof bits);
  }
}

void Narrow(const float *HWY_RESTRICT src, Dtype dt, std::int64_t n, std::byte *HWY_RESTRICT dst) {
  switch (dt) {
    case Dtype::f32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case Dtype::f16: {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      const hn::Rebind<hwy::float16_t, DF> d16;
      // vcvtps2ph (F16C / AVX-512) rounds to nearest even, overflow to ±Inf, subnormals exact. Highway's emulation
      // on the other targets does not round correctly: they take the scalar path.
      Narrow16<hwy::float16_t>(
          src, n, dst, [&](VF v, hwy::float16_t *p) { hn::StoreU(hn::DemoteTo(d16, v), d16, p); },
          float_to_f16_bits);
#else
      for (std::int64_t x = 0; x < n; ++x) {
        const std::uint16_t bits = float_to_f16_bits(src[x]);
        std::memcpy(dst + 2 * x, &bits, sizeof bits);
      }
#endif
      return;
    }
    case Dtype::bf16: {
      // Round to nearest even on the low 16 bits as float_to_bf16_bits does (Highway's DemoteTo truncates);
      // NaN keeps its high bits and is made quiet.
      const hn::RebindToUnsigned<DF> du;
      const hn::RebindToSigned<DF> di;
      const hn::Rebind<std::uint16_t, DF> d16;
      Narrow16<std::uint16_t>(
          src, n, dst,
          [&](VF v, std::uint16_t *p) {
            const auto x = hn::BitCast(du, v);
            const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(x, hn::Set(du, 0x7fffu)),
                                                            hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u))));
            const auto nan = hn::Or(hn::ShiftRight<16>(x), hn::Set(du, 0x40u));
            const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
            hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, p);
          },
          float_to_bf16_bits);
      return;
    }
  }
}

const char *TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace attncheck::builtin::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attncheck::builtin::simd {

HWY_EXPORT(Gemm);
HWY_EXPORT(Softcap);
HWY_EXPORT(SoftcapGrad);
HWY_EXPORT(DistanceBias);
HWY_EXPORT(OnlineSoftmax);
HWY_EXPORT(ExpMinusLse);
HWY_EXPORT(ExpMinusLseCols);
HWY_EXPORT(ScoreGradientCols);
HWY_EXPORT(OnlineSoftmaxCols);
HWY_EXPORT(DivideCols);
HWY_EXPORT(Exp2Inplace);
HWY_EXPORT(ScoreGradient);
HWY_EXPORT(Scale);
HWY_EXPORT(ScaleRows);
HWY_EXPORT(DivideRows);
HWY_EXPORT(RowDots);
HWY_EXPORT(Widen);
HWY_EXPORT(Narrow);
HWY_EXPORT(TargetName);

void gemm(const float *A, std::int64_t a_row, std::int64_t a_col, const float *B, std::int64_t ldb, float *C,
          std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate, const float *col_scale,
          std::int64_t band, std::int64_t lower) {
  HWY_DYNAMIC_DISPATCH(Gemm)(A, a_row, a_col, B, ldb, C, ldc, m, n, k, accumulate, col_scale, band, lower);
}
void softcap(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float in, float out, float *tanh_out) {
  HWY_DYNAMIC_DISPATCH(Softcap)(X, ldx, rows, n, in, out, tanh_out);
}
void softcap_grad(float *dS, const float *T, std::int64_t ld, std::int64_t rows, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(SoftcapGrad)(dS, T, ld, rows, n);
}
void distance_bias(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, std::int64_t off, float slope) {
  HWY_DYNAMIC_DISPATCH(DistanceBias)(X, ldx, rows, n, off, slope);
}
void online_softmax_cols(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, float *m, float *l,
                         float *alpha) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxCols)(S, lds, rows, n, m, l, alpha);
}
void exp2_inplace(float *x, std::int64_t n) { HWY_DYNAMIC_DISPATCH(Exp2Inplace)(x, n); }
void divide_cols(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a) {
  HWY_DYNAMIC_DISPATCH(DivideCols)(X, ldx, rows, n, a);
}
void online_softmax(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, float *m, float *l, float *alpha) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmax)(S, lds, rows, n, m, l, alpha);
}
void exp_minus_lse(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, const float *lse) {
  HWY_DYNAMIC_DISPATCH(ExpMinusLse)(S, lds, rows, n, lse);
}
void exp_minus_lse_cols(float *S, std::int64_t lds, std::int64_t rows, std::int64_t n, const float *lse) {
  HWY_DYNAMIC_DISPATCH(ExpMinusLseCols)(S, lds, rows, n, lse);
}
void score_gradient_cols(const float *P, float *dP, std::int64_t ld, std::int64_t rows, std::int64_t n,
                         const float *delta) {
  HWY_DYNAMIC_DISPATCH(ScoreGradientCols)(P, dP, ld, rows, n, delta);
}
void score_gradient(const float *P, float *dP, std::int64_t ld, std::int64_t rows, std::int64_t n,
                    const float *delta) {
  HWY_DYNAMIC_DISPATCH(ScoreGradient)(P, dP, ld, rows, n, delta);
}
void scale(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, float a) {
  HWY_DYNAMIC_DISPATCH(Scale)(X, ldx, rows, n, a);
}
void scale_rows(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a) {
  HWY_DYNAMIC_DISPATCH(ScaleRows)(X, ldx, rows, n, a);
}
void divide_rows(float *X, std::int64_t ldx, std::int64_t rows, std::int64_t n, const float *a) {
  HWY_DYNAMIC_DISPATCH(DivideRows)(X, ldx, rows, n, a);
}
void row_dots(const float *A, std::int64_t lda, const float *B, std::int64_t ldb, std::int64_t rows, std::int64_t n,
              float *out) {
  HWY_DYNAMIC_DISPATCH(RowDots)(A, lda, B, ldb, rows, n, out);
}
void widen(const std::byte *src, Dtype dt, std::int64_t n, float *dst) { HWY_DYNAMIC_DISPATCH(Widen)(src, dt, n, dst); }
void narrow(const float *src, Dtype dt, std::int64_t n, std::byte *dst) {
  HWY_DYNAMIC_DISPATCH(Narrow)(src, dt, n, dst);
}
const char *target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace attncheck::builtin::simd
#endif  // HWY_ONCE
