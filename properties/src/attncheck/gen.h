// Generators of the property engine (RapidCheck), in three layers:
//   draws        — random bits (rc::Random) → a CaseSpec, a Case's values (deterministic for the Random and size);
//   shrinkables  — a value → its rc::Shrinkable tree, built from the pure shrinkers of shrink.h (shrinkRecur);
//   generators   — rc::Gen = draw + shrinkable; gen_case binds the spec to its values with gen::mapcat, so a
//                  failure shrinks its spec first (values redrawn for each smaller spec), then its shape again
//                  keeping the values that fail (slices), then the values themselves;
//   mutations    — a case → a neighbour (mutate_case), for the engine's targeted phase (check.h).
//
// Shapes come from three regimes drawn at fixed rates, so that most cases stay cheap for the MPFR reference while
// tiling edges and long rows are still reached:
//   small    (the rest: 1 − kBoundaryRate − kLongRowRate, less kReachRate under reach): lengths and head dims small,
//            growing with RapidCheck's size;
//   boundary (kBoundaryRate): Lq, Lk (one or both) or D or Dv at a tiling boundary (kTileBoundaries, kOddHeadDims),
//            or D, Dv at a production head dim (kProductionHeadDims);
//   long     (kLongRowRate): Lk in [kLongRowMin, kLongRowMin + kLongRowSpan), Lq ≤ kLongRowMaxLq, small heads, D;
//   reach    (kReachRate, screened properties only: CaseOptions::reach): production head dims against rows of up to
//            kReachMaxKeys keys, within CaseOptions::kReachMaxWork (and max_work).
// Small and boundary cases draw B and the GQA group from buckets (kBatchBuckets, kGroupBuckets, MQA at kMqaRate).
// Every spec respects CaseOptions::max_work (B·Hq·Lq·Lk·(D + Dv)); a rare batch or group (kRareBatch, kRareGroup)
// keeps its size, within max_work / kRareWorkDivisor, while lengths and head dims give way.
//
// Example:
//   attncheck::CaseOptions opts{.dtype = attncheck::Dtype::f16, .backward = true};
//   rc::Gen<attncheck::Case> g = attncheck::gen_case(opts);
//   attncheck::Case c = g(rc::Random(42), /*size=*/50).value();
#pragma once

#include "attncheck/case.h"

#include <rapidcheck/Gen.h>
#include <rapidcheck/Random.h>
#include <rapidcheck/Shrinkable.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace attncheck {

// ---- shape regimes ----
/// Tiling boundaries of common kernels: 16, 32, 64, 128, 256 and ±1 around each.
inline constexpr std::array<std::int64_t, 15> kTileBoundaries{15, 16, 17, 31, 32, 33, 63, 64, 65,
                                                              127, 128, 129, 255, 256, 257};
