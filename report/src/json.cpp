// report.json: writer and strict reader (schema: spec/REPORT_SCHEMA.md).
//
// Bytes are deterministic: keys in a fixed order (ordered_json), exact values as C99 hex strings, ratios as JSON
// numbers in nlohmann's shortest round-trip form (or the string "inf"), seeds as decimal strings (uint64 does not
// survive a JavaScript reader). Fields derived from others (verdicts of runs, failure numbers, the worst evidence
// element, replay commands) are written for readers and recomputed on parse, so to_json(from_json(x)) == x.
#include "common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace attncheck::reporting {

namespace {

using detail::hex;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

/// Version 2 added the contract, the tiers, warnings, failing_case and strict (a version-1 file reads as the
/// default contract, every property required, strict false).
constexpr int kSchemaVersion = 2;
/// The most shards a campaign is cut into (a sanity bound on the partial reports' "count").
constexpr std::int64_t kMaxShards = 1 << 20;
constexpr std::string_view kFormat = "attncheck-report";
constexpr int kIndent = 2;

// ---- enum names (the machine ids; parsing tries every enumerator) ----

template <class E, int N, class NameFn>
bool parse_enum(std::string_view s, NameFn name, E *out) {
  for (int x = 0; x < N; ++x)
    if (name(static_cast<E>(x)) == s) return *out = static_cast<E>(x), true;
  return false;
}
constexpr int kVerdicts = 6, kSteps = 5, kMasks = 3, kLayouts = 4, kBroadcasts = 3, kDtypes = 3, kKinds = 4, kTiers = 3, kLse = 3;
constexpr int kApprox = 4;  ///< Tanh and Exp values
constexpr int kFp32Precisions = 4;  ///< Fp32Precision values
constexpr int kFindingKinds = 6;
static_assert(static_cast<int>(Finding::Kind::aggregate) == kFindingKinds - 1);
static_assert(static_cast<int>(Verdict::error) == kVerdicts - 1 && static_cast<int>(Tier::off) == kTiers - 1 &&
              static_cast<int>(Mask::causal_top_left) == kMasks - 1);
static_assert(static_cast<int>(Tanh::approx_bf16) == kApprox - 1 && static_cast<int>(Exp::approx_bf16) == kApprox - 1);
static_assert(static_cast<int>(Fp32Precision::f16) == kFp32Precisions - 1);

// ---- writer ----

/// 32 lowercase hex digits of a 128-bit value.
std::string fmt_hex128(unsigned __int128 h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  constexpr int kNibbles = 32, kNibbleBits = 4;
  std::string out(kNibbles, '0');
  for (int n = kNibbles - 1; n >= 0; --n, h >>= kNibbleBits) out[static_cast<std::size_t>(n)] = kDigits[h & 0xfu];
  return out;
}

ojson hex_array(const std::vector<double> &v) {
  ojson a = ojson::array();
  for (const double x : v) a.push_back(hex(x));
  return a;
}

ojson ratio_json(double r) {
  if (std::isfinite(r)) return r;
  return std::isnan(r) ? "nan" : (r > 0 ? "inf" : "-inf");
}

ojson spec_json(const CaseSpec &s) {
  ojson j{{"dtype", dtype_name(s.dtype)}, {"B", s.shape.B},   {"Hq", s.shape.Hq},
          {"Hkv", s.shape.Hkv},           {"Lq", s.shape.Lq}, {"Lk", s.shape.Lk},
          {"D", s.shape.D},               {"Dv", s.shape.Dv}, {"mask", mask_name(s.mask)},
          {"layout", layout_name(s.layout)}, {"family", family_name(s.family)}};
  if (s.stretch.active()) j["stretch"] = ojson{{"Lq", s.stretch.Lq}, {"Lk", s.stretch.Lk}};
  const FeatureSpec &f = s.features;
  if (f.active()) {
    ojson fj{{"features", feature_list(f.bits)}, {"seed", std::to_string(f.seed)}};
    if (f.top_left) fj["align"] = "top-left";
    if (f.strided_args) fj["strided_args"] = true;
    if (f.bits & ATTNCHECK_FEATURE_WINDOW) fj["window"] = ojson::array({f.window_left, f.window_right});
    if (f.bits & ATTNCHECK_FEATURE_SOFTCAP) fj["softcap"] = hex(f.softcap);
    if (f.bits & ATTNCHECK_FEATURE_MASK) {
      fj["mask"] = f.mask_kind == MaskKind::additive ? "additive" : "boolean";
      fj["mask_per_batch"] = f.mask_per_batch;
      fj["mask_per_head"] = f.mask_per_head;
      fj["mask_keep"] = hex(f.mask_keep);
      if (f.mask_bytes) fj["mask_bytes"] = true;
      if (f.mask_prefix > 0) fj["mask_prefix"] = f.mask_prefix;
      if (f.mask_empty_rows) fj["mask_empty_rows"] = true;
    }
    if (f.bits & ATTNCHECK_FEATURE_PAGED) fj["page_size"] = f.page_size;
    if (f.bits & ATTNCHECK_FEATURE_DROPOUT) fj["dropout_p"] = hex(f.dropout_p);
    if (f.bits & ATTNCHECK_FEATURE_FP8) fj["fp8"] = fp8_name(f.fp8);
    j["features"] = std::move(fj);
  }
  if (s.layouts.any()) {
    ojson lj = ojson::object();
    for (int x = 0; x < kOperandCount; ++x) {
      const TensorLayout &t = s.layouts.of[static_cast<std::size_t>(x)];
      if (!t.own()) continue;
      ojson tj = ojson::object();
      if (t.layout) tj["layout"] = layout_name(*t.layout);
      if (t.broadcast != Broadcast::none) tj["broadcast"] = broadcast_name(t.broadcast);
      lj[std::string(operand_name(static_cast<Operand>(x)))] = std::move(tj);
    }
    j["layouts"] = std::move(lj);
  }
  return j;
}

ojson evidence_json(const Evidence &e) {
  ojson j{{"tensor", e.tensor}, {"shape", e.shape}, {"call_error", e.call_error}};
  const std::int64_t w = e.worst_index();
  if (w >= 0) {
    const auto x = static_cast<std::size_t>(w);
    j["worst"] = ojson{{"element", element_name(e.tensor, e.shape, w)},
                       {"index", w},
                       {"got", hex(e.got[x])},
                       {"exact", hex(e.exact[x])},
                       {"bound", hex(e.bound[x])},
                       {"ratio", ratio_json(error_ratio(e.got[x], e.exact[x], e.bound[x]))}};
  }
  j["got"] = hex_array(e.got);
  j["exact"] = hex_array(e.exact);
  j["bound"] = hex_array(e.bound);
  j["probabilities"] = hex_array(e.probabilities);
  if (!e.hints.empty()) {  // only then: reports without hints stay as they were
    ojson hints = ojson::array();
    for (const Hint &h : e.hints)
      hints.push_back(ojson{{"kind", hint_kind_name(h.kind)},
                            {"text", h.text},
                            {"scale", hex(h.scale)},
                            {"shift", h.shift},
                            {"tile", h.tile},
                            {"row", h.row},
                            {"first_key", h.first_key},
                            {"last_key", h.last_key},
                            {"logit", hex(h.logit)},
                            {"ratio", ratio_json(h.ratio)},
                            {"baseline", ratio_json(h.baseline)}});
    j["hints"] = std::move(hints);
  }
  if (e.original) {  // only then: reports of properties that judged the case itself stay as they were
    const Evidence::Original &o = *e.original;
    ojson oj{{"shape", o.shape}, {"call_error", o.call_error}};
    oj["got"] = hex_array(o.got);
    oj["exact"] = hex_array(o.exact);
    oj["bound"] = hex_array(o.bound);
    j["original"] = std::move(oj);
    j["differing_rows"] = e.differing_rows;
    j["marked_row"] = e.marked_row >= 0 ? ojson(e.marked_row) : ojson(nullptr);
  }
  return j;
}

/// A finding: only the fields it has (an element's index, got, exact, bound; a label).
ojson finding_json(const Finding &f) {
  ojson j{{"kind", finding_kind_id(f.kind)}, {"tensor", f.tensor}, {"name", f.name}, {"index", f.index}};
  if (f.got) j["got"] = hex(*f.got);
  if (f.exact) j["exact"] = hex(*f.exact);
  if (f.bound) j["bound"] = hex(*f.bound);
  j["empty_row"] = f.empty_row;
  if (!f.what.empty()) j["what"] = f.what;
  return j;
}

ojson outcome_json(const Outcome &o) {
  ojson j{{"verdict", verdict_id(o.verdict)},
          {"step", o.step ? ojson(step_id(*o.step)) : ojson(nullptr)},
          {"detail", o.detail}};
  if (o.finding) j["finding"] = finding_json(*o.finding);
  j["worst_ratio"] = ratio_json(o.worst_ratio);
  j["worst"] = o.worst;
  return j;
}

/// A case's exact inputs: spec, scale (derived: the problem's scale), q, k, v, dout.
ojson case_json(const Case &m, double scale) {
  ojson inputs{{"spec", spec_json(m.spec)}, {"scale", hex(scale)}};
  inputs["q"] = hex_array(m.q);
  inputs["k"] = hex_array(m.k);
  inputs["v"] = hex_array(m.v);
  inputs["dout"] = hex_array(m.dout);
  return inputs;
}

ojson counterexample_json(const Counterexample &c, std::size_t number) {
  ojson j{{"failure", number},
          {"replay", detail::replay_command(number)},
          {"step", c.outcome.step ? ojson(step_id(*c.outcome.step)) : ojson(nullptr)},
          {"outcome", outcome_json(c.outcome)},
          {"inputs", case_json(c.minimal, c.minimal.spec.scale())}};
  if (c.outcome.failing_case) {
    j["failing_case"] = case_json(*c.outcome.failing_case, c.judged_scale());
    j["failing_scale"] = hex(c.outcome.failing_scale);
    j["failing_what"] = c.outcome.failing_what;
  }
  j["original"] = spec_json(c.original);
  j["found_after"] = c.found_after;
  j["shrink_steps"] = c.shrink_steps;
  j["shrinks_tried"] = c.shrinks_tried;
  j["seed"] = std::to_string(c.seed);
  j["reproduce"] = c.reproduce;
  if (c.from_corpus()) j["corpus_entry"] = c.corpus_entry;  // only then: reports without a corpus stay as they were
  if (!c.explained_by.empty()) {  // only then: reports of failures no declaration explains stay as they were
    ojson ex = ojson::array();
    for (const Explanation &e : c.explained_by) ex.push_back({{"declaration", e.declaration}, {"meaning", e.meaning}});
    j["explained_by"] = std::move(ex);
  }
  if (!c.passes_under.empty()) j["passes_under"] = c.passes_under;  // only then, as explained_by
  if (c.evidence) j["evidence"] = evidence_json(*c.evidence);
  return j;
}

ojson profile_json(const PrecisionProfile &p) {
  return ojson{{"storage", dtype_name(p.storage)},
               {"accumulation", dtype_name(p.accumulate)},
               {"accumulation_qk", dtype_name(p.accumulate_qk)},
               {"round_p", p.round_p},
               {"rowsum_rounded_p", p.rowsum_rounded_p},
               {"grad_per_head", p.grad_per_head},
               {"lse", dtype_name(p.lse)},
               {"tanh", approximation_name(p.tanh)},
               {"exp", approximation_name(p.exp)},
               {"fp32_precision", fp32_precision_name(p.fp32_precision)}};
}

/// A property's corners: {"decided": {id: n}, "declined": {id: n}}, nonzero counts only, in corners() order, and
/// the cases counted that called the backward.
ojson coverage_json(const Coverage &c) {
  ojson decided = ojson::object(), declined = ojson::object();
  for (std::size_t i = 0; i < kCornerCount; ++i) {
    const std::string id(corners()[i].id);
    if (c.decided[i] > 0) decided[id] = c.decided[i];
    if (c.declined[i] > 0) declined[id] = c.declined[i];
  }
  return ojson{{"decided", std::move(decided)}, {"declined", std::move(declined)}, {"backward", c.backward}};
}


/// A run's coverage (run_coverage), derived from its properties' and written only: the summary line, the counts,
/// the corners of each status but reached, and every corner's decided cases.
ojson run_coverage_json(const RunCoverage &rc) {
  ojson j{{"summary", rc.describe()},
          {"reached", rc.count(CornerStatus::reached)},
          {"applicable", rc.applicable()}};
  for (const CornerStatus s : {CornerStatus::declined, CornerStatus::not_reached, CornerStatus::not_declared,
                               CornerStatus::not_applicable}) {
    ojson ids = ojson::array();
    for (const CornerCount &c : rc.corners)
      if (c.status == s) ids.push_back(std::string(c.corner->id));
    j[corner_status_id(s)] = std::move(ids);
  }
  ojson decided = ojson::object();
  for (const CornerCount &c : rc.corners) decided[std::string(c.corner->id)] = c.decided;
  j["decided"] = std::move(decided);
  return j;
}

ojson property_json(const PropertyReport &p) {
  ojson j{{"id", p.id},
          {"verdict", verdict_id(p.verdict)},
          {"tier", tier_name(p.tier)},
          {"cases", p.cases},
          {"unsupported", p.unsupported},
          {"undecided", p.undecided},
          {"worst_ratio", ratio_json(p.worst_ratio)},
          {"worst", p.worst},
          {"budget_exhausted", p.budget_exhausted},
          {"skipped", p.skipped},
          {"interrupted", p.interrupted},
          {"coverage", coverage_json(p.coverage)},
          {"targeted", ojson{{"cases", p.targeted.cases},
                             {"declined", p.targeted.declined},
                             {"from", ratio_json(p.targeted.from)},
                             {"to", ratio_json(p.targeted.to)}}},
          {"reference", ojson{{"fast_elements", p.reference.fast_elements},
                              {"mpfr_elements", p.reference.mpfr_elements},
                              {"confirmations", p.reference.confirmations}}},
          {"seed", std::to_string(p.seed)},
          {"note", p.note},
          {"formula", p.formula},
          {"summary", p.summary}};
  // Only when the check replayed a corpus: reports of runs without one stay as they were.
  if (p.corpus.replayed > 0) j["corpus"] = ojson{{"replayed", p.corpus.replayed}, {"passed", p.corpus.passed}};
  return j;
}

// ---- reader: every error names where it is, in one line ----

[[noreturn]] void fail(const std::string &what) { throw ReportError("report.json: " + what); }

/// A JSON object being read, with the path used in error messages ("runs[0].properties[2]").
class Obj {
 public:
  Obj(const json &j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(where() + "is not an object");
  }
  const std::string &path() const { return path_; }
  bool has(const char *key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json &self() const { return j_; }
  const json &at(const char *key) const {
    if (!j_.contains(key)) fail(where() + "\"" + key + "\" is missing");
    return j_.at(key);
  }
  std::string str(const char *key) const {
    const json &v = at(key);
    if (!v.is_string()) fail(where() + "\"" + key + "\" is not a string");
    return v.get<std::string>();
  }
  bool boolean(const char *key) const {
    const json &v = at(key);
    if (!v.is_boolean()) fail(where() + "\"" + key + "\" is not true or false");
    return v.get<bool>();
  }
  std::int64_t integer(const char *key, std::int64_t lo, std::int64_t hi) const {
    const json &v = at(key);
    if (!v.is_number_integer()) fail(where() + "\"" + key + "\" is not an integer");
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi)
      fail(where() + "\"" + key + "\" is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]");
    return x;
  }
  int count(const char *key) const { return static_cast<int>(integer(key, 0, std::numeric_limits<int>::max())); }
  std::uint64_t seed(const char *key) const {
    const std::string s = str(key);
    std::uint64_t x = 0;
    bool ok = !s.empty() && s.size() <= 20;
    for (const char ch : s) {
      ok = ok && ch >= '0' && ch <= '9';
      const auto digit = static_cast<std::uint64_t>(ch - '0');
      ok = ok && x <= (std::numeric_limits<std::uint64_t>::max() - digit) / 10;
      if (ok) x = x * 10 + digit;
    }
    if (!ok) fail(where() + "\"" + key + "\" is not a decimal 64-bit seed");
    return x;
  }
  double ratio(const char *key) const {
    const json &v = at(key);
    if (v.is_number()) return v.get<double>();
    if (v == "inf") return std::numeric_limits<double>::infinity();
    if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
    fail(where() + "\"" + key + "\" is not a number or \"inf\"");
  }
  /// A finite number of seconds, ≥ 0.
  double seconds(const char *key) const {
    const json &v = at(key);
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      fail(where() + "\"" + key + "\" is not a number of seconds");
    return v.get<double>();
  }
  double value(const char *key) const {
    const json &v = at(key);
    double x = 0;
    if (!v.is_string() || !detail::parse_hex(v.get_ref<const std::string &>(), &x))
      fail(where() + "\"" + key + "\" is not a hex float string");
    return x;
  }
  std::vector<double> values(const char *key) const {
    const json &v = at(key);
    if (!v.is_array()) fail(where() + "\"" + key + "\" is not an array");
    std::vector<double> out(v.size());
    for (std::size_t x = 0; x < v.size(); ++x)
      if (!v[x].is_string() || !detail::parse_hex(v[x].get_ref<const std::string &>(), &out[x]))
        fail(where() + "\"" + key + "\"[" + std::to_string(x) + "] is not a hex float string");
    return out;
  }
  template <class E, int N, class NameFn>
  E name(const char *key, NameFn fn) const {
    E e{};
    const std::string s = str(key);
    if (!parse_enum<E, N>(s, fn, &e)) fail(where() + "\"" + key + "\" has an unknown value \"" + s + "\"");
    return e;
  }
  Obj obj(const char *key) const { return Obj(at(key), path_ + "." + key); }
  /// The array `key` (missing or null: empty).
  const json &array(const char *key) const {
    static const json kEmpty = json::array();
    if (!has(key)) return kEmpty;
    const json &v = at(key);
    if (!v.is_array()) fail(where() + "\"" + key + "\" is not an array");
    return v;
  }
  std::string where() const { return path_.empty() ? "" : path_ + ": "; }

