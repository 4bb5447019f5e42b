// The ABI 1.2 features in the reports (SPEC.md §2.7, REPORT_SCHEMA.md): a counterexample's spec keeps every
// FeatureSpec field through report.json exactly; malformed feature objects are one-line errors naming the field; a
// real check of a planted feature bug round-trips with its evidence; summary.md's Features block tells checked from
// declined features.
#include "attncheck/check.h"
#include "attncheck/error_model.h"
#include "attncheck/features.h"
#include "attncheck/report_io.h"
#include "report_support.h"
#include "feature_kernels.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace attncheck;
using attncheck::test::error_of;
using attncheck::test::evidence_at;
using namespace attncheck::reporting;

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::uint32_t kEightFeatures = ATTNCHECK_FEATURE_WINDOW | ATTNCHECK_FEATURE_SOFTCAP |
                                         ATTNCHECK_FEATURE_ALIBI | ATTNCHECK_FEATURE_SINKS | ATTNCHECK_FEATURE_MASK |
                                         ATTNCHECK_FEATURE_VARLEN | ATTNCHECK_FEATURE_PAGED |
                                         ATTNCHECK_FEATURE_DROPOUT;

/// Every field of FeatureSpec away from its default: all features, a one-sided window, a float32 softcap, an
/// additive mask per batch and head, pages of 17 keys, dropout, top-left rows, FP8 e5m2 and a seed above 2⁶³.
FeatureSpec every_field() {
  FeatureSpec f;
  f.bits = kEightFeatures | ATTNCHECK_FEATURE_FP8;
  f.window_left = 3;
  f.window_right = 0;
  f.softcap = 0x1.8p+4;  // 24
  f.mask_kind = MaskKind::additive;
  f.mask_per_batch = true;
  f.mask_per_head = true;
  f.mask_keep = 0x1.8p-1;  // 0.75
  f.page_size = 17;
  f.dropout_p = static_cast<double>(0.1f);
  f.top_left = true;
  f.fp8 = Fp8::e5m2;
  f.seed = 0xfedcba9876543210ULL;
  return f;
}

/// A case of a small GQA shape with the given features, its values all different (and dout drawn).
Case feature_case(const FeatureSpec &f) {
  Case c;
  c.spec.shape = {.B = 2, .Hq = 2, .Hkv = 1, .Lq = 3, .Lk = 5, .D = 2, .Dv = 3};
  c.spec.mask = Mask::causal;
  c.spec.layout = Layout::blhd;
  c.spec.family = Family::small_ints;
  c.spec.features = f;
  c.resize_values(true);
  std::vector<double> v = c.flat();
  for (std::size_t n = 0; n < v.size(); ++n) v[n] = 0.25 * static_cast<double>(n % 13) - 1.5;
  c.set_flat(v);
  return c;
}

/// A document of one run whose one property failed on `minimal` (shrunk from the same spec) and judged a copy of it.
Document document_of(const Case &minimal) {
  PropertyReport p;
  p.id = "window";
  p.formula = "f";
  p.summary = "s";
  p.verdict = Verdict::fail;
  p.cases = 1;
  Counterexample c;
  c.minimal = minimal;
  c.original = minimal.spec;
  c.outcome.verdict = Verdict::fail;
  c.outcome.step = Step::values;
  c.outcome.detail = "O[0,0,0,0]: got 1, exact 0";
  c.outcome.worst_ratio = INFINITY;
  Case judged = minimal;
  judged.k[0] += 1;
  c.outcome.failing_case = judged;
  c.outcome.failing_scale = 0x1p-1;
  c.outcome.failing_what = "k + 1";
  p.counterexample = c;
  Document doc;
  doc.tool_version = "t";
  Run run;
  run.source = {KernelSource::Kind::builtin, ""};
  run.plan = "quick";
  run.report.kernel = "hand";
  run.report.contract = parse_contract("features=window+softcap+alibi+sinks+mask+varlen+paged+dropout");
  run.report.properties = {p};
  doc.runs.push_back(std::move(run));
  return doc;
}


