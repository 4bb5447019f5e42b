#include "attncheck/coverage.h"

#include "attncheck/gen.h"
#include "attncheck/results.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace attncheck {
namespace {

using Is = bool (*)(const CaseSpec &s, const Shape &p);

/// A corner and the test of a case against it (on the spec and the problem's shape p).
struct Row {
  Corner corner;
  Is is;
};

bool pow2(std::int64_t x) { return x > 0 && (x & (x - 1)) == 0; }
std::int64_t group(const Shape &p) { return p.Hkv > 0 ? p.Hq / p.Hkv : 0; }
bool at_tile(std::int64_t n) { return std::find(kTileBoundaries.begin(), kTileBoundaries.end(), n) != kTileBoundaries.end(); }
/// Keys beyond which a row spans several tiles of 64, and a long row (gen.h's long-row regime) and a very long one.
constexpr std::int64_t kMultiTileKeys = 129, kLongKeys = kLongRowMin, kVeryLongKeys = 16384;
/// A decode call: at most kDecodeRows query rows against at least kDecodeKeys keys (a KV cache past a tile).
constexpr std::int64_t kDecodeRows = 16, kDecodeKeys = 64;
/// Query rows of a prefill block that spans several tiles.
constexpr std::int64_t kManyQueries = 128;
template <std::int64_t G>
bool group_is(const CaseSpec &, const Shape &p) { return group(p) == G; }
template <std::int64_t D>
bool head_dim_is(const CaseSpec &, const Shape &p) { return p.D == D; }
template <Operand O, Layout L>
bool layout_is(const CaseSpec &s, const Shape &) { return s.layout_of(O) == L; }
/// Stride 0 on a dimension longer than 1 (on one of length 1 a zero stride changes nothing).
template <Operand O, Broadcast Bc>
bool broadcast_is(const CaseSpec &s, const Shape &p) {
  if (s.broadcast_of(O) != Bc) return false;
  const std::int64_t heads = O == Operand::k || O == Operand::v ? p.Hkv : p.Hq;
  return (Bc == Broadcast::batch ? p.B : heads) > 1;
}
template <Family F>
bool family_is(const CaseSpec &s, const Shape &) { return s.family == F; }
bool any(const CaseSpec &, const Shape &) { return true; }
/// Lk a multiple of 16 or one off it, from 15 on: the tiles a kernel pads or splits.
bool lk_at_tile(const Shape &p) { return p.Lk >= 15 && (p.Lk % 16 <= 1 || p.Lk % 16 == 15); }
/// A split-KV kernel's first split: the keys before it.
constexpr std::int64_t kFirstSplitKeys = 64;
/// A row that sees a key past the first kFirstSplitKeys and none of them: a split-KV kernel's empty first split.
bool empty_first_split(const CaseSpec &s, const Shape &p) {
  if (p.Lk <= kFirstSplitKeys || p.Lq == 0) return false;
  const Features f = features_of(s);
  const std::int64_t heads = f.mask.empty() ? 1 : p.Hq;  // without a mask tensor every head sees the same keys
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < p.Lq; ++i) {
        const RowFrame fr = row_frame(f, s.mask, b, i, p.Lq, p.Lk);
        const KeyRange r = key_range(f, s.mask, fr);
        if (r.empty() || r.hi < kFirstSplitKeys) continue;
        // The keys the row may see, those of the first split and those past it.
        auto seen = [&](std::int64_t from, std::int64_t to) {
          for (std::int64_t j = std::max(from, r.lo); j <= std::min(to, r.hi); ++j)
            if (sees(f, s.mask, fr, p.Lq, p.Lk, b, h, i, j)) return true;
          return false;
        };
        if (!seen(0, kFirstSplitKeys - 1) && seen(kFirstSplitKeys, r.hi)) return true;
      }
  return false;
}
bool strided_args(const CaseSpec &s, const Shape &) { return s.features.strided_args; }

using F = CornerNeeds;
/// A corner of feature cases: any feature (the contract declares one).
constexpr std::uint32_t kAnyFeature = ~std::uint32_t{0};
constexpr std::uint32_t kWin = ATTNCHECK_FEATURE_WINDOW, kMask = ATTNCHECK_FEATURE_MASK,
                        kVarlen = ATTNCHECK_FEATURE_VARLEN, kPaged = ATTNCHECK_FEATURE_PAGED,
                        kDropout = ATTNCHECK_FEATURE_DROPOUT, kFp8 = ATTNCHECK_FEATURE_FP8;

