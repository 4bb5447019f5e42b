// The fast reference: O and LSE (fast_forward) and dQ, dK, dV (fast_backward) evaluated in double, each value r̃ with a
// rigorous bound ε on its own error, |r̃ − exact| ≤ ε, where "exact" is the value reference_forward/backward and
// certified_forward/backward compute (spec/SPEC.md §2, §2.4, §2.7), and a filter that decides a kernel's element from
// (r̃, ε) whenever the margin allows (SPEC.md §5.1).
//
// Per row (b, h, i), with V(i) its visible keys (sees()), n = |V(i)| (+1 with a sink), u = 2⁻⁵³, γ_n = n·u/(1 − n·u):
//   x̂_j = fl(scale·Σ_d q_id k_jd)             |x̂_j − x_j| ≤ γ_{D+1}·|scale|·Σ_d |q_id k_jd| ≤ γ_{D+1}·|scale|·‖q_i‖‖k_j‖
//   ŝ_j = x̂_j [or fl(c·tanh(fl(x̂_j/c)))] [+ ALiBi] [+ fl(mask − M)], each step's rounding and tanh's error added: e_j
//        (M: the row's largest visible mask value or sink, part of the shift; LSE = fl(fl(m̂ + M) + log l̂))
//   m̂ = max ŝ_j (and sink_h),  p̂_j = exp(fl(ŝ_j − m̂))  θ_j = e_j + u·|ŝ_j − m̂| (log-space error of p̂_j);
//        or, centered on the top key t (the row takes the variant of smaller Σ Δp_j): θ_j + e_t for j ≠ t, δ_exp
//        for t itself, and e_t added to the LSE's ε
//   |p̂_j − e^{s_j − m̂}| ≤ Δp_j = (p̂_j + Uη)·ρ_j + Uη,  ρ_j ≥ expm1(θ_j + δ_exp)   (U = kLibmExpUlps, η = 2⁻¹⁰⁷⁴)
//   l̂ = Σ p̂_j,  E_l = γ_{n+1}·l̂ + Σ Δp_j  ≥ |l̂ − l|
//   Ô_c = fl(Σ_j p̂_j v_jc / l̂),  ε_c = (Σ_j (γ_{n+1}p̂_j + Δp_j)|v_jc| + |Ô_c|·E_l)/(l̂ − E_l) + 2u|Ô_c| + tiny
//   LSÊ = fl(m̂ + log l̂),  ε = −log1p(−E_l/l̂) + kLibmLogUlps·(2u|log l̂| + η) + u|LSÊ|
// and every ε multiplied by kEpsInflation, which covers the rounding of ε's own evaluation (SPEC.md §5.1).
// Backward, from the same p̂, Δp, l̂, E_l (G = Hq/Hkv; dropout's 1/(1 − p) applied at the end, as O's):
//   P̂ = fl(p̂/l̂),  ΔP = (Δp + P̂·E_l)/(l̂ − E_l) + 2uP̂   (≥ |P̂ − P|)
//   dP̂ = fl(dO·Vᵀ) (0 where dropped),  E_dP = γ_Dv‖dO_i‖‖v_j‖;  Δ̂ = Σ_j P̂ dP̂,
//   E_Δ = Σ_j ΔP(|dP̂| + E_dP) + Σ_j P̂·E_dP + γ_Lk Σ_j P̂|dP̂|
//   â = fl(dP̂ − Δ̂), E_a = E_dP + E_Δ + u|â|;  dŜ = fl(P̂·â), E_dS = ΔP|â| + (P̂ + ΔP)E_a + u|dŜ|
//   softcap: dŜ' = fl(dŜ·ĝ), ĝ ≈ sech²(x/c) within e_g: E_dS' = E_dS(ĝ + e_g) + |dŜ|e_g + u|dŜ'|
//   dQ̂ = fl(scale·dŜ'·K), ε = |scale|·(E_dS' + γ_N|dŜ'|)·|K| + u|dQ̂|   (N = max(Lk, G·Lq)); dK the same with Q
//   dV̂ = fl(P̂ᵀ·dO), ε = (ΔP + γ_{G·Lq}P̂)ᵀ·|dO|   (kept entries only), plus absolute η terms for underflow.
//
// Example:
//   if (auto fast = attncheck::fast_forward(p)) {
//     auto v = attncheck::fast_filter(kernel_out[n], bound.out[n], fast->out[n], fast->out_err[n]);
//     if (v == attncheck::FilterVerdict::escalate) { /* compare with reference_forward(p).out[n] instead */ }
//   }
//   if (auto g = attncheck::fast_backward(p)) { /* g->dq[n] ± g->dq_err[n], likewise dk, dv */ }
#pragma once