std::string with_features(const std::string &json, void (*edit)(ojson &features)) {
  ojson j = ojson::parse(json);
  edit(j["runs"][0]["properties"][0]["counterexample"]["inputs"]["spec"]["features"]);
  return j.dump(2);
}

/// A real check of `bug`'s kernel under the contract it declares, with evidence.
Run checked(support::FeatureBug bug, std::vector<std::string> properties, const std::string &contract = "") {
  const attncheck_kernel &k = support::feature_kernel(bug);
  CheckOptions opt;
  opt.cases = 20;
  opt.properties = std::move(properties);
  opt.contract = parse_contract(contract.empty() ? support::feature_contract(bug) : contract);
  opt.evidence = true;  // the engine gathers each counterexample's evidence
  Run run;
  run.plan = "quick";
  run.report = check(k, opt);
  return run;
}

Document one_run(Run run) {
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(std::move(run));
  return doc;
}

}  // namespace

// ---- the features object of a spec ----

TEST_CASE("a case whose spec sets every FeatureSpec field reads back equal from report.json") {
  const Case c = feature_case(every_field());
  const Document doc = document_of(c);
  const std::string json = to_json(doc);
  // The features object, as the schema spells it.
  const ojson spec = ojson::parse(json)["runs"][0]["properties"][0]["counterexample"]["inputs"]["spec"];
  REQUIRE(spec.contains("features"));
  CHECK(parse_feature_list(spec["features"]["features"].get<std::string>()) == c.spec.features.bits);
  CHECK(json.find("\"seed\": \"18364758544493064720\"") != std::string::npos);
  CHECK(json.find("\"align\": \"top-left\"") != std::string::npos);
  CHECK(json.find("\"softcap\": \"0x1.8p+4\"") != std::string::npos);
  CHECK(json.find("\"mask\": \"additive\"") != std::string::npos);
  CHECK(json.find("\"mask_per_batch\": true") != std::string::npos);
  CHECK(json.find("\"mask_per_head\": true") != std::string::npos);
  CHECK(json.find("\"mask_keep\": \"0x1.8p-1\"") != std::string::npos);
  CHECK(json.find("\"page_size\": 17") != std::string::npos);
  CHECK(json.find("\"dropout_p\": \"0x1.99999ap-4\"") != std::string::npos);
  CHECK(json.find("\"fp8\": \"e5m2\"") != std::string::npos);

  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const Counterexample &b = *back.runs.at(0).report.properties.at(0).counterexample;
  CHECK(b.minimal.spec.features == c.spec.features);
  CHECK(b.minimal.spec == c.spec);
  CHECK(b.minimal.same_as(c));
  CHECK(b.original == c.spec);
  REQUIRE(b.outcome.failing_case.has_value());
  CHECK(b.outcome.failing_case->spec.features == c.spec.features);
  CHECK(b.outcome.failing_case->same_as(*doc.runs[0].report.properties[0].counterexample->outcome.failing_case));
  CHECK(back.runs.at(0).report.contract == doc.runs[0].report.contract);
}

TEST_CASE("a boolean mask with bytes other than 1 writes mask_bytes and reads it back, an additive one never") {
  FeatureSpec f = every_field();
  f.mask_kind = MaskKind::boolean;
  f.mask_bytes = true;
  const std::string json = to_json(document_of(feature_case(f)));
  CHECK(json.find("\"mask_bytes\": true") != std::string::npos);
  const Document back = from_json(json);
  CHECK(back.runs.at(0).report.properties.at(0).counterexample->minimal.spec.features == f);
  CHECK(to_json(document_of(feature_case(every_field()))).find("\"mask_bytes\"") == std::string::npos);  // additive
}