#define ATTNCHECK_LAYOUTS(o, name)                                                               \
  Row{{name "-blhd", "layout", name " in blhd ([B, L, H, X] in memory)"}, &layout_is<o, Layout::blhd>}, \
      Row{{name "-transposed", "layout", name " transposed (L fastest)"}, &layout_is<o, Layout::transposed>}, \
      Row{{name "-padded", "layout", name " with padded rows and heads"}, &layout_is<o, Layout::padded>}
#define ATTNCHECK_EXPANDED(o, name, needs)                                                                   \
  Row{{name "-expand-batch", "layout", name " with stride 0 on B", 0, needs}, &broadcast_is<o, Broadcast::batch>}, \
      Row{{name "-expand-heads", "layout", name " with stride 0 on H", 0, needs}, &broadcast_is<o, Broadcast::heads>}

// clang-format off
const std::array<Row, kCornerCount> kRows{{
    {{"b1", "B", "B = 1"}, [](const CaseSpec &, const Shape &p) { return p.B == 1; }},
    {{"b2", "B", "B = 2"}, [](const CaseSpec &, const Shape &p) { return p.B == 2; }},
    {{"b3-8", "B", "B in 3…8"}, [](const CaseSpec &, const Shape &p) { return p.B >= 3 && p.B <= 8; }},
    {{"b9+", "B", "B > 8"}, [](const CaseSpec &, const Shape &p) { return p.B > 8; }},

    {{"g1", "Hq/Hkv", "Hq/Hkv = 1 (MHA)"}, &group_is<1>},
    {{"g2", "Hq/Hkv", "Hq/Hkv = 2"}, &group_is<2>},
    {{"g3", "Hq/Hkv", "Hq/Hkv = 3"}, &group_is<3>},
    {{"g4", "Hq/Hkv", "Hq/Hkv = 4"}, &group_is<4>},
    {{"g5-8", "Hq/Hkv", "Hq/Hkv in 5…8"}, [](const CaseSpec &, const Shape &p) { return group(p) >= 5 && group(p) <= 8; }},
    {{"g16", "Hq/Hkv", "Hq/Hkv = 16"}, &group_is<16>},
    {{"g32", "Hq/Hkv", "Hq/Hkv = 32"}, &group_is<32>},
    {{"g64", "Hq/Hkv", "Hq/Hkv = 64"}, &group_is<64>},
    {{"mqa", "Hq/Hkv", "MQA: Hkv = 1, Hq ≥ 32"}, [](const CaseSpec &, const Shape &p) { return p.Hkv == 1 && p.Hq >= 32; }},
    {{"g-npot5+", "Hq/Hkv", "Hq/Hkv ≥ 5, not a power of two"},
     [](const CaseSpec &, const Shape &p) { return group(p) >= 5 && !pow2(group(p)); }},
    {{"gqa-kv2+", "Hq/Hkv", "GQA with several kv heads: Hkv ≥ 2, Hq/Hkv ≥ 2"},
     [](const CaseSpec &, const Shape &p) { return p.Hkv >= 2 && group(p) >= 2; }},

    {{"lq0", "Lq, Lk", "Lq = 0 (nothing to write)"}, [](const CaseSpec &, const Shape &p) { return p.Lq == 0; }},
    {{"lk0", "Lq, Lk", "Lk = 0 (an empty KV cache)"}, [](const CaseSpec &, const Shape &p) { return p.Lk == 0; }},
    {{"lq1", "Lq, Lk", "Lq = 1"}, [](const CaseSpec &, const Shape &p) { return p.Lq == 1; }},
    {{"lk1", "Lq, Lk", "Lk = 1"}, [](const CaseSpec &, const Shape &p) { return p.Lk == 1; }},
    {{"lk-short", "Lq, Lk", "Lk in 2…15 (under a tile)"}, [](const CaseSpec &, const Shape &p) { return p.Lk >= 2 && p.Lk < 16; }},
    {{"lq-tile", "Lq, Lk", "Lq at a tile boundary (16…256, ±1)"}, [](const CaseSpec &, const Shape &p) { return at_tile(p.Lq); }},
    {{"lk-tile", "Lq, Lk", "Lk at a tile boundary (16…256, ±1)"}, [](const CaseSpec &, const Shape &p) { return at_tile(p.Lk); }},
    {{"lk-multi", "Lq, Lk", "Lk in 129…1023 (several tiles)"},
     [](const CaseSpec &, const Shape &p) { return p.Lk >= kMultiTileKeys && p.Lk < kLongKeys; }},
    {{"lk-long", "Lq, Lk", "Lk in 1024…16383"}, [](const CaseSpec &, const Shape &p) { return p.Lk >= kLongKeys && p.Lk < kVeryLongKeys; }},
    {{"lk-16k", "Lq, Lk", "Lk ≥ 16384"}, [](const CaseSpec &, const Shape &p) { return p.Lk >= kVeryLongKeys; }},
    {{"lq-many", "Lq, Lk", "Lq ≥ 128 (a prefill block of several tiles)"}, [](const CaseSpec &, const Shape &p) { return p.Lq >= kManyQueries; }},
    {{"lq-gt-lk", "Lq, Lk", "Lq > Lk > 0"}, [](const CaseSpec &, const Shape &p) { return p.Lk > 0 && p.Lq > p.Lk; }},
    {{"lq-lt-lk", "Lq, Lk", "0 < Lq < Lk"}, [](const CaseSpec &, const Shape &p) { return p.Lq > 0 && p.Lq < p.Lk; }},
    {{"decode-1", "Lq, Lk", "decode: Lq = 1, Lk ≥ 64"}, [](const CaseSpec &, const Shape &p) { return p.Lq == 1 && p.Lk >= kDecodeKeys; }},
    {{"decode-multi", "Lq, Lk", "multi-token decode: Lq in 2…16, Lk ≥ 64"},
     [](const CaseSpec &, const Shape &p) { return p.Lq >= 2 && p.Lq <= kDecodeRows && p.Lk >= kDecodeKeys; }},
    {{"stretched", "Lq, Lk", "a long problem of few live keys (stretch.h)"},
     [](const CaseSpec &s, const Shape &) { return s.stretch.active(); }},

    {{"d-small", "D, Dv", "D ≤ 16"}, [](const CaseSpec &, const Shape &p) { return p.D <= kSmallMaxHeadDim; }},
    {{"d64", "D, Dv", "D = 64"}, &head_dim_is<64>},
    {{"d80", "D, Dv", "D = 80"}, &head_dim_is<80>},
    {{"d96", "D, Dv", "D = 96"}, &head_dim_is<96>},
    {{"d128", "D, Dv", "D = 128"}, &head_dim_is<128>},
    {{"d192", "D, Dv", "D = 192"}, &head_dim_is<192>},
    {{"d256", "D, Dv", "D = 256"}, &head_dim_is<256>},
    {{"d-odd", "D, Dv", "D odd, > 16"}, [](const CaseSpec &, const Shape &p) { return p.D > kSmallMaxHeadDim && p.D % 2 == 1; }},
    {{"dv-prod", "D, Dv", "Dv a production head dim (64…256)"}, [](const CaseSpec &, const Shape &p) {
       return is_production_head_dim(p.Dv);
     }},
    {{"d-ne-dv", "D, Dv", "D ≠ Dv"}, [](const CaseSpec &, const Shape &p) { return p.D != p.Dv; }},

    ATTNCHECK_LAYOUTS(Operand::q, "q"),
    ATTNCHECK_LAYOUTS(Operand::k, "k"),
    ATTNCHECK_LAYOUTS(Operand::v, "v"),
    ATTNCHECK_LAYOUTS(Operand::out, "out"),
    {{"lse-blhd", "layout", "lse as [B, L, H]", 0, F::lse}, &layout_is<Operand::lse, Layout::blhd>},
    {{"lse-padded", "layout", "lse with padded rows and heads", 0, F::lse}, &layout_is<Operand::lse, Layout::padded>},
    {{"dout-blhd", "layout", "dO in blhd", 0, F::backward}, &layout_is<Operand::dout, Layout::blhd>},
    {{"dout-transposed", "layout", "dO transposed", 0, F::backward}, &layout_is<Operand::dout, Layout::transposed>},
    {{"dout-padded", "layout", "dO with padded rows and heads", 0, F::backward}, &layout_is<Operand::dout, Layout::padded>},
    ATTNCHECK_EXPANDED(Operand::q, "q", F::nothing),
    ATTNCHECK_EXPANDED(Operand::k, "k", F::nothing),
    ATTNCHECK_EXPANDED(Operand::v, "v", F::nothing),
    ATTNCHECK_EXPANDED(Operand::dout, "dout", F::backward),

    {{"mask-none", "mask", "no mask"}, [](const CaseSpec &s, const Shape &) { return s.mask == Mask::none; }},
    {{"causal", "mask", "causal (the declared alignment)"}, [](const CaseSpec &s, const Shape &) { return s.mask != Mask::none; }},
    {{"causal-rect", "mask", "causal with Lq ≠ Lk (where alignment matters)"},
     [](const CaseSpec &s, const Shape &p) { return s.mask != Mask::none && p.Lq != p.Lk && p.Lq > 0 && p.Lk > 0; }},
    {{"empty-rows", "mask", "rows that see no key (bottom-right causal, Lq > Lk)", 0, F::empty_rows},
     [](const CaseSpec &s, const Shape &p) { return s.mask == Mask::causal && p.Lk > 0 && p.Lq > p.Lk; }},

    {{"small_ints", "values", "small integers (exact, ties)"}, &family_is<Family::small_ints>},
    {{"uniform", "values", "U(−1, 1)"}, &family_is<Family::uniform>},
    {{"normal", "values", "N(0, 1)"}, &family_is<Family::normal>},
    {{"large", "values", "logits to 10⁴ (past exp's overflow)"}, &family_is<Family::large>},
    {{"near_ties", "values", "logits a few ulps apart"}, &family_is<Family::near_ties>},
    {{"dominant_key", "values", "one dominant key (P nearly one-hot)"}, &family_is<Family::dominant_key>},
    {{"outliers", "values", "outlier entries (×10²…10³)"}, &family_is<Family::outliers>},
    {{"extremes", "values", "float16 extremes and subnormals"}, &family_is<Family::extremes>},

    {{"win-left", "features", "window bounded on the left only", kWin},
     [](const CaseSpec &s, const Shape &) { return s.features.window_left >= 0 && s.features.window_right < 0; }},
    {{"win-right", "features", "window bounded on the right only", kWin},
     [](const CaseSpec &s, const Shape &) { return s.features.window_left < 0 && s.features.window_right >= 0; }},
    {{"win-both", "features", "window bounded on both sides", kWin},
     [](const CaseSpec &s, const Shape &) { return s.features.window_left >= 0 && s.features.window_right >= 0; }},
    {{"win-zero", "features", "a window side of 0", kWin},
     [](const CaseSpec &s, const Shape &) { return s.features.window_left == 0 || s.features.window_right == 0; }},
    {{"softcapped", "features", "softcap", ATTNCHECK_FEATURE_SOFTCAP}, &any},
    {{"alibi", "features", "ALiBi slopes", ATTNCHECK_FEATURE_ALIBI}, &any},
    {{"sinks", "features", "attention sinks", ATTNCHECK_FEATURE_SINKS}, &any},
    {{"mask-bool", "features", "a boolean mask", kMask},
     [](const CaseSpec &s, const Shape &) { return s.features.mask_kind == MaskKind::boolean; }},
    {{"mask-bytes", "features", "a boolean mask with visible bytes other than 1", kMask},
     [](const CaseSpec &s, const Shape &) { return s.features.mask_kind == MaskKind::boolean && s.features.mask_bytes; }},
    {{"mask-additive", "features", "an additive float32 mask", kMask},
     [](const CaseSpec &s, const Shape &) { return s.features.mask_kind == MaskKind::additive; }},
    {{"mask-shared", "features", "a mask shared across batch entries or heads ([1, …] dimensions)", kMask},
     [](const CaseSpec &s, const Shape &p) {
       return (!s.features.mask_per_batch && p.B > 1) || (!s.features.mask_per_head && p.Hq > 1);
     }},
    {{"mask-full", "features", "a mask per batch entry and head, B·Hq > 1", kMask},
     [](const CaseSpec &s, const Shape &p) { return s.features.mask_per_batch && s.features.mask_per_head && p.B * p.Hq > 1; }},
    {{"varlen", "features", "a packed variable-length batch", kVarlen}, &any},
    {{"varlen-batch", "features", "varlen with B ≥ 3 (lengths 0, 1, the longest and between)", kVarlen},
     [](const CaseSpec &, const Shape &p) { return p.B >= 3; }},
    {{"paged-page1", "features", "a paged cache of 1-key pages", kPaged},
     [](const CaseSpec &s, const Shape &) { return s.features.page_size == 1; }},
    {{"paged-pages", "features", "a paged cache, rows across pages of ≥ 2 keys", kPaged},
     [](const CaseSpec &s, const Shape &p) { return s.features.page_size > 1 && p.Lk > s.features.page_size; }},
    {{"alibi-strided", "features", "ALiBi slopes strided and offset", ATTNCHECK_FEATURE_ALIBI}, &strided_args},
    {{"sinks-strided", "features", "sinks strided and offset", ATTNCHECK_FEATURE_SINKS}, &strided_args},
    {{"mask-strided", "features", "a mask strided and offset", kMask}, &strided_args},
    {{"varlen-strided", "features", "cu_seqlens strided and offset", kVarlen}, &strided_args},
    {{"paged-strided", "features", "a block table and seqused_k strided and offset", kPaged}, &strided_args},
    {{"dropout", "features", "dropout", kDropout}, &any},
    {{"dropout-backward", "features", "dropout in the backward", kDropout, F::backward}, &any},
    {{"fp8-e4m3fn", "features", "FP8 e4m3fn inputs", kFp8},
     [](const CaseSpec &s, const Shape &) { return s.features.fp8 == Fp8::e4m3fn; }},
    {{"fp8-e5m2", "features", "FP8 e5m2 inputs", kFp8},
     [](const CaseSpec &s, const Shape &) { return s.features.fp8 == Fp8::e5m2; }},
    {{"combined", "features", "two features in one case (a window with softcap, sinks, ALiBi, …)", 0, F::two_features},
     [](const CaseSpec &s, const Shape &) { return std::popcount(s.features.bits) >= 2; }},
    // Feature cases as wide as plain ones (gen.h's feature regimes): shapes, tiles and splits under a feature.
    {{"feat-square", "features", "a feature case with Lq = Lk", kAnyFeature},
     [](const CaseSpec &, const Shape &p) { return p.Lq == p.Lk && p.Lq > 0; }},
    {{"feat-lk-long", "features", "a feature case with Lk ≥ 1024", kAnyFeature},
     [](const CaseSpec &, const Shape &p) { return p.Lk >= kLongKeys; }},
    {{"feat-lk-tile", "features", "a feature case with Lk a multiple of 16 or one off it (≥ 15)", kAnyFeature},
     [](const CaseSpec &, const Shape &p) { return lk_at_tile(p); }},
    {{"feat-lk-tile-bwd", "features", "a feature case with Lk at a tile (as feat-lk-tile) in the backward", kAnyFeature,
      F::backward}, [](const CaseSpec &, const Shape &p) { return lk_at_tile(p); }},
    {{"mask-half-tile-bwd", "features", "a mask with Lk ≡ 64 (mod 128) in the backward (a half-padded last tile)", kMask,
      F::backward}, [](const CaseSpec &, const Shape &p) { return p.Lk % 128 == 64; }},
    {{"split-empty-sinks", "features", "sinks with a row whose first 64 keys are hidden but a later one is not",
      ATTNCHECK_FEATURE_SINKS}, &empty_first_split},
    {{"decode-gqa-splits", "features", "a feature case decoding (Lq = 1) with Hq/Hkv ≥ 2, Hkv ≥ 2 and Lk ≥ 128",
      kAnyFeature}, [](const CaseSpec &, const Shape &p) {
       return p.Lq == 1 && p.Hkv >= 2 && group(p) >= 2 && p.Lk >= 2 * kFirstSplitKeys;
     }},
    {{"feat-independence", "features", "a declared feature in an independence property's case (batch invariance, "
      "determinism, call history, padding)", kCombinableFeatures, F::declared_features}, &any},
}};
// clang-format on
#undef ATTNCHECK_LAYOUTS
#undef ATTNCHECK_EXPANDED

