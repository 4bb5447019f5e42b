// Draws: random bits (rc::Random) → specs, and a SplitMix64 stream seeded from it → values. Deterministic for a Random
// and a size; no shrinking here.
#include "attncheck/gen.h"

#include "bits.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace attncheck {

namespace {
using gen_detail::Bits;
using gen_detail::SplitMix64;
using gen_detail::ValueBits;
using gen_detail::precision_bits;
using gen_detail::ulp_in;
constexpr int kPercent = rc::kNominalSize;  // RapidCheck sizes run 0 … kNominalSize
constexpr double kCausalRate = 0.5, kDvEqualsDRate = 0.5;
constexpr std::array<Layout, 4> kLayouts{Layout::bhld, Layout::blhd, Layout::transposed, Layout::padded};
/// Family::large: target logit magnitudes log-uniform in [10^kLargeMinLog10, 10^kLargeMaxLog10].
constexpr double kLargeMinLog10 = 2, kLargeMaxLog10 = 4;
/// Family::outliers: share of entries scaled, and their scale 10^[kOutlierMinLog10, kOutlierMaxLog10].
constexpr double kOutlierRate = 0.03, kOutlierMinLog10 = 2, kOutlierMaxLog10 = 3;
/// Family::extremes: share of entries taken from the extremes list.
constexpr double kExtremeRate = 0.5;
/// Family::near_ties: chance that an entry of a key moves one ulp off the common row (each direction).
constexpr double kTieNudgeRate = 0.25;
/// Family::dominant_key: the dominant key is kDominance × the normalized sum of its queries.
constexpr double kDominance = 4;
/// Feature settings (draw_features): softcap's range, the mask's share of visible entries, page sizes (1, odd,
/// tile-sized and one past it), dropout rates.
constexpr double kSoftcapMin = 0.5, kSoftcapMax = 100;
constexpr std::array<double, 4> kMaskKeep{0.1, 0.5, 0.9, 1.0};
constexpr std::array<std::int64_t, 7> kPageSizes{1, 2, 3, 5, 16, 17, 64};
constexpr std::array<double, 3> kDropoutRates{0.1, 0.5, 0.9};
/// Share of boolean masks whose visible entries hold bytes 1…255 (FeatureSpec::mask_bytes), not only 1.
constexpr double kMaskBytesRate = 0.5;
/// Share of cases with argument tensors that send them strided and offset (FeatureSpec::strided_args).
constexpr double kStridedArgsRate = 0.25;
constexpr std::uint64_t kStridedArgsSalt = 0x5354524944454441ull;  // "STRIDEDA"
/// Paged and varlen cases in the decode regime: up to kMaxDecodeRows query rows against caches of up to
/// kMaxDecodeKeys keys (log-uniform), at rate kDecodeRate.
constexpr double kDecodeRate = 0.25;
constexpr std::int64_t kMaxDecodeRows = 16, kMaxDecodeKeys = 4096;
/// FP8 cases: the share of q, k, v entries at ± the format's largest value.
constexpr double kFp8MaxRate = 1.0 / 16;
constexpr double kF16Max = 65504, kF16MinNormal = 0x1p-14, kF16MinSubnormal = 0x1p-24;
constexpr std::int64_t kF16SubnormalSteps = 1023;


/// Grows linearly from 1 at size 0 to `max` at size kPercent.
std::int64_t size_scaled(int size, std::int64_t max) {
  const std::int64_t s = std::clamp(size, 0, kPercent);
  return 1 + (max - 1) * s / kPercent;
}

/// A value of `buckets`: a bucket drawn with probability its weight ÷ the weights' sum, then uniform within it.
template <std::size_t N>
std::int64_t draw_bucket(Bits &b, const std::array<Bucket, N> &buckets) {
  double total = 0;
  for (const Bucket &k : buckets) total += k.weight;
  double u = b.unit() * total;
  for (const Bucket &k : buckets) {
    if (u < k.weight) return b.uniform(k.lo, k.hi);
    u -= k.weight;
  }
  return b.uniform(buckets.back().lo, buckets.back().hi);
}

/// B, Hkv and Hq of few heads (CaseOptions::few_heads, stretched cores): uniform up to kFewBatch, kFewKvHeads and
/// kFewGroup.
void draw_few_heads(Bits &b, Shape &sh) {
  sh.B = b.uniform(1, kFewBatch);
  sh.Hkv = b.uniform(1, kFewKvHeads);
  sh.Hq = sh.Hkv * b.uniform(1, kFewGroup);
}

/// B, Hkv and Hq of the small and boundary regimes: the batch and the GQA group from their buckets, or MQA.
void draw_heads(Bits &b, Shape &sh) {
  sh.B = draw_bucket(b, kBatchBuckets);
  if (b.chance(kMqaRate)) {
    sh.Hkv = 1;
    sh.Hq = b.pick(kMqaHeads);
  } else {
    sh.Hkv = b.uniform(1, kMaxKvHeads);
    sh.Hq = sh.Hkv * draw_bucket(b, kGroupBuckets);
  }
}

/// The pool slot of a case at RapidCheck size `size` among `n` shapes: size × (n − 1) / kPercent, rounded. A run of
/// m ≤ kPercent / 2 cases has sizes ⌊i·kPercent / (m − 1)⌋, so with m = n it draws each of the n slots once.
std::size_t pool_slot(int size, std::size_t n) {
  const auto s = static_cast<std::size_t>(std::clamp(size, 0, kPercent));
  return (s * (n - 1) + kPercent / 2) / kPercent;
}

/// A float16 extreme: ±65504, ±the smallest normal, ±a subnormal (normal numbers in float32 and bfloat16).
template <class B>
double extreme(B &b) {
  const double sign = b.chance(0.5) ? -1.0 : 1.0;
  switch (b.uniform(0, 2)) {
    case 0: return sign * kF16Max;
    case 1: return sign * kF16MinNormal;
    default: return sign * kF16MinSubnormal * static_cast<double>(b.uniform(1, kF16SubnormalSteps));
  }
}

/// One entry of `family` before rounding; `sigma` scales the normal draws of Family::large.
template <class B>
double entry(B &b, Family family, double sigma) {
  switch (family) {
    case Family::small_ints: return static_cast<double>(b.uniform(-kSmallIntMax, kSmallIntMax));
    case Family::uniform: return 2 * b.unit() - 1;
    case Family::large: return sigma * b.normal();
    case Family::outliers: {
      const double x = b.normal();
      if (!b.chance(kOutlierRate)) return x;
      return x * std::pow(10.0, kOutlierMinLog10 + (kOutlierMaxLog10 - kOutlierMinLog10) * b.unit());
    }
    case Family::extremes: return b.chance(kExtremeRate) ? extreme(b) : b.normal();
    default: return b.normal();
  }
}

/// Shrinks dims until spec.work() ≤ max_work (the options' own, or the reach regime's smaller one): batches, then
/// heads, then the largest unprotected length or head dim, and only then the protected (boundary, long-row or reach)
/// dim. A rare batch (≥ kRareBatch) or GQA group (≥ kRareGroup) is kept instead, within max_work / kRareWorkDivisor:
/// its kv heads go first, then the lengths and head dims, and it is halved only when they are at 1.
void fit_work(CaseSpec &s, const CaseOptions &opts, std::int64_t Shape::*protect, std::int64_t max_work) {
  Shape &sh = s.shape;
  auto sync = [&] { opts.tie(sh); };
  sync();
  const bool rare_batch = sh.B >= kRareBatch, rare_group = sh.group() >= kRareGroup;
  const std::int64_t cap = rare_batch || rare_group ? max_work / kRareWorkDivisor : max_work;
  while (s.work() > cap) {
    if (sh.B > 1 && !rare_batch) {
      sh.B = 1;
    } else if (sh.Hq > 1 && !rare_group) {
      sh.Hq = sh.Hkv = 1;
    } else if (sh.Hkv > 1) {  // a rare group keeps its size on one kv head
      sh.Hq /= sh.Hkv, sh.Hkv = 1;
    } else {
      std::int64_t Shape::*largest = nullptr;
      for (auto m : {&Shape::Lq, &Shape::Lk, &Shape::D, &Shape::Dv}) {
        if (m == protect || opts.tied_dim(m) || sh.*m == 1) continue;
        if (!largest || sh.*m > sh.*largest) largest = m;
      }
      if (!largest && sh.B > 1) {  // only the rare batch or group is left before the protected dim
        sh.B = (sh.B + 1) / 2;
      } else if (!largest && sh.Hq > 1) {
        sh.Hq = (sh.Hq + 1) / 2;
      } else {
        if (!largest) largest = protect ? protect : &Shape::Lk;
        if (sh.*largest == 1) break;  // nothing left to shrink
        sh.*largest = (sh.*largest + 1) / 2;
      }
    }
    sync();
  }
}
/// A decode maximum falls short of kMaxStretchKeys by up to this many keys half of the time (a 64-key tile's tail).
constexpr std::int64_t kMaxTailShortfall = 63;
/// Core head dims of stretched cases besides small ones: problem D (one more) of 16, 32, 64, 128 and odd 59, 111.
constexpr std::array<std::int64_t, 6> kStretchCoreDims{15, 31, 63, 127, 58, 110};
/// Families whose logits stay bounded (the gate must push the filler below them, stretch.h).
constexpr std::array<Family, 5> kStretchFamilies{Family::small_ints, Family::uniform, Family::normal,
                                                 Family::near_ties, Family::dominant_key};

/// Log-uniform integer in [lo, hi]; a third of the draws moved to the nearest power of two, or one off it.
std::int64_t log_uniform_length(Bits &b, std::int64_t lo, std::int64_t hi) {
  std::int64_t n = static_cast<std::int64_t>(std::exp(std::log(static_cast<double>(lo)) +
                                                      b.unit() * std::log(static_cast<double>(hi) / lo)));
  if (b.chance(1.0 / 3)) n = (std::int64_t{1} << std::llround(std::log2(static_cast<double>(n)))) + b.uniform(-1, 1);
  return std::clamp(n, lo, hi);
}

/// Compile-friendly generation of stretched cases (CaseOptions::shape_pool set): the long problems' shapes come from
/// these (B, Hq, Hkv, Lq′, Lk′, core D, Dv) — a decode row with a partial tail past 65,536 / 16, a GQA decode past
/// 4,096, a square — while the live keys, core queries, mask, layout and values stay random.
constexpr std::array<std::array<std::int64_t, 7>, 3> kStretchPool{{{1, 1, 1, 1, kMaxStretchKeys - 1, 63, 64},
                                                                     {1, 4, 2, 16, 4097, 31, 32},
                                                                     {2, 2, 1, 1024, 1024, 15, 16}}};

/// A stretched spec (CaseOptions::stretch): a small core and long lengths, within kMaxStretchWork — or the huge
/// case (CaseOptions::huge_bytes) at kHugeSize.
CaseSpec draw_stretched(Bits &b, int size, const CaseOptions &opts) {
  // After the lengths: mask, layout (the huge case keeps bhld: no room lost to padding) and family.
  const auto finish = [&](CaseSpec &s, bool draw_layout) {
    s.mask = opts.mask.value_or(b.chance(kCausalRate) ? opts.causal : Mask::none);
    if (draw_layout) s.layout = opts.layout.value_or(b.pick(kLayouts));
    s.family = opts.family.value_or(b.pick(kStretchFamilies));
  };
  if (opts.huge_bytes > 0 && size == kHugeSize && tensor_bytes(huge_stretch(opts.dtype)) <= opts.huge_bytes) {
    CaseSpec s = huge_stretch(opts.dtype);
    s.shape.Lk = b.uniform(2, kHugeLiveKeys);
    finish(s, false);
    return s;
  }
  CaseSpec s;
  s.dtype = opts.dtype;
  Shape &sh = s.shape;
  if (opts.shape_pool && !opts.shape_pool->empty()) {
    const auto &[B, Hq, Hkv, Lq, Lk, D, Dv] = b.pick(kStretchPool);
    sh = Shape{.B = B, .Hq = Hq, .Hkv = Hkv, .Lq = b.uniform(1, kMaxCoreQueries),
               .Lk = b.uniform(1, kMaxLiveKeys), .D = D, .Dv = Dv};
    s.stretch = {.Lq = Lq, .Lk = Lk};
    sh.Lq = std::min(sh.Lq, Lq);
    finish(s, true);
    return s;
  }
  draw_few_heads(b, sh);
  sh.Lq = b.uniform(1, kMaxCoreQueries);
  sh.Lk = b.uniform(1, kMaxLiveKeys);
  sh.D = b.chance(0.5) ? b.uniform(1, kSmallMaxHeadDim) : b.pick(kStretchCoreDims);
  sh.Dv = b.chance(kDvEqualsDRate) ? sh.D + 1 : b.uniform(1, kMaxStretchHeadDim / 2);
  const bool at_max = size % kStretchMaxEvery == kStretchMaxEvery - 1;
  const double regime = b.unit();
  Stretch &st = s.stretch;
  std::int64_t Stretch::*protect = &Stretch::Lk;
  if (regime < kStretchDecodeRate) {
    // Half of the decode rows are single queries: the path decode kernels special-case.
    st.Lq = b.chance(0.5) ? 1 : b.uniform(2, kMaxStretchDecodeLq);
    // The maximum, or just short of it: a partial last tile.
    st.Lk = at_max ? kMaxStretchKeys - (b.chance(0.5) ? 0 : b.uniform(1, kMaxTailShortfall))
                   : log_uniform_length(b, kMinStretchKeys, kMaxStretchKeys);
  } else if (regime < kStretchDecodeRate + kStretchSquareRate) {
    st.Lq = st.Lk = at_max ? kMaxStretchSquare : log_uniform_length(b, kMinStretchKeys, kMaxStretchSquare);
  } else {
    st.Lq = log_uniform_length(b, 1, kMaxStretchGeneralLq);
    st.Lk = log_uniform_length(b, kMinStretchKeys, kMaxStretchGeneralLk);
    protect = b.chance(0.5) ? &Stretch::Lq : &Stretch::Lk;
  }
  sh.Lq = std::min(sh.Lq, st.Lq);
  finish(s, true);
  // Within the work cap: batches, then kv heads (the GQA group stays), head dims, the group, then the length the
  // regime does not stand for — a square's head dims first, then both its lengths.
  while (s.work() > kMaxStretchWork) {
    if (sh.B > 1) {
      sh.B = 1;
    } else if (sh.Hkv > 1) {
      sh.Hq /= sh.Hkv, sh.Hkv = 1;
    } else if (sh.D + 1 > kSmallMaxHeadDim || sh.Dv > kSmallMaxHeadDim) {
      if (sh.D + 1 >= sh.Dv) sh.D = (sh.D + 1) / 2; else sh.Dv = (sh.Dv + 1) / 2;
    } else if (sh.Hq > 1) {
      sh.Hq = 1;
    } else if (st.Lq == st.Lk && sh.D + 1 + sh.Dv > 3) {  // a square keeps its length; its head dims give way
      if (sh.D + 1 >= sh.Dv && sh.D > 1) sh.D = (sh.D + 1) / 2; else sh.Dv = (sh.Dv + 1) / 2;
    } else if (st.Lq == st.Lk && st.Lq > 1) {
      st.Lq = st.Lk = (st.Lq + 1) / 2;
    } else {
      std::int64_t Stretch::*other = protect == &Stretch::Lk ? &Stretch::Lq : &Stretch::Lk;
      if (st.*other <= 1 || (other == &Stretch::Lk && st.Lk <= kMinStretchKeys)) other = protect;
      st.*other = (st.*other + 1) / 2;
    }
  }
  sh.Lq = std::min(sh.Lq, st.Lq);
  sh.Lk = std::min(sh.Lk, st.Lk);
  return s;
}

/// Window sizes: the corners 0 and 1, small ones, and tile boundaries (a window edge on a tile edge), within Lk + 1.
std::int64_t window_side(Bits &b, std::int64_t Lk) {
  switch (b.uniform(0, 3)) {
    case 0: return b.uniform(0, 1);
    case 1: return b.uniform(0, std::max<std::int64_t>(Lk, 1));
    case 2: return std::min<std::int64_t>(b.pick(kTileBoundaries), Lk + 1);
    default: return b.uniform(0, 4);
  }
}

/// The settings of the features `bits` for spec `s` (its seed derives the rest, features_of).
FeatureSpec draw_features(Bits &b, const CaseSpec &s, std::uint32_t bits, const CaseOptions &opts) {
  FeatureSpec f;
  f.bits = bits;
  f.seed = b.next();
  const std::int64_t Lk = s.shape.Lk;
  if (bits & ATTNCHECK_FEATURE_WINDOW) {
    // One side unbounded, or both bounded; causal cases cap the right side themselves.
    switch (b.uniform(0, 2)) {
      case 0: f.window_left = window_side(b, Lk); break;
      case 1: f.window_right = window_side(b, Lk); break;
      default:
        f.window_left = window_side(b, Lk);
        f.window_right = window_side(b, Lk);
    }
  }
  if (bits & ATTNCHECK_FEATURE_SOFTCAP)  // c log-uniform in [kSoftcapMin, kSoftcapMax], a float32 value
    f.softcap = round_to(Dtype::f32, kSoftcapMin * std::pow(kSoftcapMax / kSoftcapMin, b.unit()));
  if (bits & ATTNCHECK_FEATURE_MASK) {
    f.mask_kind = b.chance(0.5) ? MaskKind::boolean : MaskKind::additive;
    f.mask_per_batch = b.chance(0.5);
    f.mask_per_head = b.chance(0.5);
    f.mask_keep = b.pick(kMaskKeep);
  }
  if (bits & ATTNCHECK_FEATURE_PAGED) f.page_size = b.pick(kPageSizes);
  if (bits & ATTNCHECK_FEATURE_DROPOUT) f.dropout_p = b.pick(kDropoutRates);
  if (bits & ATTNCHECK_FEATURE_FP8) f.fp8 = b.chance(0.5) ? Fp8::e4m3fn : Fp8::e5m2;
  // Drawn last: the draws above stay those of the seeds before it.
  if ((bits & ATTNCHECK_FEATURE_MASK) && f.mask_kind == MaskKind::boolean) f.mask_bytes = b.chance(kMaskBytesRate);
  if (bits & ATTNCHECK_FEATURE_MASK) {
    // Not where the contract leaves such rows unspecified: they would not be judged (nor the case's backward).
    f.mask_empty_rows = b.chance(kMaskEmptyRowsRate) && opts.empty_rows != false;
    if (b.chance(kMaskPrefixRate)) f.mask_prefix = b.pick(kFeatureTileBases) + b.uniform(-1, 1);
  }
  // From bits of its own, so that every draw above and after stays what it was before it existed.
  if (bits & kArgTensorFeatures) f.strided_args = Bits(rc::Random(f.seed ^ kStridedArgsSalt)).chance(kStridedArgsRate);
  return f;
}
}  // namespace

