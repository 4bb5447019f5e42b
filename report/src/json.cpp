// report.json: writer and strict reader (schema: spec/REPORT_SCHEMA.md).
//
// Bytes are deterministic: keys in a fixed order (ordered_json), exact values as C99 hex strings, ratios as JSON
// numbers in nlohmann's shortest round-trip form (or the string "inf"), seeds as decimal strings (uint64 does not
// survive a JavaScript reader). Fields derived from others (verdicts of runs, failure numbers, the worst evidence
// element, replay commands) are written for readers and recomputed on parse, so to_json(from_json(x)) == x.
#include "json_io.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attncheck::reporting {

using namespace json_detail;

namespace {

/// Version 2 added the contract, the tiers, warnings, failing_case and strict (a version-1 file reads as the
/// default contract, every property required, strict false).
constexpr int kSchemaVersion = 2;
/// The most shards a campaign is cut into (a sanity bound on the partial reports' "count").
constexpr std::int64_t kMaxShards = 1 << 20;
constexpr std::string_view kFormat = "attncheck-report";

// ---- timing ----

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
    runs.push_back(run_json(run, doc.strict, std::move(props)));
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

json_detail::ParsedDocument json_detail::parse_document(std::string_view text, std::string_view format,
                                                       std::string_view what, std::int64_t max_version) {
  ParsedDocument d;
  json &j = d.j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error &e) {
    fail("truncated or malformed JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception &) {  // found by fuzz/report_json_fuzz.cpp: out_of_range for 1e999-style numbers
    fail("a number out of range (a JSON number no double holds)");
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != format)
    fail("not an attncheck " + std::string(what) + " (no \"format\": \"" + std::string(format) + "\")");
  d.version = Obj(j, "").integer("version", 1, std::numeric_limits<int>::max());
  if (d.version > max_version)
    fail("version " + std::to_string(d.version) + " is newer than this attncheck reads (" +
         std::to_string(max_version) + "); update attncheck");
  return d;
}

Document from_json(std::string_view text) {
  const ParsedDocument parsed = parse_document(text, kFormat, "report", kSchemaVersion);
  const Obj top(parsed.j, "");
  const std::int64_t version = parsed.version;
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
}  // namespace attncheck::reporting
