#include "attncheck/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace attncheck {

namespace {
constexpr std::uint32_t kF32SignMask = 0x8000'0000u;
constexpr std::uint32_t kF32ExpMask = 0x7f80'0000u;
constexpr std::uint32_t kF32MantMask = 0x007f'ffffu;
constexpr int kF32MantBits = 23;
constexpr int kF16MantBits = 10;
constexpr int kF32Bias = 127;
constexpr int kF16Bias = 15;
constexpr std::uint16_t kF16ExpMask = 0x7c00u;
constexpr std::uint16_t kF16QuietNaN = 0x7e00u;
constexpr std::uint16_t kBf16QuietNaN = 0x7fc0u;
}  // namespace

std::string_view dtype_name(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return "f32";
    case Dtype::f16: return "f16";
    case Dtype::bf16: return "bf16";
  }
  return "?";
}

Dtype parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return Dtype::f32;
  if (name == "f16" || name == "float16") return Dtype::f16;
  if (name == "bf16" || name == "bfloat16") return Dtype::bf16;
  throw std::invalid_argument("unknown dtype '" + std::string(name) + "': use f32, f16 or bf16");
}

std::string dtype_list(std::uint8_t bits) {
  std::string s;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    if (bits & dtype_bit(dt)) s += (s.empty() ? "" : "+") + std::string(dtype_name(dt));
  return s;
}

std::uint8_t parse_dtype_list(std::string_view text) {
  std::uint8_t bits = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('+', pos), text.size());
    if (end > pos) bits |= dtype_bit(parse_dtype(text.substr(pos, end - pos)));
    pos = end + 1;
  }
  if (bits == 0) throw std::invalid_argument("no dtype in '" + std::string(text) + "': name f32, f16 or bf16");
  return bits;
}

int dtype_size(Dtype dt) { return dt == Dtype::f32 ? 4 : 2; }

DLDataType to_dlpack(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return DLDataType{kDLFloat, 32, 1};
    case Dtype::f16: return DLDataType{kDLFloat, 16, 1};
    case Dtype::bf16: return DLDataType{kDLBfloat, 16, 1};
  }
  return DLDataType{kDLFloat, 32, 1};
}

bool from_dlpack(DLDataType t, Dtype *out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) { *out = Dtype::f32; return true; }
  if (t.code == kDLFloat && t.bits == 16) { *out = Dtype::f16; return true; }
  if (t.code == kDLBfloat && t.bits == 16) { *out = Dtype::bf16; return true; }
  return false;
}

double unit_roundoff(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return std::ldexp(1.0, -24);
    case Dtype::f16: return std::ldexp(1.0, -11);
    case Dtype::bf16: return std::ldexp(1.0, -8);
  }
  return 0;
}

double min_subnormal(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return std::ldexp(1.0, -149);
    case Dtype::f16: return std::ldexp(1.0, -24);
    case Dtype::bf16: return std::ldexp(1.0, -133);
  }
  return 0;
}

double max_finite(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return std::numeric_limits<float>::max();
    case Dtype::f16: return 65504.0;
    case Dtype::bf16: return static_cast<double>(bf16_bits_to_float(0x7f7fu));
  }
  return 0;
}

float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> kF16MantBits) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | kF32ExpMask | (mant << (kF32MantBits - kF16MantBits)));
  if (exp == 0) {
    // ±0 or subnormal: mant · 2^-24, exact in float.
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  const std::uint32_t e32 = static_cast<std::uint32_t>(exp - kF16Bias + kF32Bias);
  return std::bit_cast<float>(sign | (e32 << kF32MantBits) | (mant << (kF32MantBits - kF16MantBits)));
}

std::uint16_t float_to_f16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x & kF32SignMask) >> 16);
  const std::uint32_t ax = x & ~kF32SignMask;
  if (ax > kF32ExpMask) return sign | kF16QuietNaN | static_cast<std::uint16_t>((ax & kF32MantMask) >> 13);
  if (ax == kF32ExpMask) return sign | kF16ExpMask;
  const float a = std::bit_cast<float>(ax);
  // Values at or above 65520 (halfway between 65504 and 2^16) round to infinity.
  if (a >= 65520.0f) return sign | kF16ExpMask;
  if (a < 0x1p-14f) {
    // Subnormal range: a / 2^-24 rounded to nearest even integer; nearbyint uses the current (nearest-even) mode.
    const float q = std::nearbyint(a * 0x1p24f);  // exact scaling by a power of two
    return sign | static_cast<std::uint16_t>(q);  // q == 1024 lands exactly on the smallest normal encoding
  }
  // Normal: keep 10 mantissa bits, round to nearest even on the 13 dropped bits; a carry bumps the exponent.
  const std::uint32_t e = ((ax >> kF32MantBits) - kF32Bias + kF16Bias);
  std::uint32_t m = ax & kF32MantMask;
  std::uint32_t h = (e << kF16MantBits) | (m >> 13);
  const std::uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<std::uint16_t>(h);
}