/// Odd head dims that break vector-width assumptions.
inline constexpr std::array<std::int64_t, 2> kOddHeadDims{59, 111};
inline constexpr double kBoundaryRate = 0.25;  ///< share of cases in the boundary regime
inline constexpr double kLongRowRate = 0.05;   ///< share of cases in the long-row regime
inline constexpr std::int64_t kLongRowMin = 1024, kLongRowSpan = 64, kLongRowMaxLq = 2;
/// The reach regime (CaseOptions::reach: properties the fast reference screens, whose cost per element is about a
/// double evaluation's): production head dims (kProductionHeadDims, or an odd D in [kReachMinOddDim, 256] at
/// kReachOddRate), up to kReachMaxQueries query rows, B = Hkv = 1 and up to kLongRowMaxHeads query heads, against rows
/// of kReachMinKeys keys up to what CaseOptions::kReachMaxWork (or a smaller max_work) leaves, at most kReachMaxKeys
/// (log-uniform, a third at a power of two or one off it): D = Dv = 64 reaches 2,048 keys, 256 reaches 512. Every value
/// family but extremes. Its share is what the default profile's time affords: a reach case costs about ten small ones,
/// mostly drawing its values and the kernel (a kernel that declines pays the drawing too), and at 5 % the builtin
/// default profile takes the wall time it took before the screen.
inline constexpr double kReachRate = 0.05;
inline constexpr double kReachOddRate = 0.25;
inline constexpr std::int64_t kReachMinKeys = 129, kReachMaxKeys = 2048, kReachMaxQueries = 16, kReachMinOddDim = 17;
/// Stretched cases (CaseOptions::stretch, stretch.h), in three regimes drawn at fixed rates: decode (Lq ≤
/// kMaxStretchDecodeLq, Lk up to kMaxStretchKeys), square (Lq = Lk up to kMaxStretchSquare) and general; lengths
/// log-uniform from kMinStretchKeys, and each regime's maximum itself at every kStretchMaxEvery-th RapidCheck size.
/// Cores: up to kMaxCoreQueries queries, kMaxLiveKeys live keys, problem D up to kMaxStretchHeadDim. The problem's
/// B·Hq·Lq·Lk·(D + Dv) stays within kMaxStretchWork (batches, heads, head dims, then the other length give way).
inline constexpr double kStretchDecodeRate = 0.5, kStretchSquareRate = 0.3;
inline constexpr std::int64_t kMaxStretchKeys = 65536, kMaxStretchSquare = 8192, kMaxStretchDecodeLq = 16;
inline constexpr std::int64_t kMinStretchKeys = 64, kMaxStretchGeneralLq = 1024, kMaxStretchGeneralLk = 16384;
inline constexpr std::int64_t kMaxCoreQueries = 2, kMaxLiveKeys = 16, kMaxStretchHeadDim = 128;
inline constexpr int kStretchMaxEvery = 8;
inline constexpr std::int64_t kMaxStretchWork = std::int64_t{1} << 28;
/// Feature cases: the chance that each combinable feature the kernel declares joins the property's own
/// (CaseOptions::combinable).
inline constexpr double kExtraFeatureRate = 0.125;
/// Cases of the independence properties (CaseOptions::declared_features): the chance that each combinable feature the
/// kernel declares joins the case — a quarter, so that about half of them carry one.
inline constexpr double kIndependenceFeatureRate = 0.25;
/// Feature cases' own shape regimes (not pooled nor stretched), drawn in place of the small regime (the boundary,
/// long-row and reach regimes stay):
///   boundary (kFeatureBoundaryRate): Lk — and Lq too, or Lq = Lk, a third of the time each — whole 128-key tiles
///            (up to kFeatureTileMultiples − 1) and 16, 32, 64 or 128 keys more (kFeatureTileBases: a quarter of them
///            half a tile past, ≡ 64 mod 128), one off it a third of the time: the tiles a masked, windowed, paged
///            or varlen kernel and its backward pad or split;
///   split    (kSplitCornerRate, when the case may take a window or has a mask): rows whose visible keys start after
///            the first S ∈ kFeatureTileBases keys — a window's left edge, or a mask's hidden prefix — with the sinks
///            the kernel declares, so that a split-KV kernel meets an empty first split (and, past 2S, an empty second
///            one); half of them decode rows (Lq = 1), half of those with GQA over kSplitDecodeKvHeads kv heads.
inline constexpr double kFeatureBoundaryRate = 0.6, kSplitCornerRate = 0.2;
inline constexpr std::array<std::int64_t, 4> kFeatureTileBases{16, 32, 64, 128};
inline constexpr std::int64_t kFeatureTileMultiples = 3, kSplitMaxWindow = 15, kSplitDecodeKvHeads = 2;
/// GQA groups of the split regime's decode rows (≥ 2, not only powers of two).
inline constexpr std::array<std::int64_t, 6> kSplitDecodeGroups{2, 3, 4, 5, 7, 8};
/// Masks: the share with rows that see no key (FeatureSpec::mask_empty_rows; none under empty-rows=unspecified, which
/// would not judge them) and with a hidden prefix of a tile's keys, or one off it (FeatureSpec::mask_prefix).
inline constexpr double kMaskEmptyRowsRate = 0.75, kMaskPrefixRate = 0.25;
/// Per-tensor layouts (CaseSpec::layouts) of cases that neither fix the layout nor use varlen, paged or stretch: each
/// of q, k, v, out, lse, dout takes a layout of its own at kOwnLayoutRate (an LSE one of bhld, blhd, padded); k and v
/// are expanded together (stride 0 on B or H, as a shared prefix or an expanded MQA cache) at kExpandedKvRate, and
/// each of q, k, v, dout alone at kExpandedRate. A broadcast goes to a dimension longer than 1 when there is one.
inline constexpr double kOwnLayoutRate = 0.1, kExpandedKvRate = 0.1, kExpandedRate = 0.05;
/// CaseOptions::huge_bytes: the RapidCheck size that draws a case of more than 2³¹ elements (once per 101 cases).
inline constexpr int kHugeSize = 20;
/// The huge case: a decode row per head, kHugeHeads heads of kHugeKeys keys, problem head dim kHugeHeadDim, Dv 1 —
/// 2³¹ + 32,768 elements in k. Many rows of a length the error model bounds tightly, rather than one row of 2²⁴ keys
/// (γ_{2n} of float32 passes 1 there: no bound).
inline constexpr std::int64_t kHugeHeadDim = 128, kHugeHeads = 256, kHugeKeys = kMaxStretchKeys + 1;
/// Live keys of the huge case's core, at most (its core has kHugeHeads heads).
inline constexpr std::int64_t kHugeLiveKeys = 4;
/// The huge case's spec (its core drawn by draw_spec) and the bytes its tensors (q, k, v, O, LSE) take in `dt`.
CaseSpec huge_stretch(Dtype dt);
std::uint64_t tensor_bytes(const CaseSpec &s);
/// Elements of the largest input tensor of a problem of shape `s` (q, k or v).
std::int64_t largest_tensor(const Shape &s);
/// A problem with a tensor of more than 2³¹ elements (offsets past 2³¹ − 1). Its failures are not shrunk: the huge case is at that
/// threshold by construction (one key fewer per head and k has 2³¹ elements), and every candidate would cost a
/// multi-gigabyte call.
bool is_huge(const CaseSpec &s);
/// Largest Lq, Lk and D, Dv of the small regime (reached at RapidCheck size ≥ rc::kNominalSize).
inline constexpr std::int64_t kSmallMaxLength = 12, kSmallMaxHeadDim = 16;
/// A bucket of drawn sizes: one of them is chosen with probability weight ÷ the sum of its list's weights, then a size
/// uniform in [lo, hi].
struct Bucket {
  std::int64_t lo, hi;
  double weight;
};
/// Batches of the small and boundary regimes (weights: shares of the cases as drawn, before the work cap): a single
/// sequence, two, the 3–8 of batched serving and past 8 (kernels that tile or split the batch grid).
inline constexpr std::array<Bucket, 4> kBatchBuckets{{{1, 1, 0.40}, {2, 2, 0.25}, {3, 8, 0.25}, {9, 16, 0.10}}};
/// GQA groups G = Hq / Hkv of the small and boundary regimes on Hkv ∈ [1, kMaxKvHeads], each met several times in a
/// run of 100 cases: MHA; 2 and 4 (Llama-3-8B's and Mistral-7B's 32/8); 3 and 5–8, mostly not powers of two
/// (Qwen2.5's 14/2 = 7 and 40/8 = 5; 3, the smallest) besides Llama-3-70B's 64/8; 16 (Falcon-40B's 128/8); 32 and
/// 64 (past the group tiles of 8 kernels specialize for). Weights: shares of all cases; the rest, kMqaRate, is MQA.
inline constexpr std::array<Bucket, 8> kGroupBuckets{{{1, 1, 0.25}, {2, 2, 0.12}, {3, 3, 0.08}, {4, 4, 0.10},
                                                       {5, 8, 0.15}, {16, 16, 0.08}, {32, 32, 0.07},
                                                       {64, 64, 0.07}}};