TEST_CASE("each feature alone round-trips with only its own fields") {
  for (const std::uint32_t bit : kAllFeatures) {
    FeatureSpec full = every_field();
    FeatureSpec f;  // the defaults, then this feature's settings only
    f.bits = bit;
    f.seed = 7;
    if (bit == ATTNCHECK_FEATURE_WINDOW) f.window_left = full.window_left, f.window_right = full.window_right;
    if (bit == ATTNCHECK_FEATURE_SOFTCAP) f.softcap = full.softcap;
    if (bit == ATTNCHECK_FEATURE_MASK) {
      f.mask_kind = full.mask_kind;
      f.mask_per_batch = true;
      f.mask_keep = 0;
    }
    if (bit == ATTNCHECK_FEATURE_PAGED) f.page_size = 1;
    if (bit == ATTNCHECK_FEATURE_DROPOUT) f.dropout_p = 0.5;
    if (bit == ATTNCHECK_FEATURE_FP8) f.fp8 = Fp8::e5m2;
    INFO(feature_name(bit));
    const Case c = feature_case(f);
    const std::string json = to_json(document_of(c));
    const Document back = from_json(json);
    CHECK(back.runs.at(0).report.properties.at(0).counterexample->minimal.spec.features == f);
    CHECK(to_json(back) == json);
    // No other feature's field is written.
    for (const char *key : {"\"window\"", "\"softcap\"", "\"mask_keep\"", "\"page_size\"", "\"dropout_p\"",
                            "\"align\"", "\"fp8\""}) {
      const bool own = (bit == ATTNCHECK_FEATURE_WINDOW && std::string(key) == "\"window\"") ||
                       (bit == ATTNCHECK_FEATURE_SOFTCAP && std::string(key) == "\"softcap\"") ||
                       (bit == ATTNCHECK_FEATURE_MASK && std::string(key) == "\"mask_keep\"") ||
                       (bit == ATTNCHECK_FEATURE_PAGED && std::string(key) == "\"page_size\"") ||
                       (bit == ATTNCHECK_FEATURE_DROPOUT && std::string(key) == "\"dropout_p\"") ||
                       (bit == ATTNCHECK_FEATURE_FP8 && std::string(key) == "\"fp8\"");
      INFO(key);
      CHECK((json.find(std::string(key) + ":") != std::string::npos) == own);
    }
  }
}

TEST_CASE("a spec without features has no features object and reads back without features") {
  const Case c = feature_case(FeatureSpec{});
  const std::string json = to_json(document_of(c));
  CHECK(json.find("\"features\"") == std::string::npos);
  const Document back = from_json(json);
  CHECK_FALSE(back.runs.at(0).report.properties.at(0).counterexample->minimal.spec.features.active());
  CHECK(back.runs.at(0).report.properties.at(0).counterexample->minimal.spec == c.spec);
}