 private:
  const json &j_;
  std::string path_;
};

/// A spec's "layouts": {operand: {"layout": …, "broadcast": "batch" | "heads"}}, a broadcast on inputs only.
TensorLayouts read_layouts(const Obj &o) {
  TensorLayouts out;
  for (const auto &[key, value] : o.self().items()) {
    Operand op{};
    if (!parse_enum<Operand, kOperandCount>(key, operand_name, &op))
      fail(o.where() + "\"" + key + "\" is not a tensor (q, k, v, out, lse, dout)");
    const Obj t = o.obj(key.c_str());
    TensorLayout &l = out[op];
    if (t.has("layout")) l.layout = t.name<Layout, kLayouts>("layout", layout_name);
    if (t.has("broadcast")) l.broadcast = t.name<Broadcast, kBroadcasts>("broadcast", broadcast_name);
    if (l.broadcast != Broadcast::none && !is_input(op))
      fail(t.where() + "an output is never sent with stride 0 (\"broadcast\" is for q, k, v and dout)");
    if (op == Operand::lse && l.layout == Layout::transposed)
      fail(t.where() + "the LSE has no transposed layout (bhld, blhd or padded)");
  }
  return out;
}

CaseSpec read_spec(const Obj &o) {
  CaseSpec s;
  s.dtype = o.name<Dtype, kDtypes>("dtype", dtype_name);
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;
  s.shape.B = o.integer("B", 1, kMaxDim);
  s.shape.Hq = o.integer("Hq", 1, kMaxDim);
  s.shape.Hkv = o.integer("Hkv", 1, kMaxDim);
  s.shape.Lq = o.integer("Lq", 0, kMaxDim);
  s.shape.Lk = o.integer("Lk", 0, kMaxDim);
  s.shape.D = o.integer("D", 1, kMaxDim);
  s.shape.Dv = o.integer("Dv", 1, kMaxDim);
  if (s.shape.Hq % s.shape.Hkv != 0) fail(o.where() + "Hq is not a multiple of Hkv");
  s.mask = o.name<Mask, kMasks>("mask", mask_name);
  s.layout = o.name<Layout, kLayouts>("layout", layout_name);
  s.family = o.name<Family, kFamilyCount>("family", family_name);
  if (o.has("stretch")) {
    const Obj st = o.obj("stretch");
    s.stretch.Lq = st.integer("Lq", 1, kMaxDim);
    s.stretch.Lk = st.integer("Lk", 1, kMaxDim);
    if (s.stretch.Lq < s.shape.Lq || s.stretch.Lk < s.shape.Lk)
      fail(o.where() + "a stretch shorter than its core (Lq, Lk)");
  }
  if (o.has("features")) {
    const Obj fo = o.obj("features");
    FeatureSpec &f = s.features;
    try {
      f.bits = parse_feature_list(fo.str("features"));
    } catch (const std::invalid_argument &e) {
      fail(fo.where() + e.what());
    }
    f.seed = fo.seed("seed");
    if (fo.has("align")) {
      if (fo.str("align") != "top-left") fail(fo.where() + "\"align\" is \"top-left\" or absent");
      f.top_left = true;
    }
    if (f.bits & ATTNCHECK_FEATURE_WINDOW) {
      const json &w = fo.at("window");
      if (!w.is_array() || w.size() != 2 || !w[0].is_number_integer() || !w[1].is_number_integer() ||
          w[0].get<std::int64_t>() < -1 || w[1].get<std::int64_t>() < -1)
        fail(fo.where() + "\"window\" is not [left, right] (integers ≥ −1)");
      f.window_left = w[0].get<std::int64_t>();
      f.window_right = w[1].get<std::int64_t>();
    }
    if (f.bits & ATTNCHECK_FEATURE_SOFTCAP) {
      f.softcap = fo.value("softcap");
      if (!(f.softcap > 0) || !std::isfinite(f.softcap)) fail(fo.where() + "\"softcap\" must be positive and finite");
    }
    f.strided_args = fo.has("strided_args") && fo.boolean("strided_args");
    if (f.strided_args && !(f.bits & kArgTensorFeatures))
      fail(fo.where() + "\"strided_args\" needs a feature with argument tensors (alibi, sinks, mask, varlen, paged)");
    if (f.bits & ATTNCHECK_FEATURE_MASK) {
      const std::string kind = fo.str("mask");
      if (kind != "boolean" && kind != "additive") fail(fo.where() + "\"mask\" is \"boolean\" or \"additive\"");
      f.mask_kind = kind == "additive" ? MaskKind::additive : MaskKind::boolean;
      f.mask_per_batch = fo.boolean("mask_per_batch");
      f.mask_per_head = fo.boolean("mask_per_head");
      f.mask_keep = fo.value("mask_keep");
      if (!(f.mask_keep >= 0 && f.mask_keep <= 1)) fail(fo.where() + "\"mask_keep\" is outside [0, 1]");
      f.mask_bytes = fo.has("mask_bytes") && fo.boolean("mask_bytes");
      if (f.mask_bytes && f.mask_kind != MaskKind::boolean)
        fail(fo.where() + "\"mask_bytes\" is for a boolean mask only");
      if (fo.has("mask_prefix")) f.mask_prefix = fo.integer("mask_prefix", 0, kMaxDim);
      f.mask_empty_rows = fo.has("mask_empty_rows") && fo.boolean("mask_empty_rows");
    }
    if (f.bits & ATTNCHECK_FEATURE_PAGED) f.page_size = fo.integer("page_size", 1, kMaxDim);
    if (f.bits & ATTNCHECK_FEATURE_FP8) {
      const std::string name = fo.str("fp8");
      if (name != "e4m3fn" && name != "e5m2") fail(fo.where() + "\"fp8\" is \"e4m3fn\" or \"e5m2\"");
      f.fp8 = name == "e5m2" ? Fp8::e5m2 : Fp8::e4m3fn;
    }
    if (f.bits & ATTNCHECK_FEATURE_DROPOUT) {
      f.dropout_p = fo.value("dropout_p");
      if (!(f.dropout_p > 0 && f.dropout_p < 1)) fail(fo.where() + "\"dropout_p\" is outside (0, 1)");
    }
  }
  if (o.has("layouts")) s.layouts = read_layouts(o.obj("layouts"));
  return s;
}

std::optional<Step> read_step(const Obj &o, const char *key) {
  if (!o.has(key)) return std::nullopt;
  return o.name<Step, kSteps>(key, step_id);
}

void check_size(const Obj &o, const char *what, std::size_t got, std::size_t want) {
  if (got != want)
    fail(o.where() + "\"" + what + "\" has " + std::to_string(got) + " values, its shape needs " +
         std::to_string(want));
}

std::vector<std::int64_t> read_shape(const Obj &o) {
  const json &shape = o.at("shape");
  if (!shape.is_array()) fail(o.where() + "\"shape\" is not an array");
  std::vector<std::int64_t> out;
  for (const json &d : shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0) fail(o.where() + "\"shape\" has a bad dimension");
    out.push_back(d.get<std::int64_t>());
  }
  return out;
}