CaseSpec huge_stretch(Dtype dt) {
  CaseSpec s;
  s.dtype = dt;
  s.shape = Shape{.Hq = kHugeHeads, .Hkv = kHugeHeads, .Lk = 2, .D = kHugeHeadDim - 1, .Dv = 1};
  s.stretch = {.Lq = 1, .Lk = kHugeKeys};
  return s;  // layout bhld: no room lost to padding
}

std::int64_t largest_tensor(const Shape &s) {
  return std::max({s.B * s.Hq * s.Lq * s.D, s.B * s.Hkv * s.Lk * s.D, s.B * s.Hkv * s.Lk * s.Dv});
}

bool is_huge(const CaseSpec &s) {
  constexpr std::int64_t kOffsets32 = std::int64_t{1} << 31;  // elements whose offsets fit in an int32
  return largest_tensor(s.problem_shape()) > kOffsets32;
}

std::uint64_t tensor_bytes(const CaseSpec &s) {
  const Shape p = s.problem_shape();
  const auto n = static_cast<std::uint64_t>(p.B * p.Hq * p.Lq * (p.D + p.Dv) + p.B * p.Hkv * p.Lk * (p.D + p.Dv));
  const auto lse = static_cast<std::uint64_t>(p.B * p.Hq * p.Lq) * sizeof(float);
  return n * static_cast<std::uint64_t>(dtype_size(s.dtype)) + lse;
}