inline constexpr std::int64_t kMaxKvHeads = 2;
/// MQA: one kv head under kMqaHeads query heads (StarCoder's and PaLM's 48, Falcon-7B's odd 71; 32 and 128 the range
/// served), at this share of the cases.
inline constexpr double kMqaRate = 0.08;
inline constexpr std::array<std::int64_t, 4> kMqaHeads{32, 48, 71, 128};
/// Batches and groups this large (beyond the old B ≤ 2, G ≤ 4) are kept by the work cap: lengths and head dims give
/// way first, so that they meet rows of several keys rather than only 1×1 cases.
inline constexpr std::int64_t kRareBatch = 3, kRareGroup = 5;
/// Such a case fits in CaseOptions::max_work / kRareWorkDivisor: they are about two thirds of the cases, and at the
/// full cap they would make the MPFR reference 2.5× as costly on average; their rows stay several (mean Lq·Lk ≈ 50).
inline constexpr std::int64_t kRareWorkDivisor = 8;
/// Head dims of production models (boundary regime, one axis in six): Llama's 128, GPT-2's 64, 80
/// (Phi-2), 96 (Phi-3-mini), 192 (DeepSeek-V3's MLA q·k, with 128 for v) and 256 (Gemma); D ≠ Dv among them too.
inline constexpr std::array<std::int64_t, 6> kProductionHeadDims{64, 80, 96, 128, 192, 256};
/// Whether `d` is one of kProductionHeadDims.
inline bool is_production_head_dim(std::int64_t d) {
  return std::find(kProductionHeadDims.begin(), kProductionHeadDims.end(), d) != kProductionHeadDims.end();
}
/// Heads of the long-row regime (B = Hkv = 1: its rows are long already).
inline constexpr std::int64_t kLongRowMaxHeads = 2;
/// Largest B, Hkv and query-head group (Hq / Hkv) of few heads (CaseOptions::few_heads) and of stretched cores (their
/// problems are long already).
inline constexpr std::int64_t kFewBatch = 2, kFewKvHeads = 2, kFewGroup = 4;