float bf16_bits_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & ~kF32SignMask) > kF32ExpMask) return static_cast<std::uint16_t>((x >> 16) | (kBf16QuietNaN & 0x0040u));
  // Round to nearest even on the low 16 bits; a carry into the exponent (even to Inf) is the right result.
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

namespace {
/// 2^n for the exponents of normal doubles, n in [−1022, 1023].
double pow2(int n) { return std::bit_cast<double>(static_cast<std::uint64_t>(n + 1023) << 52); }
}  // namespace

double round_to(Dtype dt, double x) {
  // float32 is one rounding of the double. float16 and bfloat16 are rounded from the double directly, not through
  // float, which can round twice: 1 + 2⁻¹¹ + 2⁻⁴⁰ lies above the midpoint of 1 and 1 + 2⁻¹⁰, but its float is that
  // midpoint, which then ties to 1.
  if (dt == Dtype::f32 || !std::isfinite(x) || x == 0) return static_cast<float>(x);
  const int p = dt == Dtype::f16 ? 11 : 8;         // significand bits
  const int e_min = dt == Dtype::f16 ? -14 : -126;  // the least normal exponent
  // x's exponent (a double subnormal counts as below e_min), and the exponent k of x's quantum 2^(k − p + 1).
  const int k = std::max(static_cast<int>((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff) - 1023, e_min);
  const double y = std::nearbyint(x * pow2(p - 1 - k)) * pow2(k - p + 1);  // nearest even; the scalings are exact
  return std::fabs(y) > max_finite(dt) ? std::copysign(std::numeric_limits<double>::infinity(), x) : y;
}

namespace {
/// Exponent bits, mantissa bits and bias of an FP8 format.
struct Fp8Layout {
  int exp_bits, mant_bits, bias;
};
constexpr Fp8Layout layout_of(Fp8 f) { return f == Fp8::e4m3fn ? Fp8Layout{4, 3, 7} : Fp8Layout{5, 2, 15}; }
constexpr std::uint8_t kFp8SignBit = 0x80, kE4m3NaN = 0x7f, kE5m2Inf = 0x7c, kE5m2NaN = 0x7e;
}  // namespace

std::string_view fp8_name(Fp8 f) { return f == Fp8::e4m3fn ? "e4m3fn" : "e5m2"; }

double fp8_max(Fp8 f) { return f == Fp8::e4m3fn ? 448.0 : 57344.0; }

double fp8_to_double(std::uint8_t bits, Fp8 f) {
  const Fp8Layout l = layout_of(f);
  const bool neg = bits & kFp8SignBit;
  const int e = (bits >> l.mant_bits) & ((1 << l.exp_bits) - 1), m = bits & ((1 << l.mant_bits) - 1);
  const int e_max = (1 << l.exp_bits) - 1;
  double mag;
  if (f == Fp8::e4m3fn && e == e_max && m == (1 << l.mant_bits) - 1)
    mag = std::numeric_limits<double>::quiet_NaN();
  else if (f == Fp8::e5m2 && e == e_max)
    mag = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    mag = std::ldexp(static_cast<double>(m), 1 - l.bias - l.mant_bits);
  else
    mag = std::ldexp(static_cast<double>((1 << l.mant_bits) + m), e - l.bias - l.mant_bits);
  return neg ? -mag : mag;
}

std::uint8_t double_to_fp8(double x, Fp8 f) {
  const Fp8Layout l = layout_of(f);
  const std::uint8_t nan = f == Fp8::e4m3fn ? kE4m3NaN : kE5m2NaN;
  if (std::isnan(x)) return nan;
  const std::uint8_t sign = std::signbit(x) ? kFp8SignBit : 0;
  const std::uint8_t overflow = f == Fp8::e4m3fn ? static_cast<std::uint8_t>(sign | kE4m3NaN)
                                                 : static_cast<std::uint8_t>(sign | kE5m2Inf);
  const double a = std::fabs(x);
  if (std::isinf(a)) return overflow;
  if (a == 0) return sign;
  const int e_min = 1 - l.bias;
  int k = std::ilogb(a);
  std::uint32_t code;
  if (k < e_min) {  // subnormal: a multiple of 2^(e_min − M), rounded to nearest even (a carry lands on e = 1)
    code = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(a, l.mant_bits - e_min)));
  } else {
    double q = std::nearbyint(std::ldexp(a, l.mant_bits - k));  // in [2^M, 2^(M+1)]
    if (q == std::ldexp(1.0, l.mant_bits + 1)) {
      ++k;
      q /= 2;
    }
    const int e = k + l.bias;
    if (e >= (1 << l.exp_bits)) return overflow;
    code = (static_cast<std::uint32_t>(e) << l.mant_bits) | (static_cast<std::uint32_t>(q) - (1u << l.mant_bits));
  }
  const bool reserved = f == Fp8::e4m3fn ? (code & 0x7f) == kE4m3NaN : (code & 0x7f) >= kE5m2Inf;
  return reserved ? overflow : static_cast<std::uint8_t>(sign | code);
}

}  // namespace attncheck