/// The ABI's own layouts of an LSE: Tensor::rows_with_layout gives transposed the strides of bhld.
constexpr std::array<Layout, 3> kLseLayouts{Layout::bhld, Layout::blhd, Layout::padded};

/// CaseSpec::layouts as gen.h's kOwnLayoutRate, kExpandedKvRate and kExpandedRate draw them.
void draw_layouts(Bits &b, CaseSpec &s, const CaseOptions &opts) {
  if (opts.layout || (s.features.bits & (ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED))) return;
  TensorLayouts &t = s.layouts;
  for (int x = 0; x < kOperandCount; ++x) {
    const auto o = static_cast<Operand>(x);
    if (o == Operand::dout && !opts.backward) continue;
    if (b.chance(kOwnLayoutRate)) t[o].layout = o == Operand::lse ? b.pick(kLseLayouts) : b.pick(kLayouts);
  }
  const Shape &sh = s.shape;
  // The broadcast dimension: one longer than 1 when the input has one (B, or its heads).
  auto dim = [&](std::int64_t heads) {
    if (sh.B > 1 && heads > 1) return b.chance(0.5) ? Broadcast::batch : Broadcast::heads;
    if (heads > 1) return Broadcast::heads;
    if (sh.B > 1) return Broadcast::batch;
    return b.chance(0.5) ? Broadcast::batch : Broadcast::heads;
  };
  if (b.chance(kExpandedKvRate)) {
    t[Operand::k].broadcast = t[Operand::v].broadcast = dim(sh.Hkv);
  } else {
    for (Operand o : {Operand::k, Operand::v})
      if (b.chance(kExpandedRate)) t[o].broadcast = dim(sh.Hkv);
  }
  if (b.chance(kExpandedRate)) t[Operand::q].broadcast = dim(sh.Hq);
  if (opts.backward && b.chance(kExpandedRate)) t[Operand::dout].broadcast = dim(sh.Hq);
}

