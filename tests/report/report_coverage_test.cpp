// Coverage in the reports (coverage.h): each property's corners round-trip report.json, the run's table is derived
// and written, an unknown corner is one line, and summary.md and report.html say "corners reached N/M" with the
// corners not reached named.
#include "attncheck/check.h"
#include "attncheck/coverage.h"
#include "attncheck/report_io.h"
#include "report_support.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

using namespace attncheck;
using namespace attncheck::reporting;
using attncheck::test::error_of;

namespace {

constexpr int kCases = 20;

/// A correct kernel's check of two properties, one of them backward: its corners are those cases reached.
const Document &document() {
  static const Document doc = [] {
    CheckOptions opt;
    opt.cases = kCases;
    opt.properties = {"accuracy", "gradient_accuracy"};
    Document d;
    d.tool_version = "0.1.0-test";
    Run run;
    run.plan = "quick";
    run.report = check(support::variant_kernel(support::Variant{}), opt);
    d.runs.push_back(std::move(run));
    return d;
  }();
  return doc;
}

}  // namespace

TEST_CASE("report.json keeps each property's corners and writes the run's coverage table") {
  const Document &doc = document();
  const RunReport &r = doc.runs[0].report;
  REQUIRE_FALSE(r.properties[0].coverage.empty());
  const std::string text = to_json(doc);
  const Document back = from_json(text);
  REQUIRE(back.runs.size() == 1);
  REQUIRE(back.runs[0].report.properties.size() == r.properties.size());
  for (std::size_t i = 0; i < r.properties.size(); ++i) CHECK(back.runs[0].report.properties[i].coverage == r.properties[i].coverage);
  CHECK(to_json(back) == text);

  const nlohmann::json j = nlohmann::json::parse(text);
  const nlohmann::json &cov = j["runs"][0]["coverage"];
  const RunCoverage rc = r.coverage();
  CHECK(cov["summary"] == rc.describe());
  CHECK(cov["reached"] == rc.count(CornerStatus::reached));
  CHECK(cov["applicable"] == rc.applicable());
  CHECK(cov["decided"].size() == kCornerCount);
  CHECK(cov["decided"]["b1"] == rc.corners[*corner_index("b1")].decided);
  CHECK(cov["not_declared"].size() == static_cast<std::size_t>(rc.count(CornerStatus::not_declared)));
  // The backward property ran: dO's corners count, and some of them were reached in 20 cases.
  CHECK(rc.corners[*corner_index("dout-blhd")].status != CornerStatus::not_applicable);
}

TEST_CASE("an unknown corner or a bad count in report.json is one line naming it") {
  const std::string text = to_json(document());
  const std::string key = "\"decided\": {\n";
  const std::size_t at = text.find(key, text.find("\"properties\""));
  REQUIRE(at != std::string::npos);
  std::string unknown = text;
  unknown.insert(at + key.size(), "            \"g7000\": 1,\n");
  const std::string e = error_of(unknown);
  CHECK(e.find("\"g7000\" is not a corner") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  std::string negative = text;
  negative.insert(at + key.size(), "            \"lk-16k\": -1,\n");  // no case of 20 is that long
  CHECK(error_of(negative).find("\"lk-16k\" is -1") != std::string::npos);
}

TEST_CASE("summary.md and report.html say how many corners were reached and name those not reached") {
  const Document &doc = document();
  const RunCoverage rc = doc.runs[0].report.coverage();
  REQUIRE(rc.count(CornerStatus::not_reached) > 0);  // 20 cases of two properties reach few of the corners
  const std::string md = to_markdown(doc), html = to_html(doc);
  const std::string line = "corners reached " + std::to_string(rc.count(CornerStatus::reached)) + "/" +
                           std::to_string(rc.applicable());
  CHECK(md.find("**Coverage**") != std::string::npos);
  CHECK(md.find(line + " (") != std::string::npos);
  CHECK(md.find("not reached: ") != std::string::npos);
  CHECK(html.find("<details class=\"coverage\"><summary>" + line) != std::string::npos);
  CHECK(html.find("<tr class=\"c-not-reached\">") != std::string::npos);
  CHECK(html.find("<tr class=\"c-not-declared\">") != std::string::npos);
}