/// got, exact and bound of `shape` (each empty or of its size) and the call's error: an evidence's or its original's.
template <class Values>
void read_values(const Obj &o, Values *v) {
  v->shape = read_shape(o);
  v->call_error = o.str("call_error");
  v->got = o.values("got");
  v->exact = o.values("exact");
  v->bound = o.values("bound");
  const std::size_t n = detail::numel(v->shape);
  if (!v->got.empty()) check_size(o, "got", v->got.size(), n);
  if (!v->exact.empty()) check_size(o, "exact", v->exact.size(), n);
  if (!v->bound.empty()) check_size(o, "bound", v->bound.size(), n);
}

Evidence read_evidence(const Obj &o) {
  Evidence e;
  e.tensor = o.str("tensor");
  read_values(o, &e);
  e.probabilities = o.values("probabilities");
  const json &hints = o.array("hints");
  for (std::size_t n = 0; n < hints.size(); ++n) {
    const Obj h(hints[n], o.path() + ".hints[" + std::to_string(n) + "]");
    Hint &x = e.hints.emplace_back();
    const std::string kind = h.str("kind");
    const std::optional<Hint::Kind> k = parse_hint_kind(kind);
    if (!k) fail(h.where() + "\"kind\" has an unknown value \"" + kind + "\"");
    x.kind = *k;
    x.text = h.str("text");
    x.scale = h.value("scale");
    constexpr std::int64_t kMost = std::numeric_limits<std::int64_t>::max();
    x.shift = h.integer("shift", -kMost, kMost);
    x.tile = h.integer("tile", 0, kMost);
    x.row = h.integer("row", -1, kMost);  // a row of O, whatever tensor the evidence shows
    x.first_key = h.integer("first_key", -1, kMost);
    x.last_key = h.integer("last_key", -1, kMost);
    x.logit = h.value("logit");
    x.ratio = h.ratio("ratio");
    x.baseline = h.ratio("baseline");
  }
  if (!o.has("original")) return e;
  read_values(o.obj("original"), &e.original.emplace());
  const std::int64_t rows = e.rows();
  for (const json &r : o.array("differing_rows")) {
    if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() >= rows ||
        (!e.differing_rows.empty() && r.get<std::int64_t>() <= e.differing_rows.back()))
      fail(o.where() + "\"differing_rows\" are not ascending rows of the tensor");
    e.differing_rows.push_back(r.get<std::int64_t>());
  }
  if (o.has("marked_row")) e.marked_row = o.integer("marked_row", 0, rows - 1);
  return e;
}

