// The properties' own slack, one table: what a property adds for the arithmetic it does itself (in double) or the
// statistics it runs — never a tolerance on the kernel, whose every bound comes from the error model (SPEC.md §4).
#pragma once

namespace attncheck::props {

/// Unit roundoff of double: the sums and differences a property forms from exact values (row sums, identities,
/// the effective-scale probes' intervals).
inline constexpr double kDoubleRoundoff = 0x1p-53;
/// Ulps of double a property's few operations on exact values may lose together (shift_invariance: Ô + w and the
/// exact change), with room to spare.
inline constexpr double kDoubleOpsUlps = 4;
/// Probability that a correct kernel fails a statistical property on a given case (dropout's rates and
/// independence, variance_normalization's χ² probe).
inline constexpr double kFalseAlarm = 1e-6;
/// The finite value a metamorphic property writes where it changes an input (causal's hidden values,
/// slice_independence's other slice), or its negation where the input already holds it: exact in every storage
/// dtype, and every changed element changes.
inline constexpr double kChangedValue = 2;
/// kChangedValue, or its negation where `x` already is kChangedValue.
inline constexpr double changed_value(double x) { return x == kChangedValue ? -kChangedValue : kChangedValue; }

}  // namespace attncheck::props
