// Storage dtypes of the contract and their exact conversions.
//
// Notation (Higham): u = unit roundoff = 2^-p for a p-bit significand (round to nearest);
// η = spacing of the subnormals (the smallest positive value). Rounding x to a dtype errs by at most
// u·|x| + η/2 when the result is finite.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace attncheck {

enum class Dtype : std::uint8_t { f32, f16, bf16 };

/// "f32", "f16", "bf16".
std::string_view dtype_name(Dtype dt);
/// Inverse of dtype_name; also accepts "float32", "float16", "bfloat16". Throws std::invalid_argument.
Dtype parse_dtype(std::string_view name);
/// Bytes per element: 4 or 2.
int dtype_size(Dtype dt);
/// DLPack type {kDLFloat, 32|16, 1} or {kDLBfloat, 16, 1}.
DLDataType to_dlpack(Dtype dt);
/// Inverse of to_dlpack; false when `t` is none of the three (including lanes != 1).
bool from_dlpack(DLDataType t, Dtype *out);

/// u: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16).
double unit_roundoff(Dtype dt);
/// η: 2^-149 (f32), 2^-24 (f16), 2^-133 (bf16).
double min_subnormal(Dtype dt);
/// Largest finite value: FLT_MAX, 65504, 0x1.fep127.
double max_finite(Dtype dt);

/// float16 bits -> float: exact (every binary16 value, ±Inf and NaN included, is a float).
float f16_bits_to_float(std::uint16_t h);
/// float -> float16 bits, round to nearest even; overflow gives ±Inf, NaN stays NaN (quiet).
std::uint16_t float_to_f16_bits(float f);
/// bfloat16 bits -> float: exact (the upper half of a float).
float bf16_bits_to_float(std::uint16_t b);
/// float -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet).
std::uint16_t float_to_bf16_bits(float f);

/// x rounded to the dtype (round to nearest even, via float: exact for every double that is already a float),
/// returned widened to double.
double round_to(Dtype dt, double x);

}  // namespace attncheck
