// The ABI 1.2 features (SPEC.md §2.7) end to end through the attncheck command: each planted feature bug of the bug
// plugin fails exactly the property of its feature, the correct feature kernel passes all eight, a kernel that does
// not declare a feature has its property declined (report.json, summary.md, the table), `list` names every feature
// and its property, and a feature counterexample keeps its features through report.json and replays.
#include "cli_support.h"

#include "attncheck/features.h"
#include "attncheck/check.h"
#include "attncheck/report_io.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace cli_test;

namespace {

constexpr int kExitPass = 0, kExitCounterexample = 1, kExitUsage = 2, kExitInconclusive = 3;
constexpr const char *kQuick = " --dtype f32 --profile quick --quiet";
/// Every feature property (SPEC.md §7: a property with a feature), in registration order, from the registry: the
/// tests follow the features as they are added (fp8 once it is generated).
std::vector<std::string> feature_properties() {
  std::vector<std::string> ids;
  for (const attncheck::PropertyInfo &p : attncheck::property_catalog())
    if (p.feature) ids.push_back(std::string(p.id));
  return ids;
}
const std::vector<std::string> kFeatureProperties = feature_properties();

std::string joined(const std::vector<std::string> &ids, const std::string &sep) {
  std::string s;
  for (const std::string &id : ids) s += (s.empty() ? "" : sep) + id;
  return s;
}
const std::string kAllFeatureProperties = joined(kFeatureProperties, ",");

/// The feature a property checks, as a contract names it ("mask" for attn_mask).
std::string feature_of(const std::string &property) {
  return std::string(attncheck::feature_name(attncheck::find_property_info(property)->feature));
}

/// A planted feature bug of the bug plugin and the property of its feature.
struct PlantedBug {
  std::string kernel, property;
  /// The features one of which every counterexample uses (0: the property's own).
  std::uint32_t features = 0;
};
std::vector<PlantedBug> planted_bugs() {
  std::vector<PlantedBug> bugs = {
      {"features_window_right_off_by_one", "window"},
      {"features_softcap_after_mask", "softcap"},
      {"features_alibi_reversed_slopes", "alibi"},
      {"features_varlen_reads_across_boundary", "varlen"},
      {"features_paged_logical_page", "paged"},
      {"features_dropout_mask_not_reproducible", "dropout"},
      {"features_dropout_shared_across_heads", "dropout"},
      {"features_dropout_shared_across_batch", "dropout"},
      {"features_dropout_shared_across_rows", "dropout"},
      {"features_dropout_shared_across_keys", "dropout"},
      {"features_mask_byte_one", "attn_mask"},
      {"features_args_assumed_compact", "alibi", attncheck::kArgTensorFeatures},
  };
  // The fp8 kernel carries a planted bug once FP8 is generated (a property checks it); before, it is reserved.
  if (attncheck::find_property_info("fp8")) bugs.push_back({"features_fp8_without_descale", "fp8"});
  return bugs;
}
const std::vector<PlantedBug> kPlantedBugs = planted_bugs();

/// `check` of one bug-plugin kernel on `properties`, quick profile, float32 (unless `extra` adds dtypes).
std::string feature_check(const std::string &kernel, const std::string &properties, const std::string &extra = "") {
  return cli_test::attncheck("check --plugin " BUG_PLUGIN " --kernel " + kernel + " --properties " + properties + kQuick +
                   extra);
}

/// One row of the check's table.
struct Row {
  std::string kernel, dtype, property, tier, verdict;
};

/// The rows of the check's table (stdout), in order.
std::vector<Row> table_rows(const std::string &out) {
  std::vector<Row> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    Row r;
    if (!(words >> r.kernel >> r.dtype >> r.property >> r.tier >> r.verdict)) continue;
    // The header, the contract and counterexample lines have no tier in the fourth column.
    if (r.tier != "required" && r.tier != "advisory" && r.tier != "off") continue;
    rows.push_back(r);
  }
  return rows;
}

