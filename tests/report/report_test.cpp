// The reports, on Documents made by real checks: a kernel with a planted bug (scale ignored) fails accuracy with a
// shrunk counterexample; a correct kernel passes a few properties.
#include "attncheck/check.h"
#include "attncheck/report_io.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace attncheck;
using namespace attncheck::reporting;

namespace {

/// Few cases: the planted bug fails on the first one, and the MPFR reference dominates the time.
constexpr int kCases = 20;
constexpr const char *kHostile = "<script>alert(1)</script> & \"quoted\" 'single'";

const attncheck_kernel &buggy() { return support::variant_kernel(support::bug_variant(support::Bug::missing_scale)); }
const attncheck_kernel &correct() { return support::variant_kernel(support::Variant{}); }

Run checked(const attncheck_kernel &kernel, std::vector<std::string> properties) {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = std::move(properties);
  Run run{{KernelSource::Kind::builtin, ""}, "quick", check(kernel, opt), {}};
  add_evidence(run, kernel);
  return run;
}

Document make_document() {
  Document doc;
  doc.tool_version = "0.1.0-test";
  doc.runs.push_back(checked(buggy(), {"accuracy"}));
  doc.runs.push_back(checked(correct(), {"accuracy", "lse"}));
  return doc;
}

/// The Document is built once: every test reads it (checks cost MPFR reference time).
const Document &document() {
  static const Document doc = make_document();
  return doc;
}

const Counterexample &the_counterexample() { return *document().runs[0].report.properties[0].counterexample; }

std::size_t count(const std::string &text, const std::string &what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string hex(double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}
/// "\"0x1.8p-1\"": a hex value as a JSON string.
std::string quoted_hex(double x) {
  char buf[52];
  std::snprintf(buf, sizeof buf, "\"%a\"", x);
  return buf;
}

/// The message of the ReportError that from_json throws on `text` ("" when it does not throw).
std::string error_of(const std::string &text) {
  try {
    (void)from_json(text);
  } catch (const ReportError &e) {
    return e.what();
  }
  return "";
}

std::string replace_all(std::string text, const std::string &from, const std::string &to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string replace_once(std::string text, const std::string &from, const std::string &to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

/// Tags balance (a small XML well-formedness check: no attribute may hold a raw '<' or '>').
bool balanced(const std::string &xml, std::string *why) {
  std::vector<std::string> open;
  for (std::size_t at = xml.find('<'); at != std::string::npos; at = xml.find('<', at + 1)) {
    const std::size_t end = xml.find('>', at);
    if (end == std::string::npos) return *why = "unterminated tag", false;
    const std::string tag = xml.substr(at + 1, end - at - 1);
    if (tag.find('<') != std::string::npos) return *why = "'<' inside a tag: " + tag, false;
    if (tag.starts_with("?")) continue;
    const std::string name = tag.substr(tag.starts_with("/"), tag.find_first_of(" />", 1) - tag.starts_with("/"));
    if (tag.starts_with("/")) {
      if (open.empty() || open.back() != name) return *why = "</" + name + "> closes nothing open", false;
      open.pop_back();
    } else if (!tag.ends_with("/") && name != "meta") {  // HTML's <meta> has no end tag
      open.push_back(name);
    }
  }
  if (!open.empty()) return *why = "<" + open.back() + "> is never closed", false;
  return true;
}

}  // namespace

TEST_CASE("the planted bug gives a document with one counterexample and its evidence") {
  const Document &doc = document();
  REQUIRE(doc.runs.size() == 2);
  CHECK(doc.runs[0].report.verdict() == Verdict::fail);
  CHECK(doc.runs[1].report.verdict() == Verdict::pass);
  REQUIRE(doc.failures().size() == 1);
  CHECK(doc.failures()[0] == std::pair<std::size_t, std::size_t>{0, 0});
  REQUIRE(doc.runs[0].evidence.size() == 1);
  CHECK(doc.runs[0].evidence[0].has_value());
  CHECK_FALSE(doc.runs[1].evidence[0].has_value());
}

TEST_CASE("report.json round-trips byte for byte") {
  const std::string json = to_json(document());
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  REQUIRE(back.runs.size() == 2);
  const Counterexample &c = *back.runs[0].report.properties[0].counterexample;
  CHECK(c.minimal.same_as(the_counterexample().minimal));
  CHECK(c.reproduce == the_counterexample().reproduce);
  CHECK(c.seed == the_counterexample().seed);
  CHECK(back.runs[0].report.profile.describe() == document().runs[0].report.profile.describe());
}

TEST_CASE("non-finite inputs round-trip as inf, -inf and nan") {
  Document doc = document();
  Case &c = doc.runs[0].report.properties[0].counterexample->minimal;
  REQUIRE(c.q.size() >= 1);
  REQUIRE(c.k.size() >= 1);
  REQUIRE(c.v.size() >= 1);
  c.q[0] = INFINITY, c.k[0] = -INFINITY, c.v[0] = NAN;
  const std::string json = to_json(doc);
  CHECK(json.find("\"inf\"") != std::string::npos);
  CHECK(json.find("\"-inf\"") != std::string::npos);
  CHECK(json.find("\"nan\"") != std::string::npos);
  const Case back = from_json(json).runs[0].report.properties[0].counterexample->minimal;
  CHECK(back.q[0] == INFINITY);
  CHECK(back.k[0] == -INFINITY);
  CHECK(std::isnan(back.v[0]));
  CHECK(to_json(from_json(json)) == json);
}

TEST_CASE("checking the same kernel twice gives byte-identical report.json") {
  Document again;
  again.tool_version = "0.1.0-test";
  again.runs.push_back(checked(buggy(), {"accuracy"}));
  again.runs.push_back(checked(correct(), {"accuracy", "lse"}));
  CHECK(to_json(again) == to_json(document()));
}

TEST_CASE("report.json holds the marker, the exact inputs as hex floats and the reproduce string") {
  const std::string json = to_json(document());
  CHECK(json.find("\"format\": \"attncheck-report\"") != std::string::npos);
  CHECK(json.find("\"version\": 1") != std::string::npos);
  const Counterexample &c = the_counterexample();
  for (const auto *values : {&c.minimal.q, &c.minimal.k, &c.minimal.v})
    for (const double x : *values) CHECK(json.find(quoted_hex(x)) != std::string::npos);
  CHECK(json.find("\"reproduce\": \"" + c.reproduce + "\"") != std::string::npos);
  CHECK(json.find("\"step\": \"" + std::string(step_id(*c.outcome.step)) + "\"") != std::string::npos);
  CHECK(json.find("\"replay\": \"attncheck replay report.json --failure 1\"") != std::string::npos);
  CHECK(json.find("\"storage\": \"f32\"") != std::string::npos);
}

TEST_CASE("from_json rejects malformed, truncated and foreign files with a one-line message") {
  const std::string json = to_json(document());
  struct Bad {
    const char *what;
    std::string text, message;
  };
  const std::vector<Bad> bad = {
      {"truncated", json.substr(0, json.size() / 2), "report.json: truncated or malformed JSON at byte "},
      {"not JSON", "attncheck passed\n", "report.json: truncated or malformed JSON at byte 1"},
      {"foreign JSON", "{\"name\": \"some-package\", \"version\": \"1.0\"}",
       "report.json: not an attncheck report (no \"format\": \"attncheck-report\")"},
      {"a JSON array", "[1, 2, 3]", "report.json: not an attncheck report"},
      {"a newer version", replace_once(json, "\"version\": 1", "\"version\": 7"), "report.json: version 7 is newer"},
      {"a failure without inputs", replace_once(json, "\"inputs\":", "\"inputz\":"),
       "report.json: failure 1 has no inputs"},
      {"a value that is not a hex float", replace_once(json, quoted_hex(the_counterexample().minimal.q[0]), "\"zz\""),
       "report.json: runs[0].properties[0].counterexample.inputs: \"q\"[0] is not a hex float string"},
      {"a tensor of the wrong size", replace_once(json, "\"q\": [", "\"q\": [\"0x1p+0\", "),
       "counterexample.inputs: \"q\" has "},
      {"an unknown verdict", replace_all(json, "\"verdict\": \"pass\"", "\"verdict\": \"maybe\""),
       "has an unknown value \"maybe\""},
      {"a wrongly typed count", replace_once(json, "\"cases\": 20", "\"cases\": \"twenty\""),
       "\"cases\" is not an integer"},
  };
  for (const Bad &b : bad) {
    INFO(b.what);
    const std::string message = error_of(b.text);
    CHECK(message.find(b.message) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.starts_with("report.json: "));
  }
}

TEST_CASE("summary.md has the verdict table, the counterexample and its replay command") {
  const std::string md = to_markdown(document());
  CHECK(md.find("| kernel | dtype | verdict | properties | cases | worst err/bound |") != std::string::npos);
  CHECK(count(md, "\n| bug:missing\\_scale | f32 | ❌ **FAIL** | fail: accuracy |") == 1);
  CHECK(md.find("2 pass") != std::string::npos);
  CHECK(md.find("`attncheck replay report.json --failure 1`") != std::string::npos);
  CHECK(md.find("`" + the_counterexample().minimal.spec.describe() + "`") != std::string::npos);
  CHECK(md.find("failing step: **" + std::string(step_id(*the_counterexample().outcome.step)) + "**") !=
        std::string::npos);
  CHECK(md.find("worst element: `") != std::string::npos);
}

TEST_CASE("report.html is self-contained, draws the evidence and escapes a hostile kernel name") {
  Document doc = document();
  doc.runs[0].report.kernel = kHostile;
  doc.runs[0].source = {KernelSource::Kind::plugin, "/tmp/<img src=x onerror=alert(1)>.so"};
  const std::string html = to_html(doc);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot; &#39;single&#39;") !=
        std::string::npos);
  CHECK(count(html, "<svg") >= 4);                // defs, legend, heatmap, histogram, P
  CHECK(html.find("class=\"over\"") != std::string::npos);  // a cell beyond its bound is outlined
  CHECK(html.find("Attention probabilities P") != std::string::npos);
  CHECK(html.find("Error histogram") != std::string::npos);
  CHECK(html.find(hex(the_counterexample().minimal.q[0])) != std::string::npos);
  std::string why;
  const bool ok = balanced(html.substr(html.find("<html")), &why);
  INFO(why);
  CHECK(ok);
}

TEST_CASE("JUnit XML has one testcase per property, balanced tags and escaped text") {
  Document doc = document();
  doc.runs[0].report.kernel = kHostile;
  doc.runs[1].report.properties[1].verdict = Verdict::undecided;
  doc.runs[1].report.properties[1].note = "bound infinite at O[0,0,0,0] <overflow>";
  PropertyReport unsupported = doc.runs[1].report.properties[0];
  unsupported.id = "gradient_accuracy";
  unsupported.verdict = Verdict::unsupported;
  unsupported.note = "the kernel has no backward";
  doc.runs[1].report.properties.push_back(unsupported);
  const std::string xml = to_junit(doc);
  std::string why;
  const bool ok = balanced(xml, &why);
  INFO(why);
  CHECK(ok);
  CHECK(count(xml, "<testcase ") == 4);
  CHECK(count(xml, "<testsuite ") == 2);
  CHECK(count(xml, "<failure ") == 1);
  CHECK(count(xml, "<skipped ") == 2);
  CHECK(xml.find("<skipped message=\"undecided: bound infinite at O[0,0,0,0] &lt;overflow&gt;\"/>") !=
        std::string::npos);
  CHECK(xml.find("<skipped message=\"unsupported: the kernel has no backward\"/>") != std::string::npos);
  CHECK(xml.find("<script") == std::string::npos);
  CHECK(xml.find("classname=\"attncheck.&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(xml.find("name=\"accuracy\"") != std::string::npos);
  CHECK(xml.find(the_counterexample().reproduce) != std::string::npos);
  CHECK(xml.find("attncheck replay report.json --failure 1") != std::string::npos);
}

TEST_CASE("write_reports creates the three files, and an unwritable directory is one line") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("attncheck-report-test-" + std::to_string(::getpid())) / "out";
  std::filesystem::remove_all(dir.parent_path());
  write_reports(document(), dir);
  for (const char *name : {"report.json", "summary.md", "report.html"})
    CHECK(std::filesystem::file_size(dir / name) > 0);
  std::ifstream f(dir / "report.json");
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str() == to_json(document()));

