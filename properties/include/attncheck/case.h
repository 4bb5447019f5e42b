// One generated test case of the property engine: a shape-level spec (dims, mask, layout, dtype, value family) and
// the exact input values, as plain data. A Case is what generators draw, what shrinkers simplify, what a property
// checks and what a failure reports; it converts to a Problem (spec/include/attncheck/problem.h) with NaN in every
// padding element, so that a kernel reading padding produces NaN that the checks see.
//
// Example:
//   attncheck::Case c;                                  // B=Hq=Hkv=Lq=Lk=D=Dv=1, f32, zeros
//   c.spec.shape = {.Lq = 2, .Lk = 2, .D = 4, .Dv = 4};
//   c.resize_values(/*backward=*/false);                 // zero-filled q, k, v of the shape
//   attncheck::Problem p = c.problem();                  // scale 1/√D, layout c.spec.layout, NaN padding
#pragma once

#include "attncheck/dtype.h"
#include "attncheck/problem.h"
#include "attncheck/tensor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck {

/// How the entries of q and k are drawn (v and dout follow value_family_of_v). Every value is exactly
/// representable in the storage dtype: draws are rounded once, at generation.
enum class Family : std::uint8_t {
  small_ints,    ///< integers in [−kSmallIntMax, kSmallIntMax]: exact everywhere, ties likely (simplest: shrinks go here)
  uniform,       ///< U(−1, 1)
  normal,        ///< i.i.d. N(0, 1): the setting of the 1/√D argument
  large,         ///< N(0, σ²) with σ chosen so that |scale·q·k| reaches 10²…10⁴ (past float32's exp overflow at 88.7)
  near_ties,     ///< k rows one ulp apart from a common row: logits equal to a few ulps
  dominant_key,  ///< N(0, 1) plus one key per (batch, kv head) aligned with its queries: P close to one-hot
  outliers,      ///< N(0, 1) with a few entries scaled by 10²…10³
  extremes,      ///< N(0, 1) mixed with float16 extremes: ±65504, the smallest normal, subnormals — rounded to the
                 ///< storage dtype (65504 becomes 65536 in bfloat16; all are normal numbers in float32)
};
inline constexpr int kFamilyCount = 8;
/// "small_ints", "uniform", ...
std::string_view family_name(Family f);
/// The family v and dout are drawn from for q, k of family `f`: families that shape the logits (large,
/// near_ties, dominant_key) draw v from N(0, 1); the others use their own distribution.
Family value_family_of_v(Family f);

/// Largest magnitude of Family::small_ints.
inline constexpr int kSmallIntMax = 4;

/// The lengths of the long problem a stretched case stands for (stretch.h): Lq rows and Lk keys, of which the
/// case's own Lk keys are the live ones. Lk = 0: not stretched.
struct Stretch {
  std::int64_t Lq = 0, Lk = 0;
  bool active() const { return Lk > 0; }
  friend bool operator==(const Stretch &, const Stretch &) = default;
};

/// The ABI 1.2 features of a case (SPEC.md §2.7), compactly: the settings, and a seed from which everything sized by
/// the shape is derived (sink logits, mask values, sequence lengths, the block table, the dropout seed) — so a case
/// whose shape shrinks keeps its features consistent with it (features_of).
struct FeatureSpec {
  std::uint32_t bits = 0;                            ///< ATTNCHECK_FEATURE_* in use
  std::int64_t window_left = -1, window_right = -1;  ///< window: −1 unbounded
  double softcap = 0;                                ///< softcap: c (a float32 value)
  MaskKind mask_kind = MaskKind::boolean;            ///< mask: boolean or additive
  bool mask_per_batch = false, mask_per_head = false;  ///< mask: [B|1, Hq|1, Lq, Lk]
  double mask_keep = 1;                              ///< mask: share of visible entries
  /// Boolean mask: visible entries hold nonzero bytes other than 1 too (the ABI: any nonzero byte is visible).
  bool mask_bytes = false;
  /// Mask: keys 0 … mask_prefix − 1 hidden from every row (a split-KV kernel's first split empty; ≥ Lk: every row
  /// sees no key), on top of mask_keep.
  std::int64_t mask_prefix = 0;
  /// Mask: its first row and about one in four of the others (chosen by the seed) see no key at all (LSE −∞ without a
  /// sink).
  bool mask_empty_rows = false;
  /// The argument tensors (slopes, sinks, mask, sequence offsets, block table, seqused_k) sent strided and offset,
  /// poison between (Features::args_spread; its spread and offset derived from the seed).
  bool strided_args = false;
  std::int64_t page_size = 0;                        ///< paged: keys per page
  double dropout_p = 0;                              ///< dropout: probability of dropping
  bool top_left = false;  ///< rows aligned top-left (the kernel declares causal=top-left), causal or not
  Fp8 fp8 = Fp8::e4m3fn;  ///< fp8: the format q, k, v are stored in (their descales derived from the seed)
  std::uint64_t seed = 0;                            ///< derives the values sized by the shape
  bool active() const { return bits != 0; }
  /// "window=3,-1 softcap=30 …" ("" when none).
  std::string describe() const;
  friend bool operator==(const FeatureSpec &, const FeatureSpec &) = default;
};