/// The report.json the check wrote into `dir`, parsed by attncheck's own reader.
attncheck::reporting::Document read_report(const TempDir &dir) {
  const std::string text = slurp(dir / "report.json");
  REQUIRE(!text.empty());
  return attncheck::reporting::from_json(text);
}

const attncheck::PropertyReport &property_of(const attncheck::RunReport &r, const std::string &id) {
  for (const attncheck::PropertyReport &p : r.properties)
    if (p.id == id) return p;
  FAIL("the report has no property " << id);
  return r.properties.front();  // not reached
}

/// The failing step the check's table prints for its first counterexample ("(step finite, found after ...").
std::string failing_step(const std::string &check_stdout) {
  std::smatch m;
  REQUIRE(std::regex_search(check_stdout, m, std::regex(R"(\(step (\w+), found after)")));
  return m[1];
}

std::size_t count(const std::string &text, const std::string &what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// ---- planted feature bugs and the correct feature kernel ----

TEST_CASE("each planted feature bug fails the property of its feature and others only on cases combining it",
          "[cli][features]") {
  for (const PlantedBug &bug : kPlantedBugs) {
    const TempDir dir;
    const Run r = run(feature_check(bug.kernel, kAllFeatureProperties, " --report-dir " + dir.path.string()));
    INFO(bug.kernel << "\n" << r.out << r.err);
    CHECK(r.status == kExitCounterexample);
    const std::vector<Row> rows = table_rows(r.out);
    REQUIRE(rows.size() == kFeatureProperties.size());
    for (const Row &row : rows) {
      INFO(row.property);
      CHECK(row.kernel == bug.kernel);
      CHECK(row.tier == "required");
      if (row.property == bug.property) CHECK(row.verdict == "FAIL");
    }
    // Every counterexample is on a case that uses the bug's feature: its own property's, or another property's case
    // that combined it (a window with sinks, say).
    const std::uint32_t bit = bug.features ? bug.features : attncheck::parse_feature_list(feature_of(bug.property));
    const attncheck::reporting::Document doc = read_report(dir);
    for (const attncheck::PropertyReport &p : doc.runs.at(0).report.properties) {
      INFO(p.id);
      CHECK((p.verdict == attncheck::Verdict::pass || p.verdict == attncheck::Verdict::fail));
      if (p.counterexample) CHECK((p.counterexample->minimal.spec.features.bits & bit) != 0u);
    }
    CHECK(r.out.find("counterexample 1: ") != std::string::npos);
  }
}

TEST_CASE("each planted feature bug fails its property alone with exit 1", "[cli][features]") {
  for (const PlantedBug &bug : kPlantedBugs) {
    const Run r = run(feature_check(bug.kernel, bug.property));
    INFO(bug.kernel << "\n" << r.out << r.err);
    CHECK(r.status == kExitCounterexample);
    const std::vector<Row> rows = table_rows(r.out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].verdict == "FAIL");
  }
}

TEST_CASE("the correct feature kernel passes every feature property in every dtype", "[cli][features]") {
  const Run r = run(cli_test::attncheck("check --plugin " BUG_PLUGIN " --kernel features_correct --properties " +
                              kAllFeatureProperties + " --profile quick --quiet"));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  const std::vector<Row> rows = table_rows(r.out);
  CHECK(rows.size() == 3 * kFeatureProperties.size());
  for (const Row &row : rows) {
    INFO(row.dtype << " " << row.property);
    CHECK(row.tier == "required");
    CHECK(row.verdict == "pass");
  }
  CHECK(r.out.find("contract of features_correct: features=window+softcap+alibi+sinks+mask+varlen+paged+dropout") !=
        std::string::npos);
}