/// The exact inputs of a case (an "inputs" or "failing_case" object); `failure` names it in errors.
Case read_case(const Obj &in, const std::string &failure) {
  Case c;
  c.spec = read_spec(in.obj("spec"));
  for (const char *t : {"q", "k", "v"})
    if (!in.has(t)) fail(failure + " (\"" + t + "\" is missing)");
  c.q = in.values("q");
  c.k = in.values("k");
  c.v = in.values("v");
  c.dout = in.values("dout");
  const Shape &s = c.spec.shape;
  check_size(in, "q", c.q.size(), detail::numel(detail::q_shape(s)));
  check_size(in, "k", c.k.size(), detail::numel(detail::k_shape(s)));
  check_size(in, "v", c.v.size(), detail::numel(detail::v_shape(s)));
  if (!c.dout.empty()) check_size(in, "dout", c.dout.size(), detail::numel(detail::o_shape(s)));
  return c;
}

Finding read_finding(const Obj &o) {
  Finding f;
  f.kind = o.name<Finding::Kind, kFindingKinds>("kind", finding_kind_id);
  f.tensor = o.str("tensor");
  f.name = o.str("name");
  const json &index = o.array("index");
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (!index[d].is_number_integer() || index[d].get<std::int64_t>() < 0)
      fail(o.where() + "\"index\"[" + std::to_string(d) + "] is not an index ≥ 0");
    f.index.push_back(index[d].get<std::int64_t>());
  }
  if (o.has("got")) f.got = o.value("got");
  if (o.has("exact")) f.exact = o.value("exact");
  if (o.has("bound")) f.bound = o.value("bound");
  f.empty_row = o.boolean("empty_row");
  if (o.has("what")) f.what = o.str("what");
  return f;
}

