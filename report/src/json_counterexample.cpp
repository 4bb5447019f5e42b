// report.json's counterexample and what it holds: the finding, the outcome, the evidence, each written and read back
// side by side (schema: spec/REPORT_SCHEMA.md).
#include "json_io.h"

#include "attncheck/error_model.h"  // error_ratio: the ratio an evidence element is written with

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attncheck::reporting::json_detail {

namespace {

// ---- finding and step (an outcome's) ----

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

std::optional<Step> read_step(const Obj &o, const char *key) {
  if (!o.has(key)) return std::nullopt;
  return o.name<Step, kSteps>(key, step_id);
}

// ---- evidence ----

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
    for (const Hint &h : e.hints) hints.push_back(hint_json(h));
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

}  // namespace

// ---- outcome ----

ojson hint_json(const Hint &h) {
  return ojson{{"kind", hint_kind_name(h.kind)},
               {"text", h.text},
               {"scale", hex(h.scale)},
               {"shift", h.shift},
               {"tile", h.tile},
               {"row", h.row},
               {"first_key", h.first_key},
               {"last_key", h.last_key},
               {"logit", hex(h.logit)},
               {"ratio", ratio_json(h.ratio)},
               {"baseline", ratio_json(h.baseline)}};
}

ojson explanation_json(const Explanation &e) { return ojson{{"declaration", e.declaration}, {"meaning", e.meaning}}; }

ojson outcome_json(const Outcome &o) {
  ojson j{{"verdict", verdict_id(o.verdict)},
          {"step", o.step ? ojson(step_id(*o.step)) : ojson(nullptr)},
          {"detail", o.detail}};
  if (o.finding) j["finding"] = finding_json(*o.finding);
  j["worst_ratio"] = ratio_json(o.worst_ratio);
  j["worst"] = o.worst;
  return j;
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

// ---- counterexample ----

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
    for (const Explanation &e : c.explained_by) ex.push_back(explanation_json(e));
    j["explained_by"] = std::move(ex);
  }
  if (!c.passes_under.empty()) j["passes_under"] = c.passes_under;  // only then, as explained_by
  if (c.evidence) j["evidence"] = evidence_json(*c.evidence);
  return j;
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

}  // namespace attncheck::reporting::json_detail