TEST_CASE("malformed feature objects are rejected with one line naming the field") {
  const std::string json = to_json(document_of(feature_case(every_field())));
  REQUIRE(error_of(json).empty());
  struct Bad {
    const char *what;
    void (*edit)(ojson &);
    const char *field;  ///< what the message must name
  };
  const std::vector<Bad> bad = {
      {"an unknown feature name", [](ojson &f) { f["features"] = "window,teleport"; }, "unknown feature 'teleport'"},
      {"an unknown feature joined by +", [](ojson &f) { f["features"] = "softcap+warp"; }, "unknown feature 'warp'"},
      {"a feature list that is not a string", [](ojson &f) { f["features"] = 3; }, "\"features\" is not a string"},
      {"no feature list", [](ojson &f) { f.erase("features"); }, "\"features\" is missing"},
      {"a window of one side", [](ojson &f) { f["window"] = ojson::array({3}); }, "\"window\""},
      {"a window of three", [](ojson &f) { f["window"] = ojson::array({3, 0, 1}); }, "\"window\""},
      {"a window as text", [](ojson &f) { f["window"] = "3,0"; }, "\"window\""},
      {"a window of fractions", [](ojson &f) { f["window"] = ojson::array({1.5, 0}); }, "\"window\""},
      {"a window side below -1", [](ojson &f) { f["window"] = ojson::array({-2, 0}); }, "\"window\""},
      {"no window", [](ojson &f) { f.erase("window"); }, "\"window\" is missing"},
      {"a zero softcap", [](ojson &f) { f["softcap"] = "0x0p+0"; }, "\"softcap\""},
      {"a negative softcap", [](ojson &f) { f["softcap"] = "-0x1p+3"; }, "\"softcap\""},
      {"an infinite softcap", [](ojson &f) { f["softcap"] = "inf"; }, "\"softcap\""},
      {"a NaN softcap", [](ojson &f) { f["softcap"] = "nan"; }, "\"softcap\""},
      {"a softcap that is not a hex string", [](ojson &f) { f["softcap"] = 30; }, "\"softcap\""},
      {"dropout_p 0", [](ojson &f) { f["dropout_p"] = "0x0p+0"; }, "\"dropout_p\""},
      {"dropout_p 1", [](ojson &f) { f["dropout_p"] = "0x1p+0"; }, "\"dropout_p\""},
      {"dropout_p above 1", [](ojson &f) { f["dropout_p"] = "0x1.8p+0"; }, "\"dropout_p\""},
      {"a negative dropout_p", [](ojson &f) { f["dropout_p"] = "-0x1p-2"; }, "\"dropout_p\""},
      {"a NaN dropout_p", [](ojson &f) { f["dropout_p"] = "nan"; }, "\"dropout_p\""},
      {"align bottom-right", [](ojson &f) { f["align"] = "bottom-right"; }, "\"align\""},
      {"align misspelt", [](ojson &f) { f["align"] = "top_left"; }, "\"align\""},
      {"align not a string", [](ojson &f) { f["align"] = true; }, "\"align\""},
      {"an unknown mask kind", [](ojson &f) { f["mask"] = "none"; }, "\"mask\""},
      {"mask_keep above 1", [](ojson &f) { f["mask_keep"] = "0x1.8p+0"; }, "\"mask_keep\""},
      {"mask_per_head not a boolean", [](ojson &f) { f["mask_per_head"] = 1; }, "\"mask_per_head\""},
      {"mask_bytes on an additive mask", [](ojson &f) { f["mask_bytes"] = true; }, "\"mask_bytes\""},
      {"a page size of 0", [](ojson &f) { f["page_size"] = 0; }, "\"page_size\""},
      {"a seed that is not decimal", [](ojson &f) { f["seed"] = "0x10"; }, "\"seed\""},
      {"an unknown FP8 format", [](ojson &f) { f["fp8"] = "e3m4"; }, "\"fp8\""},
  };
  for (const Bad &b : bad) {
    INFO(b.what);
    const std::string message = error_of(with_features(json, b.edit));
    INFO(message);
    CHECK(message.starts_with("report.json: "));
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.find(b.field) != std::string::npos);
    CHECK(message.find("spec.features: ") != std::string::npos);  // where it is
  }
}

// ---- the layouts object of a spec ----

namespace {
/// feature_case without features, with k and v expanded on the batch, v transposed, out padded, lse blhd and dout
/// expanded on its heads in blhd.
Case layouts_case() {
  Case c = feature_case(FeatureSpec{});
  TensorLayouts &t = c.spec.layouts;
  t[Operand::k].broadcast = t[Operand::v].broadcast = Broadcast::batch;
  t[Operand::v].layout = Layout::transposed;
  t[Operand::out].layout = Layout::padded;
  t[Operand::lse].layout = Layout::blhd;
  t[Operand::dout].layout = Layout::blhd;
  t[Operand::dout].broadcast = Broadcast::heads;
  c.broadcast_values();
  return c;
}

std::string with_layouts(const std::string &json, void (*edit)(ojson &layouts)) {
  ojson j = ojson::parse(json);
  edit(j["runs"][0]["properties"][0]["counterexample"]["inputs"]["spec"]["layouts"]);
  return j.dump(2);
}
}  // namespace

