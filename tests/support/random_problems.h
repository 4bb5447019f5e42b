// Random attention problems for the error-model suite: shapes from the tiling boundaries, every layout and mask,
// and values from the distributions that break kernels. (The property engine draws its own cases with RapidCheck:
// properties/src/attncheck/gen.h.)
#pragma once

#include "attncheck/problem.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

namespace attncheck {

/// How the entries of q, k, v (and dout) are drawn; each is rounded to the storage dtype when stored.
enum class Values : std::uint8_t {
  normal,         ///< i.i.d. N(0, 1): the setting of the 1/√D argument
  uniform,        ///< i.i.d. U(−1, 1)
  small_ints,     ///< integers in [−3, 3]: exact in every dtype, ties likely
  large_logits,   ///< q, k scaled so that |scale·q·k| reaches 10²…10⁴ (past float32's exp overflow at 88.7)
  dominant_key,   ///< N(0, 1) plus one key per row aligned with the queries: P close to one-hot
};
std::string_view values_name(Values v);

struct RandomProblemOptions {
  bool backward = true;               ///< also draw dout
  std::int64_t max_work = 1'500'000;  ///< cap on B·Hq·Lq·Lk·(D + Dv): keeps the reference fast
  std::optional<Values> values;       ///< fixed value distribution (default: drawn)
  std::optional<Mask> mask;           ///< fixed mask (default: drawn)
};

/// A problem of the given dtype: B ∈ {1, 2}, Hkv ∈ {1, 2}, Hq/Hkv ∈ {1, 2, 4}, Lq, Lk, D, Dv from the tiling
/// boundaries {1, 2, 3, 17, 63, 64, 65, 127, 129} and {1, 3, 8, 64, 80, 128, 256}, any layout, mask none or causal,
/// scale 1/√D. Deterministic for the generator's state.
Problem random_problem(std::mt19937_64 &rng, Dtype dt, const RandomProblemOptions &opt = {});

/// A problem of a given shape, dtype, value distribution, mask and layout (with 3 elements of padding around
/// each tensor); scale 1/√D; dout drawn when `backward`.
Problem make_problem(std::mt19937_64 &rng, const Shape &s, Dtype dt, Values values, Mask mask,
                     Layout layout = Layout::bhld, bool backward = true);

/// Standard normal from two uniforms (Box–Muller), identical on every platform, unlike std::normal_distribution.
double standard_normal(std::mt19937_64 &rng);
/// Uniform in [0, 1) with 53 random bits.
double uniform01(std::mt19937_64 &rng);
/// Log-uniform in [lo, hi].
double log_uniform(std::mt19937_64 &rng, double lo, double hi);
/// Multiplies q by a factor that brings max |scale·q·k| to `target` (capped by the dtype's range; values rounded to
/// it): softcap's saturated and unsaturated regimes on demand.
void rescale_logits(Problem &p, double target);

}  // namespace attncheck