/// The tensors of a forward and a backward call whose layouts a case may set one by one.
enum class Operand : std::uint8_t { q, k, v, out, lse, dout };
inline constexpr int kOperandCount = 6;
std::string_view operand_name(Operand o);  ///< "q", "k", "v", "out", "lse", "dout"
/// The read-only inputs: the ones a broadcast (stride 0) may be sent for.
inline bool is_input(Operand o) { return o != Operand::out && o != Operand::lse; }

/// One tensor's own layout, when it is not the case's (CaseSpec::layout_of), and for an input a dimension sent with
/// stride 0 (Tensor::expanded: its values are equal along that dimension, Case::broadcast_values).
struct TensorLayout {
  std::optional<Layout> layout;
  Broadcast broadcast = Broadcast::none;
  bool own() const { return layout || broadcast != Broadcast::none; }
  friend bool operator==(const TensorLayout &, const TensorLayout &) = default;
};
/// Per-tensor layouts of a case (all default: q, k, v and out in CaseSpec::layout, lse compact, dout contiguous).
struct TensorLayouts {
  std::array<TensorLayout, kOperandCount> of{};
  TensorLayout &operator[](Operand o) { return of[static_cast<std::size_t>(o)]; }
  const TensorLayout &operator[](Operand o) const { return of[static_cast<std::size_t>(o)]; }
  bool any() const {
    return std::any_of(of.begin(), of.end(), [](const TensorLayout &t) { return t.own(); });
  }
  /// "v=transposed dout=blhd k=expand-heads" ("" when none).
  std::string describe() const;
  friend bool operator==(const TensorLayouts &, const TensorLayouts &) = default;
};

/// Shape-level description of a case: everything but the values.
struct CaseSpec {
  Shape shape;
  Mask mask = Mask::none;
  Layout layout = Layout::bhld;
  Dtype dtype = Dtype::f32;
  Family family = Family::normal;
  Stretch stretch;  ///< when active, `shape` is the core of a long problem (stretch.h)
  FeatureSpec features;  ///< the ABI 1.2 features the kernel is called with (none by default)
  TensorLayouts layouts;  ///< tensors in layouts of their own (none by default)
  friend bool operator==(const CaseSpec &, const CaseSpec &) = default;
  /// The layout tensor `o` is sent (or allocated) in: its own, else `layout` for q, k, v, out and bhld for lse, dout.
  Layout layout_of(Operand o) const;
  /// The dimension input `o` is sent with stride 0 (Broadcast::none for outputs and by default).
  Broadcast broadcast_of(Operand o) const { return layouts[o].broadcast; }
  /// "f32 B=1 Hq=1 Hkv=1 Lq=2 Lk=2 D=4 Dv=4 mask=none layout=bhld values=normal" (+ " stretched to Lq=… Lk=…")
  std::string describe() const;
  /// The shape of the problem the kernel is given: `shape`, or the stretched one (stretch.h: one more D).
  Shape problem_shape() const;
  /// 1/√D of the problem's D.
  double scale() const;
  /// B·Hq·Lq·Lk·(D + Dv) of the problem: the kernel's cost (and the reference's, unless stretched) grows with it.
  std::int64_t work() const;
};

/// The problem's Features (features.h) for the spec's shape: the settings of spec.features and the values its seed
/// derives — ALiBi slopes 2^(−8(h+1)/Hq) (the ALiBi paper's), sinks, mask entries, sequence lengths (0, 1, the
/// longest and between), the block table (pages shuffled, some unused), the dropout seed, FP8 descales.
Features features_of(const CaseSpec &spec);
/// x clamped to the format's largest magnitude and rounded to it: an FP8 case's value.
double fp8_value(Fp8 format, double x);