#include "attncheck/problem.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attncheck {

/// Unit roundoff of double (round to nearest).
inline constexpr double kDoubleU = 0x1p-53;
/// Smallest positive subnormal double: the absolute part of an ulp near underflow.
inline constexpr double kDoubleEta = 0x1p-1074;

/// The libm accuracy the fast path relies on: |f̃(x) − f(x)| ≤ ulps·(2u·|f(x)| + η) for every double x (2u|f| + η
/// bounds one ulp of f(x), subnormals included). glibc's tables (sysdeps/x86_64/fpu/libm-test-ulps, double) list 1 ulp
/// for exp, log, log1p, expm1 and 2 for tanh, measured from the correctly rounded result (so ≤ 1.5 and 2.5 from f(x));
/// these constants allow more than that. tests/reference/fast_reference_test.cpp checks them against MPFR.
inline constexpr double kLibmExpUlps = 4;
inline constexpr double kLibmLogUlps = 4;
inline constexpr double kLibmLog1pUlps = 4;
inline constexpr double kLibmTanhUlps = 4;

/// ε's own evaluation in double is a positive expression of at most K ≤ 4·(D + Lk) + 64 operations along any path
/// (sums, products, divisions by quantities bounded below, libm calls at ≤ 4 ulps), each losing at most 8u relative:
/// with D + Lk ≤ kMaxFastTerms the computed ε is at least (1 − 2⁻²⁴)× the exact expression, and its second-order terms
/// dropped in the derivation are below 2⁻⁴⁰ of it. Multiplying by 1 + 2⁻²⁰ (rounded up, it is a double) covers both.
inline constexpr double kEpsInflation = 1 + 0x1p-20;
/// The largest D + Lk (backward: D + Dv + Lk + G·Lq, the longest sums along a path of its ε) the inflation above is
/// proven for (8u·4·(2²⁴ + 16) < 2⁻²⁴; the backward's paths have ≤ 4·(D + Dv + Lk + G·Lq) + 64 operations too).
inline constexpr std::int64_t kMaxFastTerms = std::int64_t{1} << 24;
/// Largest log-space error θ_j of one weight the fast path accepts: above it ρ_j is ≥ 0.6 (a useless bound) and the
/// row gets ε = +∞ (the filter escalates); below it expm1(θ) ≤ θ(1 + 0.6θ) is what ρ uses, no libm call.
inline constexpr double kMaxLogSpaceError = 0.5;

/// Per-element values and bounds, in the layouts of ExactForward: out/out_err [B,Hq,Lq,Dv], lse/lse_err [B,Hq,Lq].
/// For every element, |value − exact| ≤ err in exact arithmetic; err = 0 exactly where the value is exact (rows that
/// see no key: out = 0, lse = −∞ or sink_h; rows i ≥ Lq_b); err = +∞ where the fast path cannot bound (a row whose
/// weights are too uncertain, kMaxLogSpaceError, or a non-finite intermediate).
struct FastForward {
  std::vector<double> out, out_err;
  std::vector<double> lse, lse_err;
};

/// Test-only knobs that plant bugs in fast_forward's bound (never set them outside tests): `eps_scale` multiplies
/// every ε; `drop` removes one term of the derivation.
struct FastForwardKnobs {
  enum class Drop { none, dot_product };
  double eps_scale = 1;
  Drop drop = Drop::none;
};