// ---- draws ----
/// A spec drawn from `random` at RapidCheck size `size` (0 … rc::kNominalSize), honouring `opts`.
CaseSpec draw_spec(const rc::Random &random, int size, const CaseOptions &opts);
/// A case of `spec` with values drawn from `random` (family spec.family; v and dout per value_family_of_v; v all
/// zero without opts.draw_v; dout only with opts.backward). The entries come from a SplitMix64 stream seeded by
/// one word of `random`: a few instructions per entry, where RapidCheck's Random computes a Threefish block every
/// four words.
Case draw_case(const rc::Random &random, const CaseSpec &spec, const CaseOptions &opts);
/// One value of `family` in dtype `dt` (families that need several values to mean anything, near_ties and
/// dominant_key, draw as normal here).
double draw_value(rc::Random &random, Family family, Dtype dt);

// ---- shrinkables ----
/// `s` with the shrink tree of shrink::spec_shrinks.
rc::Shrinkable<CaseSpec> shrinkable_spec(CaseSpec s, const CaseOptions &opts);
/// One value with the shrink tree of shrink::value_shrinks.
rc::Shrinkable<double> shrinkable_value(double x, Dtype dt);
/// A vector of values: whole-vector simplifications first (shrink::all_values_shrinks), then one element at a
/// time (shrink::value_shrinks).
rc::Shrinkable<std::vector<double>> shrinkable_values(std::vector<double> values, Dtype dt);

/// A case: slices first (smaller shapes that keep the surviving values, shrink::slices), then mask and layout
/// relabels, then its values (as shrinkable_values, over Case::flat()).
rc::Shrinkable<Case> shrinkable_case(Case c, const CaseOptions &opts);

// ---- generators ----
rc::Gen<CaseSpec> gen_spec(const CaseOptions &opts);
/// A case of a given spec, drawn, shrinking as shrinkable_case.
rc::Gen<Case> gen_values(const CaseSpec &spec, const CaseOptions &opts);
/// A full case: gen::mapcat(gen_spec, gen_values).
rc::Gen<Case> gen_case(const CaseOptions &opts);
rc::Gen<double> gen_value(Family family, Dtype dt);

// ---- mutations ----
/// A neighbour of `c`, for the targeted phase (check.h) that climbs a property's error ÷ bound — one of:
///   magnify  — q or k (sometimes v or dout), whole or one row, times ½, 2 or 4: logits widen or narrow;
///   redraw   — 1 to 3 entries of one tensor drawn again from their family;
///   nudge    — one entry moved by 1 to 4 ulps of its dtype;
///   dominate — one key made 1, 2 or 4 times a query it meets: that row's P close to one-hot there;
///   move_key — two keys (k and v rows) trade places, one often at a tiling boundary: where the dominant key sits;
///   resize   — Lq or Lk to ±1 or the next tiling boundary either way, the values kept where they fit.
/// The mutant meets `opts` (admits(), max_work; v untouched without draw_v; a stretched or pooled case, or one whose
/// head dims follow Lk, keeps its shape), its values are representable in its dtype (and FP8 format) and equal along
/// every broadcast dimension. Deterministic for `random` (which it advances); `c` itself when nothing applied.
Case mutate_case(const Case &c, rc::Random &random, const CaseOptions &opts);

}  // namespace attncheck