TEST_CASE("a planted feature bug is not reached when its feature is not declared", "[cli][features]") {
  // --contract features=none: the window is never sent, so the off-by-one window cannot show; accuracy passes.
  const Run r = run(feature_check("features_window_right_off_by_one", "window,accuracy", " --contract features=none"));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  const std::vector<Row> rows = table_rows(r.out);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].property == "window");
  CHECK(rows[0].tier == "off");
  CHECK(rows[1].verdict == "pass");
  // Only declined properties selected: nothing ran, which is inconclusive, not a pass.
  const Run only = run(feature_check("features_window_right_off_by_one", "window", " --contract features=none"));
  CHECK(only.status == kExitInconclusive);
}

TEST_CASE("a feature list that does not parse in --contract is one line naming the feature with exit 2",
          "[cli][features]") {
  const Run r = run(feature_check("features_correct", "window", " --contract features=window+teleport"));
  CHECK(r.status == kExitUsage);
  require_usage_error(r, "unknown feature 'teleport'");
}

// ---- kernels that do not declare features: declined ----

TEST_CASE("the bundled flash with features=none has every feature property declined in report.json",
          "[cli][features]") {
  const TempDir dir;
  const Run r = run(cli_test::attncheck("check --plugin builtin --kernel flash --properties sum_to_one," + kAllFeatureProperties +
                              " --contract features=none --report-dir " + dir.path.string() + kQuick));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitPass);
  for (const Row &row : table_rows(r.out)) {
    INFO(row.property);
    CHECK(row.tier == (row.property == "sum_to_one" ? "required" : "off"));
    CHECK(row.verdict == (row.property == "sum_to_one" ? "pass" : "-"));
  }
  const attncheck::reporting::Document doc = read_report(dir);
  REQUIRE(doc.runs.size() == 1);
  const attncheck::RunReport &rep = doc.runs[0].report;
  CHECK(rep.contract.features == 0);
  for (const std::string &id : kFeatureProperties) {
    INFO(id);
    const attncheck::PropertyReport &p = property_of(rep, id);
    CHECK(p.tier == attncheck::Tier::off);
    CHECK(p.cases == 0);
    CHECK_FALSE(p.counterexample.has_value());
    CHECK(p.note.find("declined") != std::string::npos);
    CHECK(p.note.find("does not declare features=" + feature_of(id)) != std::string::npos);
    CHECK(p.note.find("it declares features=none") != std::string::npos);
  }
  CHECK(property_of(rep, "sum_to_one").tier == attncheck::Tier::required);
  // The raw text: the tier as the schema spells it.
  const std::string json = slurp(dir / "report.json");
  CHECK(count(json, "\"tier\": \"off\"") == kFeatureProperties.size());
}

TEST_CASE("summary.md lists the declined feature properties in its Features block", "[cli][features]") {
  const TempDir dir;
  const Run r = run(cli_test::attncheck("check --plugin builtin --kernel flash --properties sum_to_one," + kAllFeatureProperties +
                              " --contract features=none --report-dir " + dir.path.string() + kQuick));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitPass);
  const std::string md = slurp(dir / "summary.md");
  INFO(md);
  CHECK(md.find("**Features**") != std::string::npos);
  CHECK(md.find("\n- flash f32: declined: " + joined(kFeatureProperties, ", ") + "\n") != std::string::npos);
  CHECK(md.find("checked:") == std::string::npos);
}

TEST_CASE("an old-style bug kernel declares no feature: its feature properties are declined while its bug fails",
          "[cli][features]") {
  const TempDir dir;
  const Run r = run(feature_check("bug:missing_scale", "accuracy,window,dropout", " --report-dir " + dir.path.string()));
  INFO(r.out << r.err);
  CHECK(r.status == kExitCounterexample);
  const attncheck::reporting::Document doc = read_report(dir);
  const attncheck::RunReport &rep = doc.runs.at(0).report;
  CHECK(property_of(rep, "accuracy").verdict == attncheck::Verdict::fail);
  for (const char *id : {"window", "dropout"}) {
    INFO(id);
    const attncheck::PropertyReport &p = property_of(rep, id);
    CHECK(p.tier == attncheck::Tier::off);
    CHECK(p.note.find("declined: the kernel's contract does not declare features=") == 0);
  }
  const std::string md = slurp(dir / "summary.md");
  CHECK(md.find("declined: window, dropout") != std::string::npos);
}