/// Why fast_forward does not cover p, in one line; "" when it does. Covered: every mask and causal alignment, and
/// the features window, softcap, ALiBi, sinks, the boolean and the additive mask, varlen and paged (per-sequence
/// lengths: the logical tensors are the same), dropout (its applied mask) and FP8 (descale·stored, checked exact in
/// double). Declined: a non-finite input value, a scale with |scale| outside {0} ∪ [2⁻²⁰⁰, 2²⁰⁰] (products could
/// leave double's normal range), D + Lk > kMaxFastTerms, or an FP8 descale product that is not exact in double.
std::string fast_forward_declines(const Problem &p);

/// O and LSE of p in double with their error bounds (header comment; SPEC.md §5.1), or std::nullopt when
/// fast_forward_declines(p) is not "". Throws std::invalid_argument like reference_forward for an invalid problem.
/// Summation order and FMA contraction are free (the bounds hold for any order): the products are Eigen GEMMs.
std::optional<FastForward> fast_forward(const Problem &p, const FastForwardKnobs &knobs = {});

/// Per-element values and bounds of the backward, in the layouts of ExactBackward: dq/dq_err [B,Hq,Lq,D],
/// dk/dk_err [B,Hkv,Lk,D], dv/dv_err [B,Hkv,Lk,Dv]. err = 0 exactly where the value is exact (rows that see no key or
/// i ≥ Lq_b: dq = 0; keys that no row sees: dk = dv = 0); +∞ where a row's weights cannot be bounded (as O's) for
/// every element that row reaches (its dq, and dk, dv of every key it sees), or a value is not finite.
struct FastBackward {
  std::vector<double> dq, dq_err;
  std::vector<double> dk, dk_err;
  std::vector<double> dv, dv_err;
};

/// Test-only knobs that plant bugs in fast_backward's bound (never set them outside tests): `eps_scale` multiplies
/// every ε; `drop` removes one term: Δ's error E_Δ, or P's error ΔP in dV's bound.
struct FastBackwardKnobs {
  enum class Drop { none, delta, dv_weights };
  double eps_scale = 1;
  Drop drop = Drop::none;
};

/// Why fast_backward does not cover p, in one line; "" when it does. Covers what fast_forward covers (every feature
/// the MPFR backward computes: window, softcap, ALiBi, sinks, masks, varlen, paged, dropout, FP8 values) and GQA.
/// Declined: no dout, a non-finite dout value, what fast_forward declines, or D + Dv + Lk + G·Lq > kMaxFastTerms.
std::string fast_backward_declines(const Problem &p);

/// dQ, dK, dV of p (p.dout required) in double with their error bounds (header comment; SPEC.md §5.1), or
/// std::nullopt when fast_backward_declines(p) is not "". Throws std::invalid_argument like reference_backward.
std::optional<FastBackward> fast_backward(const Problem &p, const FastBackwardKnobs &knobs = {});

/// Outward ends of [r̃ − ε, r̃ + ε] as doubles: one ulp beyond the rounded difference, so the exact value lies in
/// [fast_lower(r, e), fast_upper(r, e)]. For ε = 0 the value itself (−∞ included).
inline double fast_lower(double r, double e) {
  return e == 0 ? r : std::nextafter(r - e, -std::numeric_limits<double>::infinity());
}
inline double fast_upper(double r, double e) {
  return e == 0 ? r : std::nextafter(r + e, std::numeric_limits<double>::infinity());
}

/// The filter's verdict on one element.
enum class FilterVerdict {
  pass,      ///< |k − exact| ≤ β is certain: |k − r̃| + ε ≤ β
  fail,      ///< |k − exact| > β is certain: |k − r̃| − ε > β
  escalate,  ///< the margin is within ε (or a value is not finite): compare with the MPFR reference
};

/// Decides |k − exact| ≤ β from the fast value r̃ and its bound ε (|r̃ − exact| ≤ ε), with the comparisons' own
/// rounding accounted for (each side moved by 2⁻⁵⁰ relative against the verdict). k = r̃ with ε = 0 passes (−∞ = −∞,
/// a row that sees no key); any other non-finite k, r̃, ε or β escalates — the MPFR path and error_ratio() keep their
/// conventions for NaN, infinities and unbounded elements.
FilterVerdict fast_filter(double k, double beta, double r, double eps);

}  // namespace attncheck
