#include "fma_peak.h"

#include <immintrin.h>

#include <array>
#include <cstring>

namespace attncheck::bench {
namespace {

// Enough chains to keep every FMA port busy: Zen 4/5 and Intel cores retire 2 FMAs per cycle with a latency of
// 4 cycles, so ≥ 8 chains are needed; more hides scheduling noise. AVX2 has 16 ymm registers (2 hold constants),
// AVX-512 has 32 zmm registers.
constexpr int kAvx2Chains = 12;
constexpr int kAvx512Chains = 16;
// acc ← acc·kDecay + kDrift converges to 1: values stay normal, neither overflowing nor going subnormal.
constexpr float kDecay = 0.999999f;
constexpr float kDrift = 1e-6f;

// Horizontal sums through memory: GCC 12's reduction intrinsics trip -Wmaybe-uninitialized in its own headers.
template <class Vec>
float lane_sum(const Vec &v) {
  float lanes[sizeof(Vec) / sizeof(float)];
  std::memcpy(lanes, &v, sizeof lanes);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__attribute__((target("avx2,fma"))) float run_avx2(std::int64_t trips) {
  __m256 acc[kAvx2Chains];  // a plain array: std::array would drop the vector type's attributes
  for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 decay = _mm256_set1_ps(kDecay), drift = _mm256_set1_ps(kDrift);
  for (std::int64_t t = 0; t < trips; ++t) {
#pragma GCC unroll 16
    for (int c = 0; c < kAvx2Chains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], decay, drift);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kAvx2Chains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return lane_sum(sum);
}

__attribute__((target("avx512f"))) float run_avx512(std::int64_t trips) {
  __m512 acc[kAvx512Chains];
  for (int c = 0; c < kAvx512Chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 decay = _mm512_set1_ps(kDecay), drift = _mm512_set1_ps(kDrift);
  for (std::int64_t t = 0; t < trips; ++t) {
#pragma GCC unroll 16
    for (int c = 0; c < kAvx512Chains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], decay, drift);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kAvx512Chains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return lane_sum(sum);
}

// __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }

constexpr std::array kIsas{
    FmaIsa{"avx2", 8, has_avx2, run_avx2, kAvx2Chains},
    FmaIsa{"avx512", 16, has_avx512, run_avx512, kAvx512Chains},
};

}  // namespace

std::span<const FmaIsa> fma_isas() { return kIsas; }

}  // namespace attncheck::bench