TEST_CASE("a kernel declaring some features has the others declined and the declared ones checked",
          "[cli][features]") {
  const TempDir dir;
  const Run r = run(feature_check("features_correct", "window,softcap",
                                  " --contract features=softcap --report-dir " + dir.path.string()));
  INFO(r.out << r.err);
  CHECK(r.status == kExitPass);
  const attncheck::reporting::Document doc = read_report(dir);
  const attncheck::RunReport &rep = doc.runs.at(0).report;
  CHECK(property_of(rep, "window").tier == attncheck::Tier::off);
  CHECK(property_of(rep, "window").note.find("it declares features=softcap") != std::string::npos);
  CHECK(property_of(rep, "softcap").tier == attncheck::Tier::required);
  CHECK(property_of(rep, "softcap").verdict == attncheck::Verdict::pass);
  const std::string md = slurp(dir / "summary.md");
  CHECK(md.find(": checked: softcap pass (") != std::string::npos);
  CHECK(md.find("; declined: window\n") != std::string::npos);
}

TEST_CASE("a declined note names the declared features in a form that --contract accepts", "[cli][features]") {
  // The bundled flash declares six features; attn_mask is declined and its note names what flash declares.
  const TempDir dir;
  const Run r = run(cli_test::attncheck("check --plugin builtin --kernel flash --properties attn_mask --report-dir " +
                              dir.path.string() + kQuick));
  INFO(r.out << r.err);
  const attncheck::reporting::Document doc = read_report(dir);
  const std::string note = property_of(doc.runs.at(0).report, "attn_mask").note;
  INFO(note);
  std::smatch m;
  REQUIRE(std::regex_search(note, m, std::regex(R"(it declares (features=\S+)\))")));
  const std::string declared = m[1];
  // What the note says the kernel declares is a contract token: given back to --contract, it parses.
  const Run again = run(cli_test::attncheck("check --plugin builtin --kernel flash --properties sum_to_one --contract " +
                                  declared + kQuick));
  INFO(again.out << again.err);
  CHECK(again.status == kExitPass);
}

TEST_CASE("attncheck list names every feature and the property that checks it", "[cli][features]") {
  const Run r = run(cli_test::attncheck("list"));
  INFO(r.out << r.err);
  REQUIRE(r.status == kExitPass);
  CHECK(r.out.find("\nfeatures (declare with --contract features=a+b") != std::string::npos);
  CHECK(r.out.find("\nkernel processes: ") != std::string::npos);  // Landlock's ABI, or why it is absent
  // Each feature of the ABI on its own line: the property that checks it, or that it is not generated yet.
  for (const std::uint32_t f : attncheck::kAllFeatures) {
    const std::string feature(attncheck::feature_name(f));
    INFO(feature);
    std::string checker;
    for (const std::string &id : kFeatureProperties)
      if (attncheck::find_property_info(id)->feature == f) checker = id;
    const std::string what = checker.empty() ? "in the ABI; not generated yet" : "checked by " + checker;
    CHECK(std::regex_search(r.out, std::regex("\n  " + feature + " +" + what + "\n")));
    if (!checker.empty())
      CHECK(r.out.find("(checked when the kernel declares features=" + feature + ")") != std::string::npos);
  }
  // The eight features of ABI 1.2 that attncheck generates.
  for (const char *id : {"window", "softcap", "alibi", "sinks", "attn_mask", "varlen", "paged", "dropout"})
    CHECK(std::find(kFeatureProperties.begin(), kFeatureProperties.end(), id) != kFeatureProperties.end());
}

// ---- report.json and replay of feature counterexamples ----