namespace {
/// A length past whole 128-key tiles (0 … kFeatureTileMultiples − 1 of them) by one of kFeatureTileBases — a multiple
/// of 16, of 32, of 64 (half a tile: ≡ 64 mod 128) or of 128 — and one off it a third of the time.
std::int64_t feature_tile_length(Bits &b) {
  const std::int64_t n = kFeatureTileBases.back() * b.uniform(0, kFeatureTileMultiples - 1) + b.pick(kFeatureTileBases);
  return b.chance(2.0 / 3) ? n : n + (b.chance(0.5) ? 1 : -1);
}

/// The split regime's corner of a case (gen.h kSplitCornerRate): its rows' visible keys start at or after `at` keys
/// (0: not drawn), by a window of left side `left` (window_left; the rows past at + left) or a mask's hidden prefix.
struct SplitCorner {
  std::int64_t at = 0, left = 0;
  std::uint32_t bits = 0;  ///< the features it adds: a window (or the mask it needs), and the declared sinks
};

/// Feature cases' own regimes (gen.h): the decode regime of caches (paged, varlen: a few query rows against a long
/// cache), tile-boundary lengths, and split corners, each within max_work with its length kept. Returns the split
/// corner drawn, if any (its settings are placed once the features are drawn, place_split).
SplitCorner draw_feature_shape(Bits &b, CaseSpec &s, const CaseOptions &opts) {
  Shape &sh = s.shape;
  const std::uint32_t may = opts.features | opts.combinable;
  SplitCorner split;
  if ((opts.features & (ATTNCHECK_FEATURE_PAGED | ATTNCHECK_FEATURE_VARLEN)) && b.chance(kDecodeRate)) {
    sh.Lq = b.uniform(1, kMaxDecodeRows);
    const std::int64_t room = opts.max_work / std::max<std::int64_t>(sh.B * sh.Hq * sh.Lq * (sh.D + sh.Dv), 1);
    const double u = b.unit();
    sh.Lk = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::exp2(u * std::log2(kMaxDecodeKeys))), 1,
                                     std::max<std::int64_t>(room, 1));
    opts.tie(sh);
    return split;
  }
  const double regime = b.unit();
  const bool can_split = (may & ATTNCHECK_FEATURE_WINDOW) || (opts.features & ATTNCHECK_FEATURE_MASK);
  if (regime < kFeatureBoundaryRate) {
    sh.Lk = feature_tile_length(b);
    switch (b.uniform(0, 2)) {
      case 0: sh.Lq = sh.Lk; break;
      case 1: sh.Lq = feature_tile_length(b); break;
      default: break;
    }
  } else if (can_split && regime < kFeatureBoundaryRate + kSplitCornerRate) {
    split.at = b.pick(kFeatureTileBases);
    split.left = b.uniform(0, kSplitMaxWindow);
    split.bits = ((may & ATTNCHECK_FEATURE_WINDOW) ? ATTNCHECK_FEATURE_WINDOW : 0) | (may & ATTNCHECK_FEATURE_SINKS);
    // Rows past at + left keys: the last row's window starts at Lk − 1 − left ≥ at (a second split empty past 2·at).
    sh.Lk = split.at + split.left + 1 + b.uniform(0, split.at);
    if (b.chance(0.5)) {
      sh.Lq = 1;
      if (b.chance(0.5)) {
        sh.B = 1;
        sh.Hkv = kSplitDecodeKvHeads;
        sh.Hq = sh.Hkv * b.pick(kSplitDecodeGroups);
      }
    } else {
      sh.Lq = b.chance(0.5) ? sh.Lk : b.uniform(1, kMaxDecodeRows);
    }
  } else {
    return split;
  }
  opts.tie(sh);
  fit_work(s, opts, &Shape::Lk, opts.max_work);
  return split;
}

