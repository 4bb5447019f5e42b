// flash's SIMD helpers (impl/src/flash_simd.cpp, compiled into this test) on every SIMD target this CPU runs: the
// float16/bfloat16 stores round exactly like float_to_f16_bits / float_to_bf16_bits.
#include "flash_simd.h"

#include "attncheck/dtype.h"

#include <catch2/catch.hpp>

#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace attncheck;

namespace {
/// Random bit patterns (every class: normal, subnormal, Inf, NaN), every rounding tie and overflow boundary.
std::vector<float> narrowing_inputs() {
  std::vector<float> v;
  std::mt19937 rng(0x6e61);
  for (int i = 0; i < 200'000; ++i) v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  // bfloat16 ties and near-ties (low 16 bits 0x8000, 0x7fff, 0x8001) around every exponent.
  for (std::uint32_t hi = 0; hi < (1u << 16); hi += 7)
    for (std::uint32_t lo : {0x7fffu, 0x8000u, 0x8001u}) v.push_back(std::bit_cast<float>((hi << 16) | lo));
  // float16 ties: f16 keeps 10 of float's 23 mantissa bits; low 13 bits 0x1000 is a tie; also the f16 subnormal range.
  for (std::uint32_t e = 100; e < 145; ++e)
    for (std::uint32_t m : {0x1000u, 0x3000u, 0x0fffu, 0x1001u, 0x7ff000u, 0x7fefffu})
      for (std::uint32_t s : {0u, 0x80000000u}) v.push_back(std::bit_cast<float>(s | (e << 23) | m));
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f,
                  3.4028235e38f, -3.4028235e38f})
    v.push_back(f);
  return v;
}
}  // namespace

TEST_CASE("narrow rounds like float_to_f16_bits and float_to_bf16_bits on every SIMD target", "[impl][simd]") {
  const std::vector<float> src = narrowing_inputs();
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
      INFO("SIMD target " << hwy::TargetName(target) << ", " << dtype_name(dt));
      // Odd lengths and offsets: whole vectors, then the scalar tail.
      for (std::size_t n : {src.size(), src.size() - 13}) {
        std::vector<std::uint16_t> dst(n + 1, 0xdead);
        builtin::simd::narrow(src.data(), dt, static_cast<std::int64_t>(n), reinterpret_cast<std::byte *>(dst.data()));
        std::size_t wrong = 0, first = n;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint16_t want = dt == Dtype::f16 ? float_to_f16_bits(src[i]) : float_to_bf16_bits(src[i]);
          // A float16 NaN only has to stay a NaN (payload bits are not part of the contract).
          const bool ok = dst[i] == want || (dt == Dtype::f16 && src[i] != src[i] && (dst[i] & 0x7c00) == 0x7c00 &&
                                             (dst[i] & 0x03ff) != 0);
          if (!ok && wrong++ == 0) first = i;
        }
        INFO("first mismatch at " << first << ": " << (first < n ? src[first] : 0.0f));
        CHECK(wrong == 0);
        CHECK(dst[n] == 0xdead);  // nothing written past n
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("widen then narrow is the identity on float16 and bfloat16 storage", "[impl][simd]") {
  std::vector<std::uint16_t> bits(1u << 16);
  for (std::uint32_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
      INFO("SIMD target " << hwy::TargetName(target) << ", " << dtype_name(dt));
      std::vector<float> wide(bits.size());
      builtin::simd::widen(reinterpret_cast<const std::byte *>(bits.data()), dt, static_cast<std::int64_t>(bits.size()),
                           wide.data());
      std::vector<std::uint16_t> back(bits.size());
      builtin::simd::narrow(wide.data(), dt, static_cast<std::int64_t>(wide.size()),
                            reinterpret_cast<std::byte *>(back.data()));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < bits.size(); ++i) {
        const bool nan = wide[i] != wide[i];
        wrong += !nan && back[i] != bits[i];
      }
      CHECK(wrong == 0);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("exp2 of the forward softmax is within 2 ulps on every SIMD target", "[impl][simd]") {
  // Every float in [−1, 0] with its low 7 bits stepped (2^17 per binade), then a dense sweep of [−130, −1].
  std::vector<float> x;
  for (std::uint32_t bits = 0x80000000u; bits <= 0xbf800000u; bits += 97) x.push_back(std::bit_cast<float>(bits));
  for (int i = 0; i <= 2'000'000; ++i) x.push_back(-1.0f - 129.0f * static_cast<float>(i) / 2'000'000.0f);
  for (float f : {-0.0f, 0.0f, -0.5f, 0.5f - 1.0f, -126.0f, -125.5f, -126.5f, -127.0f, -200.0f,
                  -std::numeric_limits<float>::infinity()})
    x.push_back(f);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("SIMD target " << hwy::TargetName(target));
    std::vector<float> y = x;
    builtin::simd::exp2_inplace(y.data(), static_cast<std::int64_t>(y.size()) - 3);  // a scalar tail too
    double worst = 0;
    float worst_x = 0;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i + 3 < x.size(); ++i) {
      if (x[i] < -126.0f) {  // flushed
        wrong += y[i] != 0.0f;
        continue;
      }
      const double exact = std::exp2(static_cast<double>(x[i]));
      const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
      const double err = std::abs(static_cast<double>(y[i]) - exact) / ulp;
      if (err > worst) worst = err, worst_x = x[i];
    }
    INFO("worst " << worst << " ulps at x = " << worst_x);
    CHECK(worst <= 2.0);
    CHECK(wrong == 0);
    float nan = std::numeric_limits<float>::quiet_NaN();
    builtin::simd::exp2_inplace(&nan, 1);
    CHECK(nan != nan);
  }
  hwy::SetSupportedTargetsForTest(0);
}