TEST_CASE("a case with per-tensor layouts and broadcasts reads back equal from report.json") {
  const Case c = layouts_case();
  const std::string json = to_json(document_of(c));
  const ojson l = ojson::parse(json)["runs"][0]["properties"][0]["counterexample"]["inputs"]["spec"]["layouts"];
  CHECK(l == ojson::parse(R"({"k": {"broadcast": "batch"}, "v": {"layout": "transposed", "broadcast": "batch"},
                              "out": {"layout": "padded"}, "lse": {"layout": "blhd"},
                              "dout": {"layout": "blhd", "broadcast": "heads"}})"));
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const Counterexample &b = *back.runs.at(0).report.properties.at(0).counterexample;
  CHECK(b.minimal.spec.layouts == c.spec.layouts);
  CHECK(b.minimal.same_as(c));
  // The judged case (k changed in one batch entry) is a property's derived case: it need not repeat slice 0.
  REQUIRE(b.outcome.failing_case.has_value());
  CHECK_FALSE(b.outcome.failing_case->broadcast_consistent());
  // Without layouts of their own, no layouts object is written.
  CHECK(to_json(document_of(feature_case(FeatureSpec{}))).find("\"layouts\"") == std::string::npos);
}

TEST_CASE("malformed layouts objects are rejected with one line naming what is wrong") {
  const std::string json = to_json(document_of(layouts_case()));
  REQUIRE(error_of(json).empty());
  struct Bad {
    const char *what;
    void (*edit)(ojson &);
    const char *says;
  };
  const std::vector<Bad> bad = {
      {"an unknown tensor", [](ojson &l) { l["dq"] = {{"layout", "bhld"}}; }, "\"dq\" is not a tensor"},
      {"an unknown layout", [](ojson &l) { l["q"] = {{"layout", "hbld"}}; }, "\"layout\""},
      {"an unknown broadcast", [](ojson &l) { l["q"] = {{"broadcast", "rows"}}; }, "\"broadcast\""},
      {"a broadcast output", [](ojson &l) { l["out"]["broadcast"] = "batch"; }, "an output is never sent with stride 0"},
      {"a broadcast LSE", [](ojson &l) { l["lse"]["broadcast"] = "heads"; }, "an output is never sent with stride 0"},
      {"a transposed LSE", [](ojson &l) { l["lse"]["layout"] = "transposed"; }, "no transposed layout"},
      {"layouts not an object", [](ojson &l) { l = ojson::array(); }, "layouts: is not an object"},
      {"a broadcast the values do not repeat", [](ojson &l) { l["q"] = {{"broadcast", "batch"}}; },
       "differ along its broadcast dimension"},
  };
  for (const Bad &b : bad) {
    INFO(b.what);
    const std::string message = error_of(with_layouts(json, b.edit));
    INFO(message);
    CHECK(message.starts_with("report.json: "));
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.find(b.says) != std::string::npos);
  }
}

// ---- real checks of feature kernels ----

TEST_CASE("a planted feature bug's report.json round-trips byte for byte with its features and evidence") {
  const Document doc = one_run(checked(support::FeatureBug::window_right_off_by_one, {"window"}));
  const PropertyReport &p = doc.runs[0].report.properties.at(0);
  REQUIRE(p.verdict == Verdict::fail);
  REQUIRE(p.counterexample.has_value());
  CHECK((p.counterexample->minimal.spec.features.bits & ATTNCHECK_FEATURE_WINDOW) != 0);
  const std::string json = to_json(doc);
  CHECK(json.find("\"window\": [") != std::string::npos);
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const Counterexample &b = *back.runs[0].report.properties.at(0).counterexample;
  CHECK(b.minimal.same_as(p.counterexample->minimal));
  CHECK(b.original == p.counterexample->original);
  // Its evidence: the tensor the failure is in, with an element beyond its bound.
  const Evidence &e = *evidence_at(back.runs[0], 0);
  CHECK(e.call_error.empty());
  const std::int64_t w = e.worst_index();
  REQUIRE(w >= 0);
  CHECK(error_ratio(e.got[static_cast<std::size_t>(w)], e.exact[static_cast<std::size_t>(w)],
                    e.bound[static_cast<std::size_t>(w)]) > 1);
}