/// The features that send argument tensors (FeatureSpec::strided_args).
inline constexpr std::uint32_t kArgTensorFeatures = ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS |
                                                    ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_VARLEN |
                                                    ATTNCHECK_FEATURE_PAGED;
/// Features a feature case may combine with its own (CaseOptions::combinable): the score modifiers whose settings do not
/// depend on the shape — a problem cut to one sequence or another layout keeps them.
inline constexpr std::uint32_t kCombinableFeatures =
    ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP | ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS;

/// Requirements a property places on the cases it is given (CaseSpec fields it fixes, tensors it needs).
struct CaseOptions {
  Dtype dtype = Dtype::f32;
  bool backward = false;         ///< draw dout
  bool draw_v = true;            ///< false: v is all zeros (the property replaces it; zeros never shrink)
  bool dv_equals_lk = false;     ///< Dv = Lk (e.g. v = identity); kept while shrinking
  /// With dv_equals_lk: D = Dv = Lk too — for a kernel that declines Dv ≠ D (the engine asks it), whose cases of
  /// such properties would all be declined. Kept while shrinking.
  bool tie_head_dims = false;
  std::optional<Mask> mask;      ///< fixed mask (default: drawn, and shrunk toward none)
  /// The causal mask drawn (and that a fixed Mask::causal means): the alignment the kernel declares.
  Mask causal = Mask::causal;
  /// Rows that see no key (bottom-right causal with Lq > Lk): drawn or not (nullopt); none (false: for kernels
  /// whose contract leaves such rows unspecified); or in every case (true: a causal case with Lq > Lk). Kept
  /// while shrinking.
  std::optional<bool> empty_rows;
  std::optional<Family> family;  ///< fixed value family (default: drawn, and shrunk toward small_ints)
  std::optional<Layout> layout;  ///< fixed layout (default: drawn, and shrunk toward bhld)
  /// ABI 1.2 features every case uses (ATTNCHECK_FEATURE_* bits; their settings drawn, and shrunk toward the simplest).
  std::uint32_t features = 0;
  /// With `features`: others the kernel declares that a case may add (each at kExtraFeatureRate, gen.h; shrinking
  /// drops them first) — the combinations production models run (a window with softcap, sinks or ALiBi).
  std::uint32_t combinable = 0;
  std::int64_t max_work = kDefaultMaxWork;  ///< cap on CaseSpec::work()
  /// Draw the reach regime too (gen.h kReachRate: production head dims, rows to 2,048 keys, within kReachMaxWork and
  /// max_work): for properties the fast reference screens (PropertyDef::screened).
  bool reach = false;
  /// The fewest keys a case may have (least_keys()); kept while shrinking.
  std::int64_t min_keys = 1;
  /// Under tie_head_dims, the fewest keys: a property whose probes keep Dv = D only at D ≥ 2 sets 2, so that its cases
  /// never have D = Lk = 1 (a probe the kernel would decline).
  std::int64_t tied_min_keys = 1;
  /// B, Hkv and the GQA group drawn small (gen.h kFewBatch, kFewKvHeads, kFewGroup) rather than from their buckets:
  /// most shapes of a compile-friendly pool, whose few shapes then keep rows of several keys under the work cap.
  bool few_heads = false;
  /// Compile-friendly generation: when not empty, every case's dimensions come from these shapes (adjusted to the
  /// constraints above), while mask, layout and values stay fully random — a kernel behind a JIT compiler then
  /// compiles a few shapes, not one per case. Shrinking tries these shapes before others. Shared, immutable.
  std::shared_ptr<const std::vector<Shape>> shape_pool;
  /// Draw stretched cases (stretch.h): a small core and the lengths of a long problem it stands for — decode rows
  /// of up to kMaxStretchKeys keys, square problems up to kMaxStretchSquare, GQA, every dtype and layout, causal
  /// or not — within kMaxStretchWork. Shrinking keeps the structure (shorter rows, fewer live keys).
  bool stretch = false;
  /// With stretch: > 0 draws, at RapidCheck size kHugeSize (gen.h), a decode row whose key tensor holds more than
  /// 2³¹ elements (huge_stretch()), when its tensors take at most this many bytes; 0 = never.
  std::uint64_t huge_bytes = 0;
  /// Draw the combinable features the kernel declares (`combinable`) in cases of a property that needs none of its
  /// own, each at kIndependenceFeatureRate (gen.h): the independence properties (batch invariance, determinism, call
  /// history, padding), so that a path only a feature takes is held to the same promises.
  bool declared_features = false;
  /// The spec meets the options' constraints that shrinking must keep (empty_rows, min_keys, its features).
  bool admits(const CaseSpec &s) const;
  /// admits() but for the features: the shape, the mask and the stretch (a spec whose features are not drawn yet).
  bool admits_shape(const CaseSpec &s) const;
  /// The dim follows Lk under the ties above: Dv (dv_equals_lk), and D too (tie_head_dims). Draws, shrinkers and
  /// slices leave such a dim alone; tie() sets it.
  bool tied_dim(std::int64_t Shape::*m) const {
    return dv_equals_lk && (m == &Shape::Dv || (tie_head_dims && m == &Shape::D));
  }
  /// The fewest keys a case may have: min_keys, and tied_min_keys under tie_head_dims.
  std::int64_t least_keys() const { return tie_head_dims ? std::max(min_keys, tied_min_keys) : min_keys; }
  /// Applies the ties above: Dv = Lk (dv_equals_lk), and D = Lk too (tie_head_dims).
  void tie(Shape &s) const {
    for (auto m : {&Shape::D, &Shape::Dv})
      if (tied_dim(m)) s.*m = s.Lk;
  }
  /// The shape meets the ties as it is.
  bool tied(const Shape &s) const {
    Shape t = s;
    tie(t);
    return t == s;
  }
  /// ≈ 30 ms of MPFR reference per case at the cap: boundary shapes stay affordable.
  static constexpr std::int64_t kDefaultMaxWork = 600'000;
  /// The reach regime's cap (gen.h kReachRate): one query row of D = Dv = 64 against 2,048 keys, or of 256 against
  /// 512. Its cases go through the screen (about a double evaluation per element); MPFR sees them only where the
  /// screen escalates.
  static constexpr std::int64_t kReachMaxWork = std::int64_t{1} << 18;
};