/// outcome_json read back (without the failing case, which the counterexample holds beside it).
Outcome read_outcome(const Obj &out) {
  Outcome r;
  r.verdict = out.name<Verdict, kVerdicts>("verdict", verdict_id);
  r.step = read_step(out, "step");
  r.detail = out.str("detail");
  if (out.has("finding")) r.finding = read_finding(out.obj("finding"));
  r.worst_ratio = out.ratio("worst_ratio");
  r.worst = out.str("worst");
  return r;
}

Counterexample read_counterexample(const Obj &o, std::size_t number) {
  const std::string failure = "failure " + std::to_string(number);
  Counterexample c;
  if (!o.has("inputs")) fail(failure + " has no inputs");
  c.minimal = read_case(o.obj("inputs"), failure + " has no inputs");
  // A shrunk case repeats slice 0 along each broadcast (Case::broadcast_values); a property's derived failing_case
  // need not (Case::problem sends it materialized).
  if (!c.minimal.broadcast_consistent())
    fail(o.obj("inputs").where() + "a broadcast input's values differ along its broadcast dimension (each slice "
         "must repeat slice 0)");
  c.outcome = read_outcome(o.obj("outcome"));
  if (o.has("failing_case")) {
    c.outcome.failing_case = read_case(o.obj("failing_case"), failure + " has an incomplete failing_case");
    c.outcome.failing_scale = o.value("failing_scale");
    c.outcome.failing_what = o.str("failing_what");
  }
  c.original = read_spec(o.obj("original"));
  c.found_after = o.count("found_after");
  c.shrink_steps = o.count("shrink_steps");
  c.shrinks_tried = o.count("shrinks_tried");
  c.seed = o.seed("seed");
  c.reproduce = o.str("reproduce");
  if (o.has("corpus_entry")) c.corpus_entry = o.str("corpus_entry");
  const json &explained = o.array("explained_by");
  for (std::size_t n = 0; n < explained.size(); ++n) {
    const Obj e(explained[n], o.path() + ".explained_by[" + std::to_string(n) + "]");
    c.explained_by.push_back({e.str("declaration"), e.str("meaning")});
  }
  if (o.has("passes_under")) {
    const json &under = o.array("passes_under");
    for (std::size_t n = 0; n < under.size(); ++n) {
      if (!under[n].is_string()) fail(o.where() + "passes_under[" + std::to_string(n) + "] is not a string");
      c.passes_under.push_back(under[n].get<std::string>());
    }
  }
  if (o.has("evidence")) c.evidence = read_evidence(o.obj("evidence"));
  return c;
}