TEST_CASE("a feature counterexample keeps its features in report.json and replays to the same failure",
          "[cli][features]") {
  for (const PlantedBug &bug : kPlantedBugs) {
    INFO(bug.kernel);
    const TempDir dir;
    const Run check = run(feature_check(bug.kernel, bug.property, " --report-dir " + dir.path.string()));
    INFO(check.out << check.err);
    REQUIRE(check.status == kExitCounterexample);
    const std::string step = failing_step(check.out);

    // The counterexample's spec (and the case it was shrunk from) carries the features object.
    const std::string json = slurp(dir / "report.json");
    CHECK(json.find("\"features\": {") != std::string::npos);
    // The property's feature among the case's (a shrunk case may keep a combined one that the bug needs: a window
    // hiding the key a softcap-after-mask bug shows on).
    const std::regex features_named("features\"?[:=] ?\"?([a-z0-9]+\\+)*" + feature_of(bug.property) + "\\b");
    CHECK(std::regex_search(json, features_named));
    const attncheck::reporting::Document doc = attncheck::reporting::from_json(json);
    REQUIRE(doc.failures().size() == 1);
    const attncheck::PropertyReport &p = property_of(doc.runs.at(0).report, bug.property);
    REQUIRE(p.counterexample.has_value());
    const std::uint32_t bit = attncheck::find_property_info(bug.property)->feature;
    CHECK((p.counterexample->minimal.spec.features.bits & bit) != 0);
    CHECK((p.counterexample->original.features.bits & bit) != 0);
    CHECK(attncheck::reporting::to_json(doc) == json);

    // Replay: the recorded failure again, at the same step with the same detail, and the same output twice.
    const Run replay = run(cli_test::attncheck("replay " + (dir / "report.json")));
    INFO(replay.out << replay.err);
    CHECK(replay.status == kExitCounterexample);
    CHECK(replay.out.find("recorded: FAIL at step " + step + ": " + p.counterexample->outcome.detail + "\n") !=
          std::string::npos);
    CHECK(replay.out.find("replayed: FAIL at step " + step + ": " + p.counterexample->outcome.detail + "\n") !=
          std::string::npos);
    CHECK(std::regex_search(replay.out, features_named));
    const Run again = run(cli_test::attncheck("replay " + (dir / "report.json")));
    CHECK(again.status == kExitCounterexample);
    CHECK(again.out == replay.out);
  }
}

TEST_CASE("the same seed twice gives a byte-identical report.json for feature runs", "[cli][features]") {
  const TempDir first, second;
  const std::string args = " --seed 7 --report-dir ";
  const std::string kernel = "features_dropout_mask_not_reproducible";
  REQUIRE(run(feature_check(kernel, kAllFeatureProperties, args + first.path.string())).status == kExitCounterexample);
  REQUIRE(run(feature_check(kernel, kAllFeatureProperties, args + second.path.string())).status ==
          kExitCounterexample);
  const std::string a = report_content(first / "report.json");
  CHECK(!a.empty());
  CHECK(a == report_content(second / "report.json"));
  CHECK(slurp(first / "summary.md") == slurp(second / "summary.md"));
}

TEST_CASE("a feature run gives the same report.json whatever the number of jobs", "[cli][features]") {
  const TempDir serial, parallel;
  const std::string kernel = "features_alibi_reversed_slopes";
  // A budget that never binds (a sanitizer build runs several times slower), as in the jobs test of cli_budget_test.
  REQUIRE(run(feature_check(kernel, "alibi,window,dropout", " --seed 3 --time-budget 600 --jobs 1 --report-dir " +
                                                                 serial.path.string()))
              .status == kExitCounterexample);
  REQUIRE(run(feature_check(kernel, "alibi,window,dropout", " --seed 3 --time-budget 600 --jobs 2 --report-dir " +
                                                                 parallel.path.string()))
              .status == kExitCounterexample);
  const std::string a = report_content(serial / "report.json");
  CHECK(!a.empty());
  CHECK(a == report_content(parallel / "report.json"));
}
