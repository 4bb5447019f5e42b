// report.json's case: its spec (shape, mask, features, per-tensor layouts) and its exact inputs, each written and read
// back side by side (schema: spec/REPORT_SCHEMA.md).
#include "json_io.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attncheck::reporting::json_detail {

// ---- spec ----

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

namespace {

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

}  // namespace

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

// ---- case ----

void check_size(const Obj &o, const char *what, std::size_t got, std::size_t want) {
  if (got != want)
    fail(o.where() + "\"" + what + "\" has " + std::to_string(got) + " values, its shape needs " +
         std::to_string(want));
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

}  // namespace attncheck::reporting::json_detail