PrecisionProfile read_profile(const Obj &prof, std::int64_t version) {
  PrecisionProfile p;
  p.storage = prof.name<Dtype, kDtypes>("storage", dtype_name);
  p.accumulate = prof.name<Dtype, kDtypes>("accumulation", dtype_name);
  p.round_p = prof.boolean("round_p");
  if (version < 2) {  // version 1: one accumulation dtype for everything, a float32 LSE
    p.accumulate_qk = p.accumulate;
    return p;
  }
  p.accumulate_qk = prof.name<Dtype, kDtypes>("accumulation_qk", dtype_name);
  p.rowsum_rounded_p = prof.boolean("rowsum_rounded_p");
  p.grad_per_head = prof.boolean("grad_per_head");
  p.lse = prof.name<Dtype, kDtypes>("lse", dtype_name);
  // Added in version 2 without a version change: absent means accurate.
  if (prof.has("tanh")) p.tanh = prof.name<Tanh, kApprox>("tanh", [](Tanh t) { return approximation_name(t); });
  if (prof.has("exp")) p.exp = prof.name<Exp, kApprox>("exp", [](Exp e) { return approximation_name(e); });
  if (prof.has("fp32_precision"))
    p.fp32_precision = prof.name<Fp32Precision, kFp32Precisions>("fp32_precision", fp32_precision_name);
  return p;
}

/// The contract a version-1 run was checked against: version 1 stored only its precision profile (one accumulation
/// dtype, P rounded or not, GQA gradients never rounded per head, a float32 LSE), which these keys state; a key whose
/// automatic value (storage-dependent) already gives it stays automatic.
KernelContract contract_of_v1(const PrecisionProfile &p, Dtype dtype) {
  const bool narrow = dtype != Dtype::f32;  // what Allow::automatic resolves to (KernelContract::profile)
  const auto allow = [narrow](bool value) { return value == narrow ? Allow::automatic : value ? Allow::yes : Allow::no; };
  KernelContract c;
  c.accumulate_qk = c.accumulate_pv = p.accumulate;
  c.round_p = allow(p.round_p);
  c.grad_per_head = allow(false);
  return c;
}

/// coverage_json read back: every key a corner id, every count a non-negative integer.
Coverage read_coverage(const Obj &o) {
  Coverage c;
  for (const auto &[key, counts] : {std::pair{"decided", &c.decided}, std::pair{"declined", &c.declined}}) {
    const Obj m = o.obj(key);
    for (const auto &[id, n] : m.self().items()) {
      const std::optional<std::size_t> i = corner_index(id);
      if (!i) fail(m.where() + "\"" + id + "\" is not a corner of the coverage model (spec/SPEC.md §7.4)");
      (*counts)[*i] = m.count(id.c_str());
    }
  }
  c.backward = o.count("backward");
  return c;
}

Run read_run(const Obj &o, std::int64_t version, std::size_t *failures) {
  Run run;
  RunReport &r = run.report;
  r.kernel = o.str("kernel");
  r.dtype = o.name<Dtype, kDtypes>("dtype", dtype_name);
  // The contract is the one source of the precision profile; "profile" is derived and must agree with it.
  const PrecisionProfile stored = read_profile(o.obj("profile"), version);
  if (version >= 2) {
    const std::string text = o.str("contract");
    try {
      r.contract = parse_contract(text);
    } catch (const ContractError &e) {
      fail(o.where() + "\"contract\" does not parse: " + detail::first_line(e.what()));
    }
  } else {
    r.contract = contract_of_v1(stored, r.dtype);
  }
  if (stored != r.precision())
    fail(o.where() + "\"profile\" (" + stored.describe() + ") is not what its contract gives " +
         std::string(dtype_name(r.dtype)) + " (" + r.precision().describe() +
         "): the file was edited; write it again with attncheck");
  const Obj src = o.obj("source");
  run.source.kind = src.name<KernelSource::Kind, kKinds>("kind", kind_name);
  run.source.location = src.str("location");
  run.plan = o.str("run_profile");
  r.seed = o.seed("seed");
  r.cases = o.count("cases");
  const json &props = o.array("properties");
  for (std::size_t n = 0; n < props.size(); ++n) {
    const Obj p(props[n], o.path() + ".properties[" + std::to_string(n) + "]");
    PropertyReport pr;
    pr.id = p.str("id");
    pr.verdict = p.name<Verdict, kVerdicts>("verdict", verdict_id);
    if (version >= 2) pr.tier = p.name<Tier, kTiers>("tier", tier_name);
    pr.cases = p.count("cases");
    pr.unsupported = p.count("unsupported");
    pr.undecided = p.count("undecided");
    pr.worst_ratio = p.ratio("worst_ratio");
    pr.worst = p.str("worst");
    pr.budget_exhausted = p.boolean("budget_exhausted");
    if (p.has("skipped")) pr.skipped = p.count("skipped");  // added in version 2, without a version change
    if (p.has("interrupted")) pr.interrupted = p.boolean("interrupted");
    if (p.has("coverage")) pr.coverage = read_coverage(p.obj("coverage"));  // added to version 2 later: absent, no counts
    if (p.has("targeted")) {  // added to version 2 later: absent, no targeted phase
      const Obj t = p.obj("targeted");
      pr.targeted = {.cases = t.count("cases"), .declined = t.count("declined"), .from = t.ratio("from"),
                     .to = t.ratio("to")};
    }
    if (p.has("reference")) {  // added to version 2 later: absent, no counts
      const Obj f = p.obj("reference");
      constexpr std::int64_t kMost = std::int64_t{1} << 53;  // exact in a JavaScript reader
      pr.reference = {.fast_elements = f.integer("fast_elements", 0, kMost),
                      .mpfr_elements = f.integer("mpfr_elements", 0, kMost),
                      .confirmations = f.integer("confirmations", 0, kMost)};
    }
    if (p.has("corpus")) {  // a run that replayed a corpus (check --corpus)
      const Obj c = p.obj("corpus");
      pr.corpus = {.replayed = c.count("replayed"), .passed = c.count("passed")};
      if (pr.corpus.passed > pr.corpus.replayed) fail(c.where() + "\"passed\" is more than \"replayed\"");
    }
    pr.seed = p.seed("seed");
    pr.note = p.str("note");
    pr.formula = p.str("formula");
    pr.summary = p.str("summary");
    if (p.has("counterexample")) pr.counterexample = read_counterexample(p.obj("counterexample"), ++*failures);
    if ((pr.verdict == Verdict::fail || pr.verdict == Verdict::warn) && !pr.counterexample)
      fail(p.where() + "verdict " + std::string(verdict_id(pr.verdict)) + " without a counterexample");
    r.properties.push_back(std::move(pr));
  }
  return run;
}

