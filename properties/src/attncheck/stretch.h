// Stretched problems: long rows with exact answers, from a small core (SPEC.md §7, `long_rows`).
//
// A stretched case (CaseSpec::stretch active) keeps its core as q, k, v — Lq distinct queries, Lk live keys, D, Dv
// (spec.shape) — and stands for the problem of stretch.Lq rows and stretch.Lk keys that the kernel is given:
//   D' = D + 1: a gate column; B, Hq, Hkv, Dv as the core's; scale 1/√D'; the case's mask, layout and dtype;
//   row i           ← core query i mod Lq, gate A;
//   key at p_t      ← core key t, gate 0            (p_0 < … < p_{Lk−1}: live_positions, p_0 = 0, p_last = Lk' − 1);
//   every other key ← 0, gate −C (a filler key);    v ← filler_value(j, c), integers in [−4, 4].
// A live logit is the core's (its gate term is A·0 = 0 exactly); every filler logit is −scale'·A·C, at least
// kFillerMargin below the LSE of every row (A·C is chosen from the core's magnitudes). So row i's exact answer is
// the core query's over the live keys it sees — a prefix of them, since positions ascend — up to the filler's
// weight δ_i ≤ n_i·e^{−kFillerMargin} (n_i keys), which the bound carries (error_model.h FillerKeys). The MPFR
// reference runs on the core (one top-left causal problem per core query gives every prefix at once), the bound
// on the core with n_i in its γ terms: a long row costs nothing more than its core.
//
// Why live keys, and not copies of a block that all weigh: the bound of a row of n keys grows with γ_{2n} (any
// summation order), so a block's weight must exceed it to be missed; at n = 65,536 in float32 that is ≈ 0.8 % of
// the row. A few live keys each weigh ≫ that, and they sit where kernels break: the first key, the last one (a
// tail block), and evenly through the row on both sides of 16-key tile edges — a dropped, doubled, wrapped or
// misplaced block holding one changes O beyond the bound. Filler values are nonzero, so a filler key given weight
// shows too (a wrong max or split combine).
//
// Example:
//   attncheck::Case c;                                   // core: one query, 3 live keys, D = 4
//   c.spec.shape = {.Lk = 3, .D = 4, .Dv = 4};
//   c.spec.stretch = {.Lq = 1, .Lk = 65536};             // a decode row of 65,536 keys
//   c.resize_values(false);  /* … core values … */
//   attncheck::Problem p = c.problem();                  // q [1,1,1,5], k, v [1,1,65536,5|4]
//   auto sf = attncheck::stretched_forward(c, attncheck::PrecisionProfile::for_storage(c.spec.dtype));
#pragma once

#include "attncheck/case.h"
#include "attncheck/error_model.h"
#include "attncheck/reference.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attncheck {

/// e^{−kFillerMargin} per filler key: its weight is below 2⁻¹⁰⁰ of the row's even at 2³¹ keys.
inline constexpr double kFillerMargin = 100;
/// Filler values are integers in [−kFillerValueMax, kFillerValueMax] (exact in every dtype).
inline constexpr int kFillerValueMax = 4;
/// Live positions away from the ends snap alternately to the first and the last key of a tile of this many keys.
inline constexpr std::int64_t kLiveSnap = 16;

/// The problem's shape: the core's with Lq, Lk from the stretch and D + 1.
Shape stretched_shape(const CaseSpec &spec);
/// The positions of `live` keys in a row of `length` keys (1 ≤ live ≤ length), ascending: 0, then evenly spread
/// snapped to tile edges (kLiveSnap), and length − 1 last.
std::vector<std::int64_t> live_positions(std::int64_t length, std::int64_t live);
/// v of the filler key at position j, column c.
double filler_value(std::int64_t j, std::int64_t c);
/// The gate: queries carry A, filler keys −C, both powers of two, A·C the smallest one that puts every filler logit
/// kFillerMargin below each row's LSE (bounded below by its logit of key 0, which every non-empty row sees).
struct Gate {
  double A = 1, C = 1;
};
Gate gate_of(const Case &c);
/// The long problem (Case::problem() of a stretched case).
Problem stretched_problem(const Case &c);
/// Lines describing the long problem: lengths, gate, live positions (for reports).
std::string describe_stretch(const Case &c);

/// The long problem's exact forward and its bounds under `profile`: per row, the core's answer over the live keys
/// it sees (MPFR) and the error model's bound with the row's filler (error_model.h FillerKeys).
struct StretchedForward {
  ExactForward exact;
  ForwardBounds bounds;
};
StretchedForward stretched_forward(const Case &c, const PrecisionProfile &profile);

}  // namespace attncheck