/// The split corner's settings on features drawn: the window's left side (the right one unbounded or drawn), or the
/// mask's hidden prefix of `at` keys when no window is declared.
void place_split(Bits &b, FeatureSpec &f, const SplitCorner &split) {
  if (f.bits & ATTNCHECK_FEATURE_WINDOW) {
    f.window_left = split.left;
    if (f.window_right >= 0 && b.chance(0.5)) f.window_right = -1;
  } else {
    f.mask_prefix = split.at;
  }
}
}  // namespace

CaseSpec draw_spec(const rc::Random &random, int size, const CaseOptions &opts) {
  Bits b(random);
  if (opts.stretch) return draw_stretched(b, size, opts);
  CaseSpec s;
  s.dtype = opts.dtype;
  Shape &sh = s.shape;
  const std::int64_t len_max = size_scaled(size, kSmallMaxLength), dim_max = size_scaled(size, kSmallMaxHeadDim);
  if (opts.few_heads) {
    draw_few_heads(b, sh);
  } else {
    draw_heads(b, sh);
  }
  sh.Lq = b.uniform(1, len_max);
  sh.Lk = b.uniform(1, len_max);
  sh.D = b.uniform(1, dim_max);
  sh.Dv = b.chance(kDvEqualsDRate) ? sh.D : b.uniform(1, dim_max);

  std::int64_t Shape::*protect = nullptr;
  std::int64_t max_work = opts.max_work;
  bool reach = false;
  const double regime = b.unit();
  if (regime < kLongRowRate) {
    sh.B = sh.Hkv = 1;
    sh.Hq = b.uniform(1, kLongRowMaxHeads);
    sh.Lk = kLongRowMin + b.uniform(0, kLongRowSpan - 1);
    sh.Lq = b.uniform(1, kLongRowMaxLq);
    protect = &Shape::Lk;
  } else if (regime < kLongRowRate + kBoundaryRate) {
    enum Axis { kLq, kLk, kBothL, kD, kDv, kProductionD, kAxes };
    switch (b.uniform(0, kAxes - 1)) {
      case kLq: sh.Lq = b.pick(kTileBoundaries), protect = &Shape::Lq; break;
      case kLk: sh.Lk = b.pick(kTileBoundaries), protect = &Shape::Lk; break;
      case kBothL: sh.Lq = sh.Lk = b.pick(kTileBoundaries), protect = &Shape::Lk; break;
      case kD: {
        const std::int64_t n = b.uniform(0, kTileBoundaries.size() + kOddHeadDims.size() - 1);
        sh.D = n < static_cast<std::int64_t>(kTileBoundaries.size())
                   ? kTileBoundaries[static_cast<std::size_t>(n)]
                   : kOddHeadDims[static_cast<std::size_t>(n) - kTileBoundaries.size()];
        if (b.chance(kDvEqualsDRate)) sh.Dv = sh.D;
        protect = &Shape::D;
        break;
      }
      case kDv: sh.Dv = b.pick(kTileBoundaries), protect = &Shape::Dv; break;
      default:
        sh.D = b.pick(kProductionHeadDims);
        sh.Dv = b.chance(kDvEqualsDRate) ? sh.D : b.pick(kProductionHeadDims);
        protect = &Shape::D;
    }
  } else if (opts.reach && regime < kLongRowRate + kBoundaryRate + kReachRate) {
    sh.B = sh.Hkv = 1;
    sh.Hq = b.uniform(1, kLongRowMaxHeads);
    sh.D = b.chance(kReachOddRate) ? b.uniform(kReachMinOddDim / 2, kProductionHeadDims.back() / 2 - 1) * 2 + 1
                                   : b.pick(kProductionHeadDims);
    sh.Dv = b.chance(kDvEqualsDRate) ? sh.D : b.pick(kProductionHeadDims);
    // The head dims stay; the keys and then the query rows fit the cap (D = Dv = 256 keeps 512 keys for one row).
    max_work = std::min(opts.max_work, CaseOptions::kReachMaxWork);
    const std::int64_t per_key = sh.Hq * (sh.D + sh.Dv);
    sh.Lk = std::min(log_uniform_length(b, kReachMinKeys, kReachMaxKeys), std::max(kReachMinKeys, max_work / per_key));
    sh.Lq = std::min(b.uniform(1, kReachMaxQueries), std::max<std::int64_t>(1, max_work / (per_key * sh.Lk)));
    protect = &Shape::D;
    reach = true;
  }
  s.mask = opts.mask.value_or(b.chance(kCausalRate) ? opts.causal : Mask::none);
  if (opts.shape_pool && !opts.shape_pool->empty()) {
    // The pool's dimensions: one that meets the constraints as it is when there is one (no new shape to compile),
    // else any, adjusted below. Stratified by size: RapidCheck spreads a run's sizes evenly over 0 … kPercent, so
    // its cases cover the pool before a shape repeats (a pass needs several distinct shapes, kMinPassShapes).
    std::vector<Shape> fit;
    for (const Shape &p : *opts.shape_pool) {
      CaseSpec t = s;
      t.shape = p;
      if (opts.admits_shape(t) && opts.tied(p)) fit.push_back(p);
    }
    const std::vector<Shape> &from = fit.empty() ? *opts.shape_pool : fit;
    sh = from[pool_slot(size, from.size())];
    protect = nullptr;
    max_work = opts.max_work;
    reach = false;
  }
  s.layout = opts.layout.value_or(b.pick(kLayouts));
  // A reach case draws every family but extremes (the last): float16 extremes in rows of thousands of keys leave the
  // error model without a bound or the screen without a decision, and MPFR then judges the whole large case (the
  // small, boundary and long-row regimes draw extremes).
  s.family = opts.family.value_or(static_cast<Family>(b.uniform(0, kFamilyCount - (reach ? 2 : 1))));
  fit_work(s, opts, protect, max_work);
  // Feature cases' own regimes (gen.h) in place of the small one, on the shape before admission: what they draw is
  // then admitted like any shape.
  SplitCorner split;
  if (opts.features && !opts.shape_pool && !protect && !reach) split = draw_feature_shape(b, s, opts);
  // Rows that see no key exactly when asked (CaseOptions::empty_rows): Lq > Lk makes them under bottom-right causal.
  // On the shape alone: the features come next.
  if (!opts.admits_shape(s)) {
    std::swap(sh.Lq, sh.Lk);
    if (sh.Lq == sh.Lk) ++sh.Lq;
    opts.tie(sh);
  }
  if (sh.Lk < opts.least_keys()) {
    sh.Lk = opts.least_keys();
    opts.tie(sh);
  }
  if (opts.features || opts.declared_features) {
    std::uint32_t bits = opts.features;
    const double rate = opts.features ? kExtraFeatureRate : kIndependenceFeatureRate;
    for (std::uint32_t f : kAllFeatures)
      if ((opts.combinable & f) && b.chance(rate)) bits |= f;
    if (split.at > 0) bits |= split.bits;
    if (bits) {  // an independence property's case may draw none: it stays a plain case
      s.features = draw_features(b, s, bits, opts);
      s.features.top_left = opts.causal == Mask::causal_top_left;
      if (split.at > 0) place_split(b, s.features, split);
    }
  }
  draw_layouts(b, s, opts);
  return s;
}

