// report.json: writer and strict reader (schema: spec/REPORT_SCHEMA.md).
//
// Bytes are deterministic: keys in a fixed order (ordered_json), exact values as C99 hex strings, ratios as JSON
// numbers in nlohmann's shortest round-trip form (or the string "inf"), seeds as decimal strings (uint64 does not
// survive a JavaScript reader). Fields derived from others (verdicts of runs, failure numbers, the worst evidence
// element, replay commands) are written for readers and recomputed on parse, so to_json(from_json(x)) == x.
#include "common.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <utility>

namespace attncheck::reporting {

namespace {

using detail::hex;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr int kSchemaVersion = 1;
constexpr std::string_view kFormat = "attncheck-report";
constexpr int kIndent = 2;

// ---- enum names (the machine ids; parsing tries every enumerator) ----

template <class E, int N, class NameFn>
bool parse_enum(std::string_view s, NameFn name, E *out) {
  for (int x = 0; x < N; ++x)
    if (name(static_cast<E>(x)) == s) return *out = static_cast<E>(x), true;
  return false;
}
constexpr int kVerdicts = 4, kSteps = 5, kMasks = 3, kLayouts = 4, kDtypes = 3, kKinds = 3;

// ---- writer ----

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
  return ojson{{"dtype", dtype_name(s.dtype)}, {"B", s.shape.B},   {"Hq", s.shape.Hq},
               {"Hkv", s.shape.Hkv},           {"Lq", s.shape.Lq}, {"Lk", s.shape.Lk},
               {"D", s.shape.D},               {"Dv", s.shape.Dv}, {"mask", mask_name(s.mask)},
               {"layout", layout_name(s.layout)}, {"family", family_name(s.family)}};
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
  return j;
}

ojson outcome_json(const Outcome &o) {
  return ojson{{"verdict", detail::verdict_id(o.verdict)},
               {"step", o.step ? ojson(step_id(*o.step)) : ojson(nullptr)},
               {"detail", o.detail},
               {"worst_ratio", ratio_json(o.worst_ratio)},
               {"worst", o.worst}};
}

ojson counterexample_json(const Counterexample &c, std::size_t number, const Evidence *ev) {
  const Case &m = c.minimal;
  ojson inputs{{"spec", spec_json(m.spec)}, {"scale", hex(default_scale(m.spec.shape.D))}};
  inputs["q"] = hex_array(m.q);
  inputs["k"] = hex_array(m.k);
  inputs["v"] = hex_array(m.v);
  inputs["dout"] = hex_array(m.dout);
  ojson j{{"failure", number},
          {"replay", detail::replay_command(number)},
          {"step", c.outcome.step ? ojson(step_id(*c.outcome.step)) : ojson(nullptr)},
          {"outcome", outcome_json(c.outcome)},
          {"inputs", std::move(inputs)},
          {"original", spec_json(c.original)},
          {"found_after", c.found_after},
          {"shrink_steps", c.shrink_steps},
          {"shrinks_tried", c.shrinks_tried},
          {"seed", std::to_string(c.seed)},
          {"reproduce", c.reproduce}};
  if (ev) j["evidence"] = evidence_json(*ev);
  return j;
}

ojson property_json(const PropertyReport &p) {
  return ojson{{"id", p.id},
               {"verdict", detail::verdict_id(p.verdict)},
               {"cases", p.cases},
               {"unsupported", p.unsupported},
               {"undecided", p.undecided},
               {"worst_ratio", ratio_json(p.worst_ratio)},
               {"worst", p.worst},
               {"budget_exhausted", p.budget_exhausted},
               {"seed", std::to_string(p.seed)},
               {"note", p.note},
               {"formula", p.formula},
               {"summary", p.summary}};
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

CaseSpec read_spec(const Obj &o) {
  CaseSpec s;
  s.dtype = o.name<Dtype, kDtypes>("dtype", dtype_name);
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;
  s.shape.B = o.integer("B", 1, kMaxDim);
  s.shape.Hq = o.integer("Hq", 1, kMaxDim);
  s.shape.Hkv = o.integer("Hkv", 1, kMaxDim);
  s.shape.Lq = o.integer("Lq", 1, kMaxDim);
  s.shape.Lk = o.integer("Lk", 1, kMaxDim);
  s.shape.D = o.integer("D", 1, kMaxDim);
  s.shape.Dv = o.integer("Dv", 1, kMaxDim);
  if (s.shape.Hq % s.shape.Hkv != 0) fail(o.where() + "Hq is not a multiple of Hkv");
  s.mask = o.name<Mask, kMasks>("mask", mask_name);
  s.layout = o.name<Layout, kLayouts>("layout", layout_name);
  s.family = o.name<Family, kFamilyCount>("family", family_name);
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

Evidence read_evidence(const Obj &o) {
  Evidence e;
  e.tensor = o.str("tensor");
  const json &shape = o.at("shape");
  if (!shape.is_array()) fail(o.where() + "\"shape\" is not an array");
  for (const json &d : shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0) fail(o.where() + "\"shape\" has a bad dimension");
    e.shape.push_back(d.get<std::int64_t>());
  }
  e.call_error = o.str("call_error");
  e.got = o.values("got");
  e.exact = o.values("exact");
  e.bound = o.values("bound");
  e.probabilities = o.values("probabilities");
  const std::size_t n = detail::numel(e.shape);
  if (!e.got.empty()) check_size(o, "got", e.got.size(), n);
  if (!e.exact.empty()) check_size(o, "exact", e.exact.size(), n);
  if (!e.bound.empty()) check_size(o, "bound", e.bound.size(), n);
  return e;
}

Counterexample read_counterexample(const Obj &o, std::size_t number, std::optional<Evidence> *evidence) {
  const std::string failure = "failure " + std::to_string(number);
  Counterexample c;
  if (!o.has("inputs")) fail(failure + " has no inputs");
  const Obj in = o.obj("inputs");
  c.minimal.spec = read_spec(in.obj("spec"));
  for (const char *t : {"q", "k", "v"})
    if (!in.has(t)) fail(failure + " has no inputs (\"" + t + "\" is missing)");
  c.minimal.q = in.values("q");
  c.minimal.k = in.values("k");
  c.minimal.v = in.values("v");
  c.minimal.dout = in.values("dout");
  const Shape &s = c.minimal.spec.shape;
  check_size(in, "q", c.minimal.q.size(), detail::numel(detail::q_shape(s)));
  check_size(in, "k", c.minimal.k.size(), detail::numel(detail::k_shape(s)));
  check_size(in, "v", c.minimal.v.size(), detail::numel(detail::v_shape(s)));
  if (!c.minimal.dout.empty()) check_size(in, "dout", c.minimal.dout.size(), detail::numel(detail::o_shape(s)));
  const Obj out = o.obj("outcome");
  c.outcome.verdict = out.name<Verdict, kVerdicts>("verdict", detail::verdict_id);
  c.outcome.step = read_step(out, "step");
  c.outcome.detail = out.str("detail");
  c.outcome.worst_ratio = out.ratio("worst_ratio");
  c.outcome.worst = out.str("worst");
  c.original = read_spec(o.obj("original"));
  c.found_after = o.count("found_after");
  c.shrink_steps = o.count("shrink_steps");
  c.shrinks_tried = o.count("shrinks_tried");
  c.seed = o.seed("seed");
  c.reproduce = o.str("reproduce");
  if (o.has("evidence")) *evidence = read_evidence(o.obj("evidence"));
  return c;
}

Run read_run(const Obj &o, std::size_t *failures) {
  Run run;
  Report &r = run.report;
  r.kernel = o.str("kernel");
  r.dtype = o.name<Dtype, kDtypes>("dtype", dtype_name);
  const Obj prof = o.obj("profile");
  r.profile.storage = prof.name<Dtype, kDtypes>("storage", dtype_name);
  r.profile.accumulate = prof.name<Dtype, kDtypes>("accumulation", dtype_name);
  r.profile.round_p = prof.boolean("round_p");
  const Obj src = o.obj("source");
  run.source.kind = src.name<KernelSource::Kind, kKinds>("kind", kind_name);
  run.source.location = src.str("location");
  run.profile = o.str("run_profile");
  r.seed = o.seed("seed");
  r.cases = o.count("cases");
  const json &props = o.array("properties");
  for (std::size_t n = 0; n < props.size(); ++n) {
    const Obj p(props[n], o.path() + ".properties[" + std::to_string(n) + "]");
    PropertyReport pr;
    pr.id = p.str("id");
    pr.verdict = p.name<Verdict, kVerdicts>("verdict", detail::verdict_id);
    pr.cases = p.count("cases");
    pr.unsupported = p.count("unsupported");
    pr.undecided = p.count("undecided");
    pr.worst_ratio = p.ratio("worst_ratio");
    pr.worst = p.str("worst");
    pr.budget_exhausted = p.boolean("budget_exhausted");
    pr.seed = p.seed("seed");
    pr.note = p.str("note");
    pr.formula = p.str("formula");
    pr.summary = p.str("summary");
    std::optional<Evidence> ev;
    if (p.has("counterexample")) pr.counterexample = read_counterexample(p.obj("counterexample"), ++*failures, &ev);
    if (pr.verdict == Verdict::fail && !pr.counterexample)
      fail(p.where() + "verdict fail without a counterexample");
    r.properties.push_back(std::move(pr));
    run.evidence.push_back(std::move(ev));
  }
  return run;
}

}  // namespace

std::string to_json(const Document &doc) {
  ojson runs = ojson::array(), failures = ojson::array();
  Verdict overall = Verdict::pass;
  std::size_t number = 0;
  for (std::size_t ri = 0; ri < doc.runs.size(); ++ri) {
    const Run &run = doc.runs[ri];
    const Report &r = run.report;
    ojson props = ojson::array();
    for (std::size_t pi = 0; pi < r.properties.size(); ++pi) {
      const PropertyReport &p = r.properties[pi];
      ojson pj = property_json(p);
      if (p.counterexample) {
        ++number;
        const Evidence *ev = pi < run.evidence.size() && run.evidence[pi] ? &*run.evidence[pi] : nullptr;
        pj["counterexample"] = counterexample_json(*p.counterexample, number, ev);
        failures.push_back(ojson{{"failure", number},
                                 {"run", ri},
                                 {"kernel", r.kernel},
                                 {"dtype", dtype_name(r.dtype)},
                                 {"property", p.id}});
      }
      props.push_back(std::move(pj));
    }
    const Verdict v = r.verdict();
    // The document's verdict rolls up like a Report's: fail > undecided > pass.
    if (v == Verdict::fail || (v == Verdict::undecided && overall != Verdict::fail)) overall = v;
    runs.push_back(ojson{{"kernel", r.kernel},
                         {"dtype", dtype_name(r.dtype)},
                         {"verdict", detail::verdict_id(v)},
                         {"profile",
                          ojson{{"storage", dtype_name(r.profile.storage)},
                                {"accumulation", dtype_name(r.profile.accumulate)},
                                {"round_p", r.profile.round_p}}},
                         {"source", ojson{{"kind", kind_name(run.source.kind)}, {"location", run.source.location}}},
                         {"run_profile", run.profile},
                         {"seed", std::to_string(r.seed)},
                         {"cases", r.cases},
                         {"properties", std::move(props)}});
  }
  ojson j{{"format", kFormat},
          {"version", kSchemaVersion},
          {"tool_version", doc.tool_version},
          {"verdict", detail::verdict_id(overall)},
          {"failures", std::move(failures)},
          {"runs", std::move(runs)}};
  // Invalid UTF-8 in a kernel's strings becomes U+FFFD rather than an exception.
  return j.dump(kIndent, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Document from_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error &e) {
    fail("truncated or malformed JSON at byte " + std::to_string(e.byte));
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
  const json &runs = top.array("runs");
  std::size_t failures = 0;
  for (std::size_t n = 0; n < runs.size(); ++n)
    doc.runs.push_back(read_run(Obj(runs[n], "runs[" + std::to_string(n) + "]"), &failures));
  return doc;
}

}  // namespace attncheck::reporting
