#include "attncheck/dtype.h"

#include <catch2/catch.hpp>

#include <cpuid.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

using namespace attncheck;

namespace {
// The hardware conversion (F16C) is the oracle for float -> float16 rounding.
__attribute__((target("f16c"))) std::uint16_t hw_f32_to_f16(float f) { return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }
__attribute__((target("f16c"))) float hw_f16_to_f32(std::uint16_t h) { return _cvtsh_ss(h); }
/// CPUID's F16C bit (clang has no __builtin_cpu_supports("f16c")).
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }
}  // namespace

TEST_CASE("every float16 bit pattern widens to the float the hardware gives", "[dtype]") {
  if (!has_f16c()) {
    WARN("no F16C on this CPU: the hardware oracle is unavailable");
    return;
  }
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    INFO("bits 0x" << std::hex << h);
    REQUIRE(same_value(f16_bits_to_float(static_cast<std::uint16_t>(h)), hw_f16_to_f32(static_cast<std::uint16_t>(h))));
  }
}

TEST_CASE("float to float16 rounds to nearest even like the hardware", "[dtype]") {
  if (!has_f16c()) {
    WARN("no F16C on this CPU: the hardware oracle is unavailable");
    return;
  }
  std::mt19937 rng(7);
  // Every float16 value, the midpoints between neighbours and their one-ulp neighbours (ties and near-ties).
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
    const float a = f16_bits_to_float(static_cast<std::uint16_t>(h));
    const float b = f16_bits_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = (a + b) / 2;  // exact in float
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid}) {
      INFO("x = " << x);
      REQUIRE(float_to_f16_bits(x) == hw_f32_to_f16(x));
    }
  }
  for (int n = 0; n < 1'000'000; ++n) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(x)) {
      REQUIRE(std::isnan(f16_bits_to_float(float_to_f16_bits(x))));
      continue;
    }
    INFO("x = " << x);
    REQUIRE(float_to_f16_bits(x) == hw_f32_to_f16(x));
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even and is exact on bfloat16 values", "[dtype]") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const float f = bf16_bits_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) {
      REQUIRE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
      continue;
    }
    REQUIRE(float_to_bf16_bits(f) == b);
  }
  // Ties go to even; just above a tie goes up.
  REQUIRE(float_to_bf16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80u);
  REQUIRE(float_to_bf16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82u);
  REQUIRE(float_to_bf16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81u);
  REQUIRE(std::isinf(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::max()))));
}

TEST_CASE("round_to rounds a double once to the nearest value of the dtype, ties to the even code", "[dtype]") {
  // Oracle: every finite nonnegative code of the format, in order (codes 0 … 0x7bff / 0x7f7f increase with value);
  // a double goes to the nearer of the two codes around it, to the even code on a tie, and to Inf at or past the
  // midpoint of the largest finite value and the next power of two.
  std::mt19937_64 rng(7);
  for (Dtype dt : {Dtype::f16, Dtype::bf16}) {
    const std::uint16_t last = dt == Dtype::f16 ? 0x7bffu : 0x7f7fu;
    auto value = [dt](std::uint32_t code) {
      const auto c = static_cast<std::uint16_t>(code);
      return static_cast<double>(dt == Dtype::f16 ? f16_bits_to_float(c) : bf16_bits_to_float(c));
    };
    const double overflow = value(last) + (value(last) - value(last - 1)) / 2;
    auto oracle = [&](double a) {  // a ≥ 0
      if (a >= overflow) return std::numeric_limits<double>::infinity();
      std::uint32_t lo = 0, hi = last;  // the largest code whose value is ≤ a
      while (lo < hi) {
        const std::uint32_t mid = (lo + hi + 1) / 2;
        if (value(mid) <= a)
          lo = mid;
        else
          hi = mid - 1;
      }
      if (lo == last || value(lo) == a) return value(lo);
      const double below = a - value(lo), above = value(lo + 1) - a;
      return below < above || (below == above && lo % 2 == 0) ? value(lo) : value(lo + 1);
    };
    std::uniform_int_distribution<std::uint32_t> code(0, last);
    std::uniform_int_distribution<int> shift(-60, -1);
    for (int n = 0; n < 200000; ++n) {
      // A code's value, the midpoint above it, or either moved by a relative 2^shift (far below float's ulp too).
      const std::uint32_t c = code(rng);
      const double mid = c == last ? overflow : (value(c) + value(c + 1)) / 2;
      double a = n % 2 ? mid : value(c);
      if (n % 3) a *= 1 + (n % 3 == 1 ? 1 : -1) * std::ldexp(1.0, shift(rng));
      const double want = oracle(a);
      INFO(dtype_name(dt) << " " << a);
      REQUIRE(round_to(dt, a) == want);
      REQUIRE(round_to(dt, -a) == -want);
    }
  }
  // The double rounding through float that round_to avoids: the float of 1 + 2^-11 + 2^-40 is the midpoint 1 + 2^-11.
  CHECK(round_to(Dtype::f16, 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 1 + std::ldexp(1.0, -10));
  CHECK(round_to(Dtype::bf16, 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 1 + std::ldexp(1.0, -7));
  CHECK(std::isnan(round_to(Dtype::f16, std::nan(""))));
  CHECK(std::isinf(round_to(Dtype::bf16, 1e39)));
  CHECK(std::signbit(round_to(Dtype::f16, -1e-30)));
}

TEST_CASE("dtype constants describe each format", "[dtype]") {
  REQUIRE(unit_roundoff(Dtype::f32) == std::ldexp(1.0, -24));
  REQUIRE(unit_roundoff(Dtype::f16) == std::ldexp(1.0, -11));
  REQUIRE(unit_roundoff(Dtype::bf16) == std::ldexp(1.0, -8));
  REQUIRE(max_finite(Dtype::f16) == 65504.0);
  REQUIRE(round_to(Dtype::f16, 65519.0) == 65504.0);
  REQUIRE(std::isinf(round_to(Dtype::f16, 65520.0)));
  REQUIRE(round_to(Dtype::f16, min_subnormal(Dtype::f16)) == min_subnormal(Dtype::f16));
  REQUIRE(round_to(Dtype::f16, min_subnormal(Dtype::f16) / 2) == 0.0);  // tie to even (zero)
  REQUIRE(round_to(Dtype::bf16, max_finite(Dtype::bf16)) == max_finite(Dtype::bf16));
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    REQUIRE(parse_dtype(dtype_name(dt)) == dt);
    Dtype back{};
    REQUIRE(from_dlpack(to_dlpack(dt), &back));
    REQUIRE(back == dt);
  }
  REQUIRE_THROWS_WITH(parse_dtype("f64"), Catch::Contains("use f32, f16 or bf16"));
  Dtype ignored{};
  REQUIRE_FALSE(from_dlpack(DLDataType{kDLFloat, 64, 1}, &ignored));
  REQUIRE_FALSE(from_dlpack(DLDataType{kDLFloat, 32, 4}, &ignored));
}