const std::array<Corner, kCornerCount> kCorners = [] {
  std::array<Corner, kCornerCount> c{};
  for (std::size_t i = 0; i < kCornerCount; ++i) c[i] = kRows[i].corner;
  return c;
}();

/// Whether a run under `contract` can reach corner `c` at all (its feature aside).
bool reachable(const Corner &c, const KernelContract &contract, bool ran_backward) {
  switch (c.needs) {
    case CornerNeeds::nothing: return true;
    case CornerNeeds::backward: return ran_backward;
    case CornerNeeds::lse: return contract.lse != LseOutput::none;
    case CornerNeeds::empty_rows: return contract.empty_rows == EmptyRows::zero;
    case CornerNeeds::declared_features: return (contract.features & kCombinableFeatures) != 0;
    case CornerNeeds::two_features:
      return std::popcount(contract.features) >= 2 && (contract.features & kCombinableFeatures) != 0;
  }
  return true;
}

}  // namespace

std::span<const Corner> corners() { return kCorners; }

std::optional<std::size_t> corner_index(std::string_view id) {
  for (std::size_t i = 0; i < kCornerCount; ++i)
    if (kCorners[i].id == id) return i;
  return std::nullopt;
}

CornerSet corners_named(std::span<const std::string_view> ids) {
  CornerSet set;
  for (const std::string_view id : ids) {
    const std::optional<std::size_t> i = corner_index(id);
    if (!i) throw std::invalid_argument("no corner of the coverage model is named " + std::string(id));
    set[*i] = true;
  }
  return set;
}