  const std::filesystem::path blocked = dir / "report.json" / "sub";  // under a regular file
  try {
    write_reports(document(), blocked);
    FAIL("write_reports wrote under a regular file");
  } catch (const std::runtime_error &e) {
    const std::string message = e.what();
    CHECK(message.starts_with("cannot write report directory '" + blocked.string() + "': "));
    CHECK(message.find('\n') == std::string::npos);
  }
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("the evidence's worst element is the counterexample's, beyond its bound") {
  const Counterexample &c = the_counterexample();
  const Evidence &ev = *document().runs[0].evidence[0];
  CHECK(ev.call_error.empty());
  const std::int64_t w = ev.worst_index();
  REQUIRE(w >= 0);
  const auto x = static_cast<std::size_t>(w);
  const double ratio = error_ratio(ev.got[x], ev.exact[x], ev.bound[x]);
  CHECK(ratio > 1);
  CHECK(ratio == Approx(c.outcome.worst_ratio).epsilon(1e-12));
  CHECK(c.outcome.detail.starts_with(element_name(ev.tensor, ev.shape, w) + ":"));
  // P of every row that sees a key sums to 1.
  const Shape &s = c.minimal.spec.shape;
  REQUIRE(ev.probabilities.size() == static_cast<std::size_t>(s.B * s.Hq * s.Lq * s.Lk));
  for (std::int64_t row = 0; row < s.B * s.Hq * s.Lq; ++row) {
    double sum = 0;
    for (std::int64_t j = 0; j < s.Lk; ++j) sum += ev.probabilities[static_cast<std::size_t>(row * s.Lk + j)];
    CHECK((sum == Approx(1).epsilon(1e-12) || sum == 0));
  }
}

TEST_CASE("a kernel whose call fails leaves its message in the evidence") {
  static const attncheck_kernel failing{
      ATTNCHECK_ABI_VERSION, "failing",
      [](const attncheck_params *, const DLTensor *, const DLTensor *, const DLTensor *, DLTensor *, DLTensor *) {
        return static_cast<int>(ATTNCHECK_ERROR);
      },
      nullptr, [] { return "out of <memory>"; }};
  Run run = document().runs[0];
  run.evidence.clear();
  add_evidence(run, failing);
  REQUIRE(run.evidence.size() == 1);
  REQUIRE(run.evidence[0].has_value());
  CHECK(run.evidence[0]->call_error == "forward returned status 2: out of <memory>");
  CHECK(run.evidence[0]->got.empty());
  CHECK_FALSE(run.evidence[0]->exact.empty());
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(run);
  CHECK(to_json(from_json(to_json(doc))) == to_json(doc));
  CHECK(to_html(doc).find("out of &lt;memory&gt;") != std::string::npos);
}