/// A case: spec and exact values, row-major over the logical shapes
/// q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv], dout [B,Hq,Lq,Dv] (empty when not drawn).
struct Case {
  CaseSpec spec;
  std::vector<double> q, k, v, dout;

  /// The problem: tensors in their layouts (CaseSpec::layout_of) with kInputPad elements of padding around them (and
  /// between rows for Layout::padded), every padding element NaN; scale 1/√D; dout contiguous when present and
  /// without a layout of its own. A broadcast input is sent with stride 0 when its values are equal along that
  /// dimension (drawn and shrunk cases always are); a property's derived case whose values differ there gets it
  /// materialized in its layout. A stretched case gives
  /// its long problem (stretch.h). Under FP8, q, k, v are rounded to the format (clamped to its largest value): the
  /// values the kernel is sent (shrinking may propose others).
  Problem problem() const;
  /// Resizes q, k, v (and dout when `backward`, else clears it) to the spec's shape (a stretched case: its core's),
  /// zero-filling new entries.
  void resize_values(bool backward);
  /// q, k, v, dout concatenated (the order shrinkers see the values in).
  std::vector<double> flat() const;
  /// Inverse of flat(): splits `values` (of the same total size) back into q, k, v, dout.
  void set_flat(const std::vector<double> &values);
  /// Makes every broadcast input (CaseSpec::broadcast_of) equal along its broadcast dimension: each slice becomes a
  /// copy of slice 0 (what a tensor of stride 0 there holds).
  void broadcast_values();
  /// Every broadcast input is equal along its dimension already (bit for bit).
  bool broadcast_consistent() const;
  /// Equal specs and bit-identical values (NaN equals the same NaN bits, +0 differs from −0).
  bool same_as(const Case &o) const;
  /// Spec line and every value as hex and decimal, at most `max_values_per_tensor` per tensor (then "… N more").
  std::string describe(std::size_t max_values_per_tensor = kPrintedValues) const;
  static constexpr std::size_t kPrintedValues = 256;
  /// Padding elements around every input tensor.
  static constexpr std::int64_t kInputPad = 3;
};

/// For RapidCheck's counterexample printing (found by ADL): the spec line.
void showValue(const Case &c, std::ostream &os);

/// Poisons the keys hidden from query row `row` by the causal mask — k and v of keys j > last_visible(row), every
/// batch and kv head — with `poison` (NaN or ±Inf). Rows 0..row of a correct causal kernel do not change.
/// Requires a causal spec.mask; throws std::invalid_argument otherwise.
Case with_hidden_poison(const Case &c, std::int64_t row, double poison);

}  // namespace attncheck