/// Seconds to the millisecond: timing figures are for people, and round-trip exactly in that form.
double milliseconds(double seconds) { return std::round(seconds * 1000) / 1000; }

/// The top-level `timing` object: where each run's and property's time went. The only part of report.json that
/// depends on the machine (tools that compare reports leave it out).
ojson timing_json(const Document &doc) {
  ojson runs = ojson::array();
  double seconds = 0, kernel_seconds = 0;
  for (const Run &run : doc.runs) {
    ojson props = ojson::array();
    double run_seconds = 0, run_kernel = 0;
    for (const PropertyReport &p : run.report.properties) {  // sums of the rounded figures: they read back the same
      const double wall = milliseconds(p.timing.seconds), kernel = milliseconds(p.timing.kernel_seconds);
      props.push_back(ojson{{"property", p.id}, {"seconds", wall}, {"kernel_seconds", kernel}});
      run_seconds += wall;
      run_kernel += kernel;
    }
    runs.push_back(ojson{{"kernel", run.report.kernel},
                         {"dtype", dtype_name(run.report.dtype)},
                         {"seconds", milliseconds(run_seconds)},
                         {"kernel_seconds", milliseconds(run_kernel)},
                         {"properties", std::move(props)}});
    seconds += run_seconds;
    kernel_seconds += run_kernel;
  }
  return ojson{{"seconds", milliseconds(seconds)},
               {"kernel_seconds", milliseconds(kernel_seconds)},
               {"runs", std::move(runs)}};
}

/// Reads the `timing` object back into the runs' properties (absent: written before it existed, all zero).
void read_timing(const Obj &top, Document &doc) {
  if (!top.has("timing")) return;
  const Obj timing(top.at("timing"), "timing");
  const json &runs = timing.array("runs");
  if (runs.size() != doc.runs.size()) fail("timing.runs has " + std::to_string(runs.size()) + " runs, runs has " +
                                           std::to_string(doc.runs.size()));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const std::string path = "timing.runs[" + std::to_string(r) + "]";
    const Obj run(runs[r], path);
    const json &props = run.array("properties");
    std::vector<PropertyReport> &into = doc.runs[r].report.properties;
    if (props.size() != into.size()) fail(run.where() + "properties do not match the run's");
    for (std::size_t n = 0; n < props.size(); ++n) {
      const Obj p(props[n], path + ".properties[" + std::to_string(n) + "]");
      if (p.str("property") != into[n].id) fail(p.where() + "is not the run's property " + into[n].id);
      into[n].timing = {.seconds = p.seconds("seconds"), .kernel_seconds = p.seconds("kernel_seconds")};
    }
  }
}

}  // namespace