double draw_value(rc::Random &random, Family family, Dtype dt) {
  Bits b(random.split());
  const double sigma = std::sqrt(std::pow(10.0, kLargeMinLog10 + (kLargeMaxLog10 - kLargeMinLog10) * b.unit()));
  return round_to(dt, entry(b, family, sigma));
}

Case draw_case(const rc::Random &random, const CaseSpec &spec, const CaseOptions &opts) {
  Bits b(random);
  Case c;
  c.spec = spec;
  c.resize_values(opts.backward);
  const Shape &s = spec.shape;
  const Dtype dt = spec.dtype;
  const Family fv = value_family_of_v(spec.family);

  // Family::large: N(0, σ²) entries give |scale·q·k| ≈ σ²·scale·√D = σ² at the default scale.
  double sigma = 1;
  if (spec.family == Family::large) {
    const double target = std::pow(10.0, kLargeMinLog10 + (kLargeMaxLog10 - kLargeMinLog10) * b.unit());
    sigma = std::min(std::sqrt(target / (default_scale(s.D) * std::sqrt(static_cast<double>(s.D)))),
                     max_finite(dt) / 8);
  }
  ValueBits vb(SplitMix64(b.next()));  // every entry's draws
  auto fill = [&](std::vector<double> &t, Family f) {
    for (double &x : t) x = round_to(dt, entry(vb, f, sigma));
  };
  fill(c.q, spec.family);
  fill(c.k, spec.family);
  if (opts.draw_v) fill(c.v, fv);
  fill(c.dout, fv);
  if (spec.features.bits & ATTNCHECK_FEATURE_FP8) {
    // Values of the format, some at its largest magnitude (the corner a descale must keep in range).
    const Fp8 f = spec.features.fp8;
    for (std::vector<double> *t : {&c.q, &c.k, &c.v})
      for (double &x : *t) x = vb.chance(kFp8MaxRate) ? (vb.chance(0.5) ? -1 : 1) * fp8_max(f) : fp8_value(f, x);
  }

  auto kidx = [&](std::int64_t bb, std::int64_t h, std::int64_t j, std::int64_t d) {
    return static_cast<std::size_t>(((bb * s.Hkv + h) * s.Lk + j) * s.D + d);
  };
  if (spec.family == Family::near_ties) {
    // Every key of a (batch, kv head) is the first key moved by at most one ulp per entry: logits tie to ulps.
    for (std::int64_t bb = 0; bb < s.B; ++bb)
      for (std::int64_t h = 0; h < s.Hkv; ++h)
        for (std::int64_t j = 1; j < s.Lk; ++j)
          for (std::int64_t d = 0; d < s.D; ++d) {
            const double base = c.k[kidx(bb, h, 0, d)];
            const double u = vb.unit();
            const double nudge = u < kTieNudgeRate ? -1 : (u < 2 * kTieNudgeRate ? 1 : 0);
            c.k[kidx(bb, h, j, d)] = round_to(dt, base + nudge * ulp_in(dt, base));
          }
  }
  if (spec.family == Family::dominant_key) {
    // Key j* of each (batch, kv head) points along the sum of its queries: one logit per row dominates.
    for (std::int64_t bb = 0; bb < s.B; ++bb)
      for (std::int64_t h = 0; h < s.Hkv; ++h) {
        const std::int64_t jstar = b.uniform(0, s.Lk - 1);
        const std::int64_t n = s.Lq * s.group();
        for (std::int64_t d = 0; d < s.D; ++d) {
          double acc = 0;
          for (std::int64_t hq = h * s.group(); hq < (h + 1) * s.group(); ++hq)
            for (std::int64_t i = 0; i < s.Lq; ++i)
              acc += c.q[static_cast<std::size_t>(((bb * s.Hq + hq) * s.Lq + i) * s.D + d)];
          c.k[kidx(bb, h, jstar, d)] = round_to(dt, kDominance * acc / std::sqrt(static_cast<double>(n)));
        }
      }
  }
  c.broadcast_values();  // an expanded input holds one slice's values
  return c;
}

}  // namespace attncheck
