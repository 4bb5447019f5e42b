#include "attncheck/dtype.h"

#include <catch2/catch.hpp>

#include <cpuid.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
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