std::string to_json(const Document &doc) {
  ojson runs = ojson::array(), failures = ojson::array();
  std::size_t number = 0;
  for (std::size_t ri = 0; ri < doc.runs.size(); ++ri) {
    const Run &run = doc.runs[ri];
    const RunReport &r = run.report;
    ojson props = ojson::array();
    for (std::size_t pi = 0; pi < r.properties.size(); ++pi) {
      const PropertyReport &p = r.properties[pi];
      ojson pj = property_json(p);
      if (p.counterexample) {
        ++number;
        pj["counterexample"] = counterexample_json(*p.counterexample, number);
        failures.push_back(ojson{{"failure", number},
                                 {"run", ri},
                                 {"kernel", r.kernel},
                                 {"dtype", dtype_name(r.dtype)},
                                 {"property", p.id},
                                 {"verdict", verdict_id(p.verdict)}});
      }
      props.push_back(std::move(pj));
    }
    runs.push_back(ojson{{"kernel", r.kernel},
                         {"dtype", dtype_name(r.dtype)},
                         {"verdict", verdict_id(r.verdict(doc.strict))},
                         {"contract", r.contract.describe()},
                         {"profile", profile_json(r.precision())},
                         {"source", ojson{{"kind", kind_name(run.source.kind)}, {"location", run.source.location}}},
                         {"run_profile", run.plan},
                         {"seed", std::to_string(r.seed)},
                         {"cases", r.cases},
                         {"coverage", run_coverage_json(r.coverage())},
                         {"properties", std::move(props)}});
  }
  ojson j{{"format", kFormat},
          {"version", kSchemaVersion},
          {"tool_version", doc.tool_version},
          {"strict", doc.strict}};
  if (doc.shard)
    j["shard"] = ojson{{"index", doc.shard->index}, {"count", doc.shard->count}, {"properties", doc.shard->properties}};
  j["verdict"] = verdict_id(doc.verdict());
  j["failures"] = std::move(failures);
  j["runs"] = std::move(runs);
  j["timing"] = timing_json(doc);
  // Invalid UTF-8 in a kernel's strings becomes U+FFFD rather than an exception.
  return j.dump(kIndent, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string content_of(std::string_view report_json) {
  ojson j;
  try {
    j = ojson::parse(report_json.begin(), report_json.end());
  } catch (const ojson::exception &e) {
    fail(std::string("not JSON: ") + e.what());
  }
  if (j.is_object()) j.erase("timing");
  return j.dump(kIndent, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Document from_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error &e) {
    fail("truncated or malformed JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception &) {  // found by fuzz/report_json_fuzz.cpp: out_of_range for 1e999-style numbers
    fail("a number out of range (a JSON number no double holds)");
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != kFormat)
    fail("not an attncheck report (no \"format\": \"attncheck-report\")");
  const Obj top(j, "");
  const std::int64_t version = top.integer("version", 1, std::numeric_limits<int>::max());
  if (version > kSchemaVersion)
    fail("version " + std::to_string(version) + " is newer than this attncheck reads (" +
         std::to_string(kSchemaVersion) + "); update attncheck");
  Document doc;
  doc.tool_version = top.str("tool_version");
  if (version >= 2) doc.strict = top.boolean("strict");
  if (top.has("shard")) {
    const Obj sh(top.at("shard"), "shard");
    Shard shard;
    shard.count = static_cast<int>(sh.integer("count", 1, kMaxShards));
    shard.index = static_cast<int>(sh.integer("index", 1, shard.count));
    const json &ids = sh.array("properties");
    for (std::size_t n = 0; n < ids.size(); ++n) {
      if (!ids[n].is_string()) fail("shard.properties[" + std::to_string(n) + "] is not a string");
      shard.properties.push_back(ids[n].get<std::string>());
    }
    doc.shard = std::move(shard);
  }
  const json &runs = top.array("runs");
  std::size_t failures = 0;
  for (std::size_t n = 0; n < runs.size(); ++n)
    doc.runs.push_back(read_run(Obj(runs[n], "runs[" + std::to_string(n) + "]"), version, &failures));
  read_timing(top, doc);
  return doc;
}

// ---- corpus entries (spec/REPORT_SCHEMA.md, "Corpus entries") ----

namespace {
constexpr std::string_view kCorpusFormat = "attncheck-corpus-entry";
constexpr int kCorpusVersion = 1;
constexpr std::string_view kReportPrefix = "report.json: ";

/// The canonical case an entry's hash is taken of: kernel, dtype, property and the exact inputs, compact.
std::string canonical_case(std::string_view kernel, Dtype dtype, std::string_view property, const Case &minimal) {
  const ojson j{{"kernel", kernel},
                {"dtype", dtype_name(dtype)},
                {"property", property},
                {"inputs", case_json(minimal, minimal.spec.scale())}};
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

/// 128-bit FNV-1a of `s`, as 32 lowercase hex digits.
std::string fnv1a_128(std::string_view s) {
  using u128 = unsigned __int128;
  constexpr u128 kOffset = (u128{0x6c62272e07bb0142ull} << 64) | 0x62b821756295c58dull;
  constexpr u128 kPrime = (u128{1} << 88) | 0x13bu;
  u128 h = kOffset;
  for (const char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * kPrime;
  return fmt_hex128(h);
}
}  // namespace

std::string corpus_hash(std::string_view kernel, Dtype dtype, std::string_view property, const Case &minimal) {
  return fnv1a_128(canonical_case(kernel, dtype, property, minimal));
}

std::string to_corpus_json(const CorpusEntry &e) {
  ojson j{{"format", kCorpusFormat},
          {"version", kCorpusVersion},
          {"hash", corpus_hash(e.kernel, e.dtype, e.property, e.minimal)},
          {"kernel", e.kernel},
          {"dtype", dtype_name(e.dtype)},
          {"property", e.property},
          {"verdict", verdict_id(e.verdict)},
          {"tier", tier_name(e.tier)},
          {"contract", e.contract.describe()},
          {"source", ojson{{"kind", kind_name(e.source.kind)}, {"location", e.source.location}}},
          {"seed", std::to_string(e.seed)},
          {"reproduce", e.reproduce},
          {"outcome", outcome_json(e.outcome)},
          {"inputs", case_json(e.minimal, e.minimal.spec.scale())}};
  return j.dump(kIndent, ' ', false, ojson::error_handler_t::replace) + "\n";
}

CorpusEntry corpus_entry_from_json(std::string_view text) {
  try {
    json j;
    try {
      j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error &e) {
      fail("truncated or malformed JSON at byte " + std::to_string(e.byte));
    } catch (const json::exception &) {
      fail("a number out of range (a JSON number no double holds)");
    }
    if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
        j["format"].get<std::string>() != kCorpusFormat)
      fail("not an attncheck corpus entry (no \"format\": \"attncheck-corpus-entry\")");
    const Obj top(j, "");
    const std::int64_t version = top.integer("version", 1, std::numeric_limits<int>::max());
    if (version > kCorpusVersion)
      fail("version " + std::to_string(version) + " is newer than this attncheck reads (" +
           std::to_string(kCorpusVersion) + "); update attncheck");
    CorpusEntry e;
    e.kernel = top.str("kernel");
    e.dtype = top.name<Dtype, kDtypes>("dtype", dtype_name);
    e.property = top.str("property");
    e.verdict = top.name<Verdict, kVerdicts>("verdict", verdict_id);
    e.tier = top.name<Tier, kTiers>("tier", tier_name);
    try {
      e.contract = parse_contract(top.str("contract"));
    } catch (const ContractError &err) {
      fail("\"contract\" does not parse: " + detail::first_line(err.what()));
    }
    const Obj src = top.obj("source");
    e.source.kind = src.name<KernelSource::Kind, kKinds>("kind", kind_name);
    e.source.location = src.str("location");
    e.seed = top.seed("seed");
    e.reproduce = top.str("reproduce");
    e.outcome = read_outcome(top.obj("outcome"));
    e.minimal = read_case(top.obj("inputs"), "the entry has no inputs");
    if (e.minimal.spec.dtype != e.dtype)
      fail("inputs.spec: dtype " + std::string(dtype_name(e.minimal.spec.dtype)) + " is not the entry's " +
           std::string(dtype_name(e.dtype)));
    if (!e.minimal.broadcast_consistent())
      fail("inputs: a broadcast input's values differ along its broadcast dimension");
    e.hash = corpus_hash(e.kernel, e.dtype, e.property, e.minimal);
    if (top.str("hash") != e.hash)
      fail("\"hash\" is not the content hash of its case (" + e.hash + "): the file was edited");
    return e;
  } catch (const ReportError &err) {
    std::string_view what = err.what();
    if (what.starts_with(kReportPrefix)) what.remove_prefix(kReportPrefix.size());
    throw ReportError("corpus entry: " + std::string(what));
  }
}

}  // namespace attncheck::reporting