CornerSet corners_of(const CaseSpec &s, CornerContext ctx) {
  const Shape p = s.problem_shape();
  CornerSet set;
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    const Row &r = kRows[i];
    if (r.corner.feature != 0 && (s.features.bits & r.corner.feature) == 0) continue;
    if (r.corner.needs == CornerNeeds::backward && !ctx.backward) continue;
    if (r.corner.needs == CornerNeeds::lse && !ctx.lse) continue;
    if (r.corner.needs == CornerNeeds::declared_features && !ctx.declared_features) continue;
    set[i] = r.is(s, p);
  }
  return set;
}

void Coverage::add(const CornerSet &c, bool was_decided, CornerContext ctx) {
  backward += ctx.backward ? 1 : 0;
  auto &counts = was_decided ? decided : declined;
  for (std::size_t i = 0; i < kCornerCount; ++i) counts[i] += c[i] ? 1 : 0;
}

Coverage &Coverage::operator+=(const Coverage &o) {
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    decided[i] += o.decided[i];
    declined[i] += o.declined[i];
  }
  backward += o.backward;
  return *this;
}

bool Coverage::empty() const {
  const auto zero = [](int n) { return n == 0; };
  return backward == 0 && std::all_of(decided.begin(), decided.end(), zero) &&
         std::all_of(declined.begin(), declined.end(), zero);
}

