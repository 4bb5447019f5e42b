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

/// A dtype's bit in a set of dtypes (KernelContract::dtypes): 1, 2, 4.
constexpr std::uint8_t dtype_bit(Dtype dt) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(dt)); }
/// The set of all three.
inline constexpr std::uint8_t kAllDtypes = 0b111;

/// "f32", "f16", "bf16".
std::string_view dtype_name(Dtype dt);
/// Inverse of dtype_name; also accepts "float32", "float16", "bfloat16". Throws std::invalid_argument.
Dtype parse_dtype(std::string_view name);
/// A set of dtypes as text: their names in enum order joined by '+' ("f32+bf16"); "" for the empty set.
std::string dtype_list(std::uint8_t bits);
/// Inverse of dtype_list (parse_dtype's names); throws std::invalid_argument for an unknown name or an empty list.
std::uint8_t parse_dtype_list(std::string_view text);
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

/// x rounded to the dtype (one rounding to nearest even; past the largest finite value by half an ulp or more,
/// ±Inf; NaN stays NaN), returned widened to double.
double round_to(Dtype dt, double x);

/// The FP8 formats of ABI 1.2 (attncheck_args.fp8_format; SPEC.md §2.7): e4m3fn — 4 exponent bits (bias 7), 3
/// mantissa bits, no infinities, 0x7f/0xff NaN, largest 448; e5m2 — 5 (bias 15), 2, IEEE-like, largest 57344.
/// q, k, v hold their bits (DLPack uint8); the values are descale · stored.
enum class Fp8 : std::int32_t { e4m3fn = 0, e5m2 = 1 };
/// "e4m3fn", "e5m2".
std::string_view fp8_name(Fp8 f);
/// The value of FP8 bits, exact.
double fp8_to_double(std::uint8_t bits, Fp8 f);
/// x rounded to nearest even in the format; a value that rounds past the largest (as if the exponent went on: 464
/// ties to 448 in e4m3fn, 61440 to 2^16 in e5m2) gives NaN (e4m3fn) or ±Inf (e5m2); NaN stays NaN.
std::uint8_t double_to_fp8(double x, Fp8 f);
/// x rounded to the format, as a double.
inline double round_to_fp8(Fp8 f, double x) { return fp8_to_double(double_to_fp8(x, f), f); }
/// Largest finite value: 448, 57344.
double fp8_max(Fp8 f);

}  // namespace attncheck