TEST_CASE("checking a feature kernel twice gives byte-identical report.json") {
  const auto twice = [] {
    return content_of(to_json(one_run(checked(support::FeatureBug::alibi_reversed_slopes, {"alibi", "sinks"}))));
  };
  const std::string a = twice();
  CHECK(a == twice());
}

TEST_CASE("summary.md tells the checked features from the declined ones") {
  Document doc = one_run(checked(support::FeatureBug::none, {"window", "softcap", "accuracy"}, "features=softcap"));
  const RunReport &r = doc.runs[0].report;
  REQUIRE(r.properties.size() == 3);
  CHECK(r.properties[0].tier == Tier::off);
  CHECK(r.properties[0].note.starts_with("declined: the kernel's contract does not declare features=window"));
  CHECK(r.properties[1].verdict == Verdict::pass);
  const std::string md = to_markdown(doc);
  INFO(md);
  CHECK(md.find("\n**Features**\n\n- features\\_correct f32: checked: softcap pass (" + std::to_string(r.properties[1].cases) +
                " cases); declined: window\n") != std::string::npos);
  // A declined feature property round-trips as off with its note.
  const Document back = from_json(to_json(doc));
  CHECK(back.runs[0].report.properties[0].tier == Tier::off);
  CHECK(back.runs[0].report.properties[0].note == r.properties[0].note);
  CHECK(to_markdown(back) == md);
}

TEST_CASE("a run without feature properties has no Features block in summary.md") {
  const Document doc = one_run(checked(support::FeatureBug::none, {"accuracy"}));
  CHECK(to_markdown(doc).find("**Features**") == std::string::npos);
}

TEST_CASE("a dropout counterexample carries evidence of the failing tensor") {
  // The reference of a dropout problem needs the mask the kernel returned (features.h: dropout_keep): the evidence
  // must run the kernel's forward before the reference, as the dropout property does.
  const Document doc = one_run(checked(support::FeatureBug::dropout_mask_not_reproducible, {"dropout"}));
  const PropertyReport &p = doc.runs[0].report.properties.at(0);
  REQUIRE(p.verdict == Verdict::fail);
  REQUIRE(evidence_at(doc.runs[0], 0).has_value());
  const Evidence &e = *evidence_at(doc.runs[0], 0);
  INFO(e.call_error);
  CHECK(e.call_error.empty());
  CHECK_FALSE(e.got.empty());
  CHECK(e.exact.size() == e.got.size());
}

TEST_CASE("the evidence probabilities of a feature counterexample are the case's: each row sums to one") {
  // ALiBi's biases are part of the logits: P_ij = exp(s_ij − LSE_i) with s_ij = scale·q·k − slope·|i' − j|.
  const Document doc = one_run(checked(support::FeatureBug::alibi_reversed_slopes, {"alibi"}));
  REQUIRE(doc.runs[0].report.properties.at(0).verdict == Verdict::fail);
  const Counterexample &c = *doc.runs[0].report.properties[0].counterexample;
  REQUIRE((c.minimal.spec.features.bits & ATTNCHECK_FEATURE_ALIBI) != 0);
  const Evidence &e = *evidence_at(doc.runs[0], 0);
  const Shape &s = c.minimal.spec.shape;
  REQUIRE(e.probabilities.size() == static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
  for (std::int64_t row = 0; row < s.B * s.Hq * s.Lq; ++row) {
    double sum = 0;
    for (std::int64_t j = 0; j < s.Lk; ++j) sum += e.probabilities[static_cast<std::size_t>(row * s.Lk + j)];
    INFO("row " << row);
    CHECK((sum == 0 || std::abs(sum - 1) < 1e-9));  // 0: a row that sees no key
  }
}
