// Internals shared by the report.json and corpus entry readers and writers (json.cpp, json_case.cpp,
// json_counterexample.cpp, json_results.cpp, corpus_json.cpp): the json types, the enum-name tables, the error helper
// and the Obj reader, the value helpers, and the per-type writers and readers one file calls from another.
#pragma once

#include "common.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attncheck::reporting::json_detail {

using detail::hex;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

/// Spaces per level of report.json and corpus entries.
constexpr int kIndent = 2;

// ---- enum names (the machine ids; parsing tries every enumerator) ----

template <class E, int N, class NameFn>
bool parse_enum(std::string_view s, NameFn name, E *out) {
  for (int x = 0; x < N; ++x)
    if (name(static_cast<E>(x)) == s) return *out = static_cast<E>(x), true;
  return false;
}
constexpr int kVerdicts = 6, kSteps = 5, kMasks = 3, kLayouts = 4, kBroadcasts = 3, kDtypes = 3, kKinds = 4,
              kTiers = 3, kLse = 3;
constexpr int kApprox = 4;  ///< Tanh and Exp values
constexpr int kFp32Precisions = 4;  ///< Fp32Precision values
constexpr int kFindingKinds = 6;
static_assert(static_cast<int>(Finding::Kind::aggregate) == kFindingKinds - 1);
static_assert(static_cast<int>(Verdict::error) == kVerdicts - 1 && static_cast<int>(Tier::off) == kTiers - 1 &&
              static_cast<int>(Mask::causal_top_left) == kMasks - 1);
static_assert(static_cast<int>(Tanh::approx_bf16) == kApprox - 1 && static_cast<int>(Exp::approx_bf16) == kApprox - 1);
static_assert(static_cast<int>(Fp32Precision::f16) == kFp32Precisions - 1);

// ---- writer: exact values and ratios ----

/// Each value as a C99 hex string.
inline ojson hex_array(const std::vector<double> &v) {
  ojson a = ojson::array();
  for (const double x : v) a.push_back(hex(x));
  return a;
}

/// A ratio as a JSON number, or "inf", "-inf", "nan".
inline ojson ratio_json(double r) {
  if (std::isfinite(r)) return r;
  return std::isnan(r) ? "nan" : (r > 0 ? "inf" : "-inf");
}

// ---- reader: every error names where it is, in one line ----

/// Throws the ReportError of a malformed report.json: "report.json: " + what.
[[noreturn]] inline void fail(const std::string &what) { throw ReportError("report.json: " + what); }

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

/// One of attncheck's JSON files (a report, a corpus entry) parsed: the JSON object, checked to carry
/// "format": `format` ("not an attncheck <what>" otherwise), and its "version", at most `max_version` (a newer one
/// asks to update attncheck). Malformed JSON fails at its byte.
struct ParsedDocument {
  json j;
  std::int64_t version = 1;
};
ParsedDocument parse_document(std::string_view text, std::string_view format, std::string_view what,
                              std::int64_t max_version);

// ---- per-type writers and readers, each pair side by side in its file ----

// json_case.cpp: a case and its spec.

/// A spec: dtype, shape, mask, layout, family; its stretch, features and per-tensor layouts when it has them.
ojson spec_json(const CaseSpec &s);
/// spec_json read back and checked (dimensions, the features' values, the layouts).
CaseSpec read_spec(const Obj &o);
/// Fails naming `what` when it has `got` values and its shape needs `want`.
void check_size(const Obj &o, const char *what, std::size_t got, std::size_t want);
/// A case's exact inputs: spec, scale, q, k, v, dout.
ojson case_json(const Case &m, double scale);
/// case_json read back; `failure` names the case in errors.
Case read_case(const Obj &in, const std::string &failure);

// json_counterexample.cpp: what a failure holds (finding, outcome, evidence) and the counterexample.

/// A hint from evidence (REPORT_SCHEMA.md, Evidence's `hints`): kind, text and its numbers.
ojson hint_json(const Hint &h);
/// A declaration that explains a failure: declaration, meaning.
ojson explanation_json(const Explanation &e);
/// An outcome: verdict, step, detail, finding, worst ratio and element.
ojson outcome_json(const Outcome &o);
/// outcome_json read back (without the failing case).
Outcome read_outcome(const Obj &out);
/// A counterexample, failure `number` of the report.
ojson counterexample_json(const Counterexample &c, std::size_t number);
/// counterexample_json read back, failure `number` of the report.
Counterexample read_counterexample(const Obj &o, std::size_t number);

// json_results.cpp: a property's report and a run's.

/// A property's report (its counterexample added by to_json, which numbers the failures).
ojson property_json(const PropertyReport &p);
/// property_json read back with its counterexample, the report's failure ++*failures.
PropertyReport read_property(const Obj &p, std::int64_t version, std::size_t *failures);
/// A run with its `properties` (property_json's, numbered by to_json).
ojson run_json(const Run &run, bool strict, ojson properties);
/// run_json read back with its properties (`version` of the file; `failures` counts the counterexamples read).
Run read_run(const Obj &o, std::int64_t version, std::size_t *failures);

}  // namespace attncheck::reporting::json_detail