std::string_view corner_status_name(CornerStatus s) {
  switch (s) {
    case CornerStatus::reached: return "reached";
    case CornerStatus::declined: return "declined";
    case CornerStatus::not_reached: return "not reached";
    case CornerStatus::not_declared: return "not declared";
    case CornerStatus::not_applicable: return "not applicable";
  }
  return "?";
}

std::string corner_status_id(CornerStatus s, char joiner) {
  std::string id(corner_status_name(s));
  std::replace(id.begin(), id.end(), ' ', joiner);
  return id;
}

int RunCoverage::count(CornerStatus s) const {
  return static_cast<int>(std::count_if(corners.begin(), corners.end(), [&](const CornerCount &c) { return c.status == s; }));
}

int RunCoverage::applicable() const {
  return count(CornerStatus::reached) + count(CornerStatus::declined) + count(CornerStatus::not_reached);
}

std::string RunCoverage::ids(CornerStatus s, std::size_t most) const {
  std::string out;
  std::size_t listed = 0;
  for (const CornerCount &c : corners)
    if (c.status == s && listed++ < most) out += (out.empty() ? "" : ", ") + std::string(c.corner->id);
  if (listed > most) out += " and " + std::to_string(listed - most) + " more";
  return out;
}

std::string RunCoverage::describe() const {
  std::string out = "corners reached " + std::to_string(count(CornerStatus::reached)) + "/" +
                    std::to_string(applicable());
  std::string why;
  for (const CornerStatus s : {CornerStatus::declined, CornerStatus::not_reached})
    if (count(s) > 0) why += (why.empty() ? "" : "; ") + std::string(corner_status_name(s)) + ": " + ids(s, kNamed);
  return why.empty() ? out : out + " (" + why + ")";
}

RunCoverage run_coverage(const RunReport &r) {
  Coverage sum;
  for (const PropertyReport &p : r.properties) sum += p.coverage;
  const bool ran_backward = sum.backward > 0;
  RunCoverage rc;
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    CornerCount c{.corner = &kCorners[i], .decided = sum.decided[i], .declined = sum.declined[i]};
    const Corner &k = kCorners[i];
    if (c.decided > 0) c.status = CornerStatus::reached;
    else if (!r.contract.implements(r.dtype)) c.status = CornerStatus::not_declared;  // the whole run is off
    else if (k.feature != 0 && (r.contract.features & k.feature) == 0) c.status = CornerStatus::not_declared;
    else if (!reachable(k, r.contract, ran_backward)) c.status = CornerStatus::not_applicable;
    else c.status = c.declined > 0 ? CornerStatus::declined : CornerStatus::not_reached;
    rc.corners.push_back(c);
  }
  return rc;
}

}  // namespace attncheck
