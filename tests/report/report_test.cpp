// The reports, on Documents made by real checks: a kernel with a planted bug (scale ignored) fails accuracy with a
// shrunk counterexample; a correct kernel passes a few properties. Then contracts, tiers and warnings (report.json
// version 2, version 1 still read), the failing problem of metamorphic properties and its evidence, and the grouping
// of counterexamples by root cause — on hand-made Documents and on real checks of planted bugs.
#include "attncheck/check.h"
#include "attncheck/reference.h"
#include "attncheck/report_io.h"
#include "diagnosis/diagnosis.h"
#include "report_support.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>
#include <sys/stat.h>
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
using attncheck::test::balanced;
using attncheck::test::error_of;
using attncheck::test::evidence_at;
using attncheck::test::failing;
using attncheck::test::found;
using namespace attncheck::reporting;

namespace {

/// Few cases: the planted bug fails on the first one, and the MPFR reference dominates the time.
constexpr int kCases = 20;
constexpr const char *kHostile = "<script>alert(1)</script> & \"quoted\" 'single'";

const attncheck_kernel &buggy() { return support::variant_kernel(support::bug_variant(support::Bug::missing_scale)); }
const attncheck_kernel &correct() { return support::variant_kernel(support::Variant{}); }

/// A builtin kernel's run of `report`, without evidence.
Run run_of(RunReport report) {
  Run run;
  run.plan = "quick";
  run.report = std::move(report);
  return run;
}

Run checked(const attncheck_kernel &kernel, std::vector<std::string> properties) {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = std::move(properties);
  opt.evidence = true;  // the engine gathers each counterexample's evidence
  return run_of(check(kernel, opt));
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

}  // namespace

TEST_CASE("the planted bug gives a document with one counterexample and its evidence") {
  const Document &doc = document();
  REQUIRE(doc.runs.size() == 2);
  CHECK(doc.runs[0].report.verdict() == Verdict::fail);
  CHECK(doc.runs[1].report.verdict() == Verdict::pass);
  REQUIRE(doc.failures().size() == 1);
  CHECK(doc.failures()[0] == std::pair<std::size_t, std::size_t>{0, 0});
  CHECK(evidence_at(doc.runs[0], 0).has_value());
  CHECK_FALSE(evidence_at(doc.runs[1], 0).has_value());
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
  CHECK(back.runs[0].report.precision().describe() == document().runs[0].report.precision().describe());
}

TEST_CASE("a failure judged on an empty sequence (Lk = 0, an empty KV cache) round-trips report.json") {
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(
      checked(support::variant_kernel(support::bug_variant(support::Bug::nan_fully_masked_rows)), {"empty_sequences"}));
  const std::optional<Counterexample> &c = doc.runs[0].report.properties.at(0).counterexample;
  REQUIRE(c);
  REQUIRE(c->outcome.failing_case);
  const Shape &judged = c->judged().spec.shape;
  CHECK((judged.Lq == 0 || judged.Lk == 0));
  const std::string json = to_json(doc);
  CHECK(to_json(from_json(json)) == json);
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
  CHECK(content_of(to_json(again)) == content_of(to_json(document())));
}

TEST_CASE("report.json holds the marker, the exact inputs as hex floats and the reproduce string") {
  const std::string json = to_json(document());
  CHECK(json.find("\"format\": \"attncheck-report\"") != std::string::npos);
  CHECK(json.find("\"version\": 2") != std::string::npos);
  CHECK(json.find("\"contract\": \"" + KernelContract{}.describe() + "\"") != std::string::npos);
  CHECK(json.find("\"tier\": \"required\"") != std::string::npos);
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
      {"a newer version", replace_once(json, "\"version\": 2", "\"version\": 7"), "report.json: version 7 is newer"},
      {"a contract that does not parse", replace_once(json, "\"contract\": \"causal=bottom-right", "\"contract\": \"causal=sideways"),
       "report.json: runs[0]: \"contract\" does not parse: "},
      // The contract is the one source of the precision profile: a stored profile it does not give is refused.
      {"a profile its contract does not give", replace_once(json, "\"round_p\": false", "\"round_p\": true"),
       "report.json: runs[0]: \"profile\" (f32 storage, f32 accumulation, P rounded"},
      {"an unknown tier", replace_once(json, "\"tier\": \"required\"", "\"tier\": \"optional\""),
       "report.json: runs[0].properties[0]: \"tier\" has an unknown value \"optional\""},
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
      // Found by fuzz/report_json_fuzz.cpp: the JSON parser's out_of_range escaped as an internal error.
      {"a number no double holds", replace_once(json, "\"cases\": 20", "\"cases\": 2955e9682"),
       "a number out of range"},
      {"a shard index past its count", replace_once(json, "\"strict\": false,",
                                                     "\"strict\": false, \"shard\": {\"index\": 3, \"count\": 2, "
                                                     "\"properties\": []},"),
       "shard: \"index\" is 3, outside [1, 2]"},
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
  CHECK(md.find("| kernel | dtype | contract | verdict | properties | warn | cases | worst err/bound |") !=
        std::string::npos);
  CHECK(count(md, "\n| bug:missing\\_scale | f32 | `defaults` | ❌ **FAIL** | fail: accuracy | 0 |") == 1);
  CHECK(md.find("### ❌ Failures — 1 counterexample, 1 root cause") != std::string::npos);
  CHECK(md.find("warnings — beyond the declared contract") == std::string::npos);
  CHECK(md.find("2 pass") != std::string::npos);
  CHECK(md.find("`attncheck replay report.json --failure 1`") != std::string::npos);
  CHECK(md.find("`" + the_counterexample().minimal.spec.describe() + "`") != std::string::npos);
  CHECK(md.find("failing step: **" + std::string(step_id(*the_counterexample().outcome.step)) + "**") !=
        std::string::npos);
  CHECK(md.find("worst element: `") != std::string::npos);
}

TEST_CASE("summary.md lists each property cut short with decided / planned cases and its reason") {
  Document doc = document();
  PropertyReport &p = doc.runs[1].report.properties[1];  // the correct kernel's lse
  p.verdict = Verdict::undecided;
  p.cases = 12;
  p.undecided = 0;
  p.note = "12 decided cases on only 2 distinct shapes (at least 3 needed)";
  const std::string md = to_markdown(doc);
  const std::string planned = std::to_string(doc.runs[1].report.cases);
  CHECK(md.find("**Cut short**") != std::string::npos);
  CHECK(md.find("`" + p.id + "`: undecided, 12 / " + planned + " cases decided — 12 decided cases on only 2") !=
        std::string::npos);
  CHECK(to_markdown(document()).find("**Cut short**") == std::string::npos);  // every property decided its plan
}

/// `doc` with every time zero: report.json keeps timings to the millisecond, the text shows them to 0.1 s.
Document untimed(Document doc) {
  for (Run &run : doc.runs)
    for (PropertyReport &p : run.report.properties) p.timing = {};
  return doc;
}

TEST_CASE("the terminal text is the gate's table, and reads the same from report.json") {
  const Document doc = untimed(document());
  const std::string text = to_text(doc);
  CHECK(text.substr(0, text.find('\n')).find("dtype property                   tier      verdict") !=
        std::string::npos);
  CHECK(text.find("\n" + doc.runs[0].report.kernel) != std::string::npos);
  CHECK(text.find("contract of ") != std::string::npos);
  CHECK(text.find("\nfailure: " + group_failures(doc)[0].headline + "\n") != std::string::npos);
  CHECK(text.find("\n  counterexample 1: accuracy — " + the_counterexample().minimal.spec.describe()) !=
        std::string::npos);
  CHECK(text.find("cut short:") == std::string::npos);  // every property decided its plan
  CHECK(text.find(run_line(doc.runs[0].report, false)) == std::string::npos);  // the table, not the run lines
  CHECK(to_text(from_json(to_json(doc))) == text);
}

TEST_CASE("the summary's text: a line per run, declined properties and why, the totals and small inputs") {
  Document doc = untimed(document());
  PropertyReport &lse = doc.runs[1].report.properties[1];  // the correct kernel's lse, declined
  lse.verdict = Verdict::unsupported;
  lse.cases = 0;
  lse.unsupported = 7;
  lse.note = "the kernel declined all 7 cases";
  const TextOptions summary{.run_lines = true, .declined = true, .totals = true, .inputs = true};
  const std::string text = to_text(doc, summary);
  CHECK(text.starts_with(run_line(doc.runs[0].report, false) + "\n" + run_line(doc.runs[1].report, false) + "\n"));
  CHECK(text.find("dtype property ") == std::string::npos);
  CHECK(text.find("cut short:\n  " + doc.runs[1].report.kernel + " f32 lse: unsupported — the kernel declined all 7 "
                  "cases\n") != std::string::npos);
  CHECK(to_text(doc).find("lse: unsupported") == std::string::npos);  // the gate's table leaves it out
  CHECK(text.find("\n1 failure(s), 0 warning(s)\n") != std::string::npos);
  CHECK(text.find(counterexample_text(doc, 1, summary)) != std::string::npos);
  // A run the kernel declined entirely is its line; its properties are not listed one by one.
  for (PropertyReport &p : doc.runs[1].report.properties) p.verdict = Verdict::unsupported;
  CHECK(to_text(doc, summary).find("lse: unsupported") == std::string::npos);
  CHECK(to_text(doc).find("every property unsupported (a kernel without f32 declares dtypes= without it)\n") !=
        std::string::npos);
}

TEST_CASE("a run of a dtype the contract does not declare is one line in every format, with no time and no features") {
  Document doc = untimed(document());
  RunReport &r = doc.runs[1].report;
  r.contract = parse_contract("dtypes=f16+bf16 features=window");
  for (PropertyReport &p : r.properties) {
    p = PropertyReport{.id = p.id, .verdict = Verdict::unsupported, .tier = Tier::off};
    p.note = "declined: the kernel's contract does not declare dtypes=f32 (it declares dtypes=f16+bf16)";
  }
  const std::string table = to_text(doc);
  CHECK(table.find(" f32   (" + std::to_string(r.properties.size()) + " properties)") != std::string::npos);
  CHECK(table.find("off: the kernel's contract declares dtypes=f16+bf16, nothing was called\n") != std::string::npos);
  CHECK(table.find("time of " + r.kernel + " f32") == std::string::npos);
  CHECK(run_line(r, false) == r.kernel + " f32: off — the kernel's contract declares dtypes=f16+bf16, " +
                                  std::to_string(r.properties.size()) + " properties not run");
  CHECK(to_markdown(doc).find("- " + r.kernel + " f32: declined") == std::string::npos);
  CHECK(to_text(from_json(to_json(doc))) == table);
}

TEST_CASE("a counterexample's text: under its group, its minimal inputs in decimal when small") {
  Document doc = untimed(document());
  Counterexample &cx = *doc.runs[0].report.properties[0].counterexample;
  cx.minimal.spec.shape = Shape{.B = 1, .Hq = 1, .Hkv = 1, .Lq = 2, .Lk = 1, .D = 2, .Dv = 1};
  cx.minimal.q = {0.5, -1.25, 2, 0};
  cx.minimal.k = {1, 0x1p-30};
  cx.minimal.v = {std::nan("")};
  cx.minimal.dout.clear();
  const FailureGroup g = group_failures(doc).at(0);
  const std::string member = "  counterexample 1: accuracy — " + cx.minimal.spec.describe();
  const std::string plain = counterexample_text(doc, 1);
  CHECK(plain.starts_with("failure: " + g.headline + "\n  " + g.caption + "\n" + member));
  CHECK(plain.find(" = [[[[") == std::string::npos);
  CHECK(plain == to_text(doc).substr(to_text(doc).find("failure: ")));  // the table's, one group of one member
  const std::string with = counterexample_text(doc, 1, {.inputs = true});
  CHECK(with.ends_with("\n    q = [[[[0.5, -1.25],\n           [2, 0]]]]\n"
                       "    k = [[[[1, 9.31322575e-10]]]]\n    v = [[[[nan]]]]\n"));
  cx.minimal.spec.shape.Lq = 33;  // q of 66 elements: too many to show
  cx.minimal.q.assign(66, 1.0);
  CHECK(counterexample_text(doc, 1, {.inputs = true}).find("    q = ") == std::string::npos);
  CHECK_THROWS_AS(counterexample_text(doc, 2), std::out_of_range);
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

TEST_CASE("report files replace what a kernel planted at their names and leave no temporary file") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("attncheck-report-plant-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "elsewhere");
  // A link at report.json into a file the kernel controls, and a file it made read-only at summary.md.
  const std::filesystem::path target = dir / "elsewhere" / "forged.json";
  std::ofstream(target) << "forged";
  std::filesystem::create_symlink(target, dir / "report.json");
  std::ofstream(dir / "summary.md") << "forged";
  std::filesystem::permissions(dir / "summary.md", std::filesystem::perms::owner_read);
  write_reports(document(), dir);
  CHECK_FALSE(std::filesystem::is_symlink(dir / "report.json"));
  std::ifstream json(dir / "report.json"), forged(target);
  std::stringstream text, kept;
  text << json.rdbuf();
  kept << forged.rdbuf();
  CHECK(text.str() == to_json(document()));
  CHECK(kept.str() == "forged");  // not written through the link
  CHECK(std::filesystem::file_size(dir / "summary.md") > std::string("forged").size());
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 4);  // elsewhere/, report.json, summary.md, report.html
  std::filesystem::remove_all(dir);
}

TEST_CASE("write_file writes through a link and to a device and refuses a pipe nobody reads at once") {
  write_file("/dev/null", "<testsuites/>");  // a device: written to, not replaced
  CHECK(std::filesystem::is_character_file("/dev/null"));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("attncheck-report-fifo-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A link the user gave (as /dev/stdout is one): its target gets the text, the link stays.
  std::filesystem::create_symlink(dir / "target.xml", dir / "link.xml");
  write_file(dir / "link.xml", "<testsuites/>");
  CHECK(std::filesystem::is_symlink(dir / "link.xml"));
  CHECK(std::filesystem::file_size(dir / "target.xml") == std::string("<testsuites/>").size());
  const std::filesystem::path fifo = dir / "junit.xml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  try {
    write_file(fifo, "<testsuites/>");  // would block forever if it waited for a reader
    FAIL("write_file wrote into a pipe without a reader");
  } catch (const std::runtime_error &e) {
    CHECK(std::string(e.what()) == "cannot write '" + fifo.string() + "': a pipe nobody reads");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the evidence's worst element is the counterexample's, beyond its bound") {
  const Counterexample &c = the_counterexample();
  const Document doc = document();
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
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
  run.report.properties[0].counterexample->evidence.reset();
  diagnosis::add_evidence(run.report, failing);
  REQUIRE(evidence_at(run, 0).has_value());
  CHECK(evidence_at(run, 0)->call_error == "forward returned status 2: out of <memory>");
  CHECK(evidence_at(run, 0)->got.empty());
  CHECK_FALSE(evidence_at(run, 0)->exact.empty());
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(run);
  CHECK(to_json(from_json(to_json(doc))) == to_json(doc));
  CHECK(to_html(doc).find("out of &lt;memory&gt;") != std::string::npos);
}

// ---- contracts, warnings, failing problems and root causes ----

namespace {

/// The document with its first run checked against a non-default contract and its counterexample turned into a
/// warning (an advisory property) that failed on a modified copy of the case.
Document warned_document() {
  Document doc = document();
  RunReport &r = doc.runs[0].report;
  r.contract = parse_contract("causal=top-left lse=storage empty-rows=unspecified");
  PropertyReport &p = r.properties[0];
  p.tier = Tier::advisory;
  p.verdict = Verdict::warn;
  Outcome &o = p.counterexample->outcome;
  o.verdict = Verdict::warn;
  Case shifted = p.counterexample->minimal;
  for (double &x : shifted.k) x += 1;
  shifted.k[0] = -0.0;  // bits that must survive the round trip
  o.failing_case = shifted;
  o.failing_scale = 0x1.8p-1;
  o.failing_what = "k + 1 on every key";
  return doc;
}


/// A two-row causal case whose row 0 sees no key (Lq = 2 > Lk = 1, bottom-right).
Case empty_row_case() {
  Case c;
  c.spec.shape = {.Lq = 2, .Lk = 1, .D = 1, .Dv = 1};
  c.spec.mask = Mask::causal;
  c.resize_values(false);
  c.q = {1, 2};
  c.k = {1};
  c.v = {3};
  return c;
}

Document hand_document(std::vector<PropertyReport> properties) {
  Document doc;
  doc.tool_version = "t";
  Run run;
  run.source = {KernelSource::Kind::builtin, ""};
  run.plan = "quick";
  run.report.kernel = "hand";
  run.report.properties = std::move(properties);
  doc.runs.push_back(std::move(run));
  return doc;
}

}  // namespace

TEST_CASE("report.json round-trips the contract, tiers, a warning and its failing case exactly") {
  const Document doc = warned_document();
  const std::string json = to_json(doc);
  CHECK(json.find("\"contract\": \"" + doc.runs[0].report.contract.describe() + "\"") != std::string::npos);
  CHECK(json.find("\"tier\": \"advisory\"") != std::string::npos);
  CHECK(json.find("\"verdict\": \"warn\"") != std::string::npos);
  CHECK(json.find("\"failing_what\": \"k + 1 on every key\"") != std::string::npos);
  CHECK(json.find("\"failing_scale\": \"0x1.8p-1\"") != std::string::npos);
  CHECK(json.find("\"strict\": false") != std::string::npos);
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const RunReport &r = back.runs[0].report;
  CHECK(r.contract == doc.runs[0].report.contract);
  CHECK(r.precision() == doc.runs[0].report.precision());
  CHECK(r.properties[0].tier == Tier::advisory);
  CHECK(r.properties[0].verdict == Verdict::warn);
  CHECK(back.runs[1].report.properties[0].tier == Tier::required);
  const Outcome &o = r.properties[0].counterexample->outcome;
  REQUIRE(o.failing_case.has_value());
  CHECK(o.failing_case->same_as(*doc.runs[0].report.properties[0].counterexample->outcome.failing_case));
  CHECK(std::signbit(o.failing_case->k[0]));
  CHECK(o.failing_scale == 0x1.8p-1);
  CHECK(o.failing_what == "k + 1 on every key");
  // A warning is a failure for replay: its number is in the list.
  REQUIRE(back.failures().size() == 1);
  CHECK(back.verdict() == Verdict::warn);

  Document strict = doc;
  strict.strict = true;
  const std::string sj = to_json(strict);
  CHECK(sj.find("\"strict\": true") != std::string::npos);
  CHECK(from_json(sj).strict);
  CHECK(to_json(from_json(sj)) == sj);
  CHECK(strict.verdict() == Verdict::fail);
}

TEST_CASE("a version-1 report.json reads with the contract its precision profile states and every property required") {
  const std::string v1 = R"({
  "format": "attncheck-report",
  "version": 1,
  "tool_version": "0.1.0",
  "verdict": "fail",
  "failures": [{"failure": 1, "run": 0, "kernel": "k", "dtype": "f16", "property": "accuracy"}],
  "runs": [{
    "kernel": "k", "dtype": "f16", "verdict": "fail",
    "profile": {"storage": "f16", "accumulation": "f32", "round_p": true},
    "source": {"kind": "plugin", "location": "/x/libk.so"},
    "run_profile": "quick", "seed": "7", "cases": 15,
    "properties": [
      {"id": "lse", "verdict": "pass", "cases": 15, "unsupported": 0, "undecided": 0, "worst_ratio": 0.5,
       "worst": "", "budget_exhausted": false, "seed": "1", "note": "", "formula": "f", "summary": "s"},
      {"id": "accuracy", "verdict": "fail", "cases": 3, "unsupported": 0, "undecided": 0, "worst_ratio": "inf",
       "worst": "", "budget_exhausted": false, "seed": "2", "note": "", "formula": "f", "summary": "s",
       "counterexample": {
         "failure": 1, "replay": "attncheck replay report.json --failure 1", "step": "finite",
         "outcome": {"verdict": "fail", "step": "finite", "detail": "O[0,0,0,0]: got nan", "worst_ratio": "inf",
                     "worst": ""},
         "inputs": {"spec": {"dtype": "f16", "B": 1, "Hq": 1, "Hkv": 1, "Lq": 1, "Lk": 1, "D": 1, "Dv": 1,
                             "mask": "none", "layout": "bhld", "family": "small_ints"},
                    "scale": "0x1p+0", "q": ["0x1p+0"], "k": ["-0x1p+1"], "v": ["0x1.8p+0"], "dout": []},
         "original": {"dtype": "f16", "B": 1, "Hq": 1, "Hkv": 1, "Lq": 7, "Lk": 9, "D": 4, "Dv": 4,
                      "mask": "causal", "layout": "padded", "family": "normal"},
         "found_after": 1, "shrink_steps": 4, "shrinks_tried": 30, "seed": "2", "reproduce": "abc"}}
    ]
  }]
}
)";
  const Document doc = from_json(v1);
  REQUIRE(doc.runs.size() == 1);
  const RunReport &r = doc.runs[0].report;
  // Version 1 rounded no GQA gradient per head (float16's automatic value): its contract says so.
  KernelContract v1_contract;
  v1_contract.grad_per_head = Allow::no;
  CHECK(r.contract == v1_contract);
  CHECK(r.precision().storage == Dtype::f16);
  CHECK(r.precision().round_p);
  CHECK_FALSE(r.precision().grad_per_head);
  CHECK(r.precision().lse == Dtype::f32);
  CHECK_FALSE(doc.strict);
  REQUIRE(r.properties.size() == 2);
  CHECK(r.properties[0].tier == Tier::required);
  CHECK(r.properties[1].tier == Tier::required);
  REQUIRE(r.properties[1].counterexample.has_value());
  const Counterexample &c = *r.properties[1].counterexample;
  CHECK(c.minimal.k == std::vector<double>{-2});
  CHECK_FALSE(c.outcome.failing_case.has_value());
  CHECK(doc.failures().size() == 1);
  // Written back as version 2, which reads back to the same document.
  const std::string json = to_json(doc);
  CHECK(json.find("\"version\": 2") != std::string::npos);
  CHECK(to_json(from_json(json)) == json);
}

TEST_CASE("summary.md shows the contract per run and the warning in its own section") {
  const std::string md = to_markdown(warned_document());
  INFO(md);
  CHECK(md.find("## attncheck: 1 warning") != std::string::npos);
  CHECK(md.find("| bug:missing\\_scale | f32 | `causal=top-left lse=storage empty-rows=unspecified` | ⚠️ warn | "
                "warn: accuracy | 1 |") != std::string::npos);
  CHECK(md.find("| `defaults` | ✅ pass |") != std::string::npos);
  CHECK(md.find("### ⚠️ warnings — beyond the declared contract") != std::string::npos);
  CHECK(md.find("### ❌ Failures") == std::string::npos);
  CHECK(md.find("**1. ⚠️ accuracy**") != std::string::npos);
  CHECK(md.find("- failing problem: k + 1 on every key") != std::string::npos);
  CHECK(md.find("`attncheck replay report.json --failure 1`") != std::string::npos);
}

TEST_CASE("report.html shows the contract per run and the warning in amber, apart from failures") {
  const Document doc = warned_document();
  const std::string html = to_html(doc);
  CHECK(html.find("contract: <code title=\"" + doc.runs[0].report.contract.describe() + "\">" +
                  doc.runs[0].report.contract.describe_changes() + "</code>") != std::string::npos);
  CHECK(html.find("contract: <code title=\"" + KernelContract{}.describe() + "\">defaults</code>") !=
        std::string::npos);
  CHECK(html.find("<article class=\"failure warning\" id=\"failure-1\">") != std::string::npos);
  CHECK(html.find("Warning 1 · <code>accuracy</code>") != std::string::npos);
  CHECK(html.find("<td class=\"v v-warn\">WARN</td>") != std::string::npos);
  CHECK(html.find("<section class=\"group g-warn\">") != std::string::npos);
  CHECK(html.find("<section class=\"group g-fail\">") == std::string::npos);
  CHECK(html.find("Inputs of the failing problem: k + 1 on every key") != std::string::npos);
  CHECK(html.find("article.warning{border-left-color:var(--warn)") != std::string::npos);
  std::string why;
  const bool ok = balanced(html.substr(html.find("<html")), &why);
  INFO(why);
  CHECK(ok);
  // A failure keeps the red article.
  const std::string failed = to_html(document());
  CHECK(failed.find("<article class=\"failure\" id=\"failure-1\">") != std::string::npos);
  CHECK(failed.find("<section class=\"group g-fail\">") != std::string::npos);
}

TEST_CASE("JUnit: a warning is a passing testcase unless strict, and every suite carries its contract") {
  Document doc = warned_document();
  const std::string xml = to_junit(doc);
  std::string why;
  CHECK(balanced(xml, &why));
  INFO(why);
  CHECK(count(xml, "<failure ") == 0);
  CHECK(xml.find("failures=\"0\"") != std::string::npos);
  CHECK(xml.find("<system-out>WARNING: accuracy:") != std::string::npos);
  CHECK(xml.find("<property name=\"warning\" value=\"") != std::string::npos);
  CHECK(xml.find("<property name=\"contract\" value=\"" + doc.runs[0].report.contract.describe() + "\"/>") !=
        std::string::npos);
  CHECK(xml.find("<property name=\"contract\" value=\"" + KernelContract{}.describe() + "\"/>") != std::string::npos);
  CHECK(count(xml, "<properties>") == 3);  // two suites and the warning

  doc.strict = true;
  const std::string strict = to_junit(doc);
  CHECK(balanced(strict, &why));
  CHECK(count(strict, "<failure ") == 1);
  CHECK(strict.find("<failure message=\"WARNING (--strict): ") != std::string::npos);
  CHECK(strict.find("<system-out>") == std::string::npos);
  CHECK(strict.find("<testsuites name=\"attncheck\" tests=\"3\" failures=\"1\"") != std::string::npos);
}

TEST_CASE("group_failures puts two properties failing on one case with one signature in one group") {
  const Case c = empty_row_case();
  Case other = c;
  other.spec.shape.Lq = 3;
  other.resize_values(false);
  const Finding nan_o = found(Finding::Kind::value, "O", {0, 0, 0, 0}, NAN, 0.0, 0.0);
  const std::string nan_text = "O[0,0,0,0]: got nan (nan), exact 0x0p+0 (0), bound 0x0p+0 (0) (NaN: produced, or "
                               "the element was never written)";
  Document doc = hand_document({
      failing("accuracy", c, Step::finite, nan_o, nan_text),
      failing("scale_parameter", c, Step::finite, nan_o, nan_text),
      failing("lse", c, Step::mask, found(Finding::Kind::value, "LSE", {0, 0, 0}, INFINITY, -INFINITY, 0.0),
              "LSE[0,0,0]: got inf (inf), exact -inf (-inf), bound 0x0p+0 (0) (the contract fixes this value)"),
      failing("convex_hull", c, Step::values,
              found(Finding::Kind::value, "O vs its nearest point of [min_j v_jc, max_j v_jc]", {0, 0, 1, 0}, 4, 3,
                    0x1p-20),
              "O vs its nearest point of [min_j v_jc, max_j v_jc][0,0,1,0]: got 0x1p+2 (4), exact 0x1.8p+1 (3), "
              "bound 0x1p-20 (9.5e-07), error ÷ bound 5.2e+05"),
      failing("sum_to_one", other, Step::finite, nan_o, nan_text),  // another minimal case
      failing("empty_rows", c, Step::finite, nan_o, nan_text, Verdict::warn),  // a warning, not a failure
  });
  const std::vector<FailureGroup> groups = group_failures(doc);
  REQUIRE(groups.size() == 5);
  CHECK(groups[0].members == std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {0, 1}});
  CHECK_FALSE(groups[0].warning);
  CHECK(groups[0].caption.find("step finite: O[0,0,0,0] of a row that sees no key is NaN, the contract fixes 0") == 0);
  CHECK(groups[0].headline.find("accuracy, scale_parameter") != std::string::npos);
  CHECK(groups[0].headline.find("failures 1, 2") != std::string::npos);
  CHECK(groups[1].members == std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}});
  CHECK(groups[1].caption == "step mask: LSE[0,0,0] of a row that sees no key is +Inf, the contract fixes −Inf — no "
                             "declaration explains it");
  CHECK(groups[2].caption.starts_with("step values: O elements out of bound by up to "));
  CHECK(groups[3].members == std::vector<std::pair<std::size_t, std::size_t>>{{0, 4}});
  CHECK(groups[4].warning);
  for (const FailureGroup &g : groups) {
    CHECK(g.headline.find('\n') == std::string::npos);
    CHECK(g.caption.find('\n') == std::string::npos);
  }
  CHECK(group_failures(doc).size() == groups.size());  // deterministic
  CHECK(group_failures(doc)[2].headline == groups[2].headline);

  // summary.md: the group's headline before its members' details, the warning in its own section.
  const std::string md = to_markdown(doc);
  INFO(md);
  CHECK(md.find("### ❌ Failures — 5 counterexamples, 4 root causes") != std::string::npos);
  const std::size_t head = md.find("#### A. hand (f32): accuracy, scale\\_parameter");
  REQUIRE(head != std::string::npos);
  CHECK(head < md.find("**1. accuracy**"));
  CHECK(md.find("**1. accuracy**") < md.find("**2. scale\\_parameter**"));
  CHECK(md.find("### ⚠️ warnings — beyond the declared contract") < md.find("**6. ⚠️ empty\\_rows**"));
}

/// Four properties checked on a kernel whose rows that see no key come out NaN: several counterexamples, one cause.
Document nan_rows_document() {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = {"accuracy", "scale_parameter", "convex_hull", "shift_invariance"};
  const attncheck_kernel &kernel = support::variant_kernel(support::bug_variant(support::Bug::nan_fully_masked_rows));
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(run_of(check(kernel, opt)));
  return doc;
}

TEST_CASE("a failure whose minimal case passes under the run's declaration is explained as its siblings are") {
  const Case c = empty_row_case();
  Case other = c, third = c;
  other.spec.shape.Lq = 3;
  other.resize_values(false);
  third.spec.shape.Lq = 4;
  third.resize_values(false);
  const Finding o = found(Finding::Kind::value, "O", {0, 0, 0, 0}, 1.0, 0.0, 0.0);
  const std::string text = "O[0,0,0,0]: got 0x1p+0 (1), exact 0x0p+0 (0), bound 0x0p+0 (0)";
  const Explanation empty_rows{"empty-rows=unspecified", "rows that see no key are left to the kernel"};
  Document doc = hand_document({failing("accuracy", c, Step::mask, o, text), failing("lse", other, Step::mask, o, text),
                                failing("convex_hull", third, Step::mask, o, text)});
  std::vector<PropertyReport> &ps = doc.runs[0].report.properties;
  ps[0].counterexample->explained_by = {empty_rows};
  ps[1].counterexample->explained_by = {empty_rows};
  // Its fresh cases failed under the declaration alone: it passes under it, unconfirmed.
  ps[2].counterexample->passes_under = {"causal=top-left", "empty-rows=unspecified"};
  const std::vector<FailureGroup> groups = group_failures(doc);
  REQUIRE(groups.size() == 3);
  INFO(groups[2].caption);
  CHECK(groups[2].explained == std::vector<Explanation>{empty_rows});
  CHECK(groups[2].caption.find("explained by the declaration empty-rows=unspecified as the run's other failures "
                               "are") != std::string::npos);
  CHECK(groups[2].caption.find("no declaration explains it") == std::string::npos);
  // report.json keeps what it passed under.
  CHECK(from_json(to_json(doc)).runs[0].report.properties[2].counterexample->passes_under ==
        ps[2].counterexample->passes_under);
  // Passing under another declaration than the run's is no explanation.
  ps[2].counterexample->passes_under = {"causal=top-left"};
  CHECK(group_failures(doc)[2].explained.empty());
  CHECK(group_failures(doc)[2].caption.find("no declaration explains it") != std::string::npos);
}

TEST_CASE("grouping reads findings, not messages: reworded details leave groups, captions' elements and headlines") {
  const Document doc = nan_rows_document();
  REQUIRE(doc.failures().size() >= 2);
  const std::vector<FailureGroup> before = group_failures(doc);
  Document reworded = doc;
  for (auto [r, p] : reworded.failures()) {
    Outcome &o = reworded.runs[r].report.properties[p].counterexample->outcome;
    REQUIRE(o.finding);
    o.detail = "reworded: " + std::string(o.detail.rbegin(), o.detail.rend());
    o.worst = "elsewhere";
  }
  const std::vector<FailureGroup> after = group_failures(reworded);
  REQUIRE(after.size() == before.size());
  for (std::size_t g = 0; g < before.size(); ++g) {
    CHECK(after[g].members == before[g].members);
    CHECK(after[g].headline == before[g].headline);
  }
  // The findings survive report.json, and so does the grouping.
  const Document back = from_json(to_json(doc));
  CHECK(to_json(back) == to_json(doc));
  for (auto [r, p] : doc.failures()) {
    const std::optional<Finding> &was = doc.runs[r].report.properties[p].counterexample->outcome.finding;
    const std::optional<Finding> &read = back.runs[r].report.properties[p].counterexample->outcome.finding;
    REQUIRE(read);
    CHECK((read->kind == was->kind && read->tensor == was->tensor && read->index == was->index));
  }
  CHECK(group_failures(back).size() == before.size());
}

TEST_CASE("a planted bug found by several properties gives fewer root causes than counterexamples") {
  const Document doc = nan_rows_document();
  const std::size_t counterexamples = doc.failures().size();
  const std::vector<FailureGroup> groups = group_failures(doc);
  INFO(to_markdown(doc));
  REQUIRE(counterexamples >= 2);
  CHECK(groups.size() < counterexamples);
  std::size_t members = 0;
  for (const FailureGroup &g : groups) members += g.members.size();
  CHECK(members == counterexamples);
}

TEST_CASE("a metamorphic failure's evidence is the kernel on the failing problem, not the generated case") {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = {"shift_invariance"};
  opt.evidence = true;
  const attncheck_kernel &kernel = support::variant_kernel(support::bug_variant(support::Bug::no_rescale));
  Run run = run_of(check(kernel, opt));
  REQUIRE(run.report.properties.size() == 1);
  REQUIRE(run.report.properties[0].counterexample.has_value());
  const Counterexample &c = *run.report.properties[0].counterexample;
  INFO(run.report.text());
  REQUIRE(c.outcome.failing_case.has_value());
  CHECK(c.outcome.failing_what == "v + 1 on every value");
  const Case &f = *c.outcome.failing_case;
  CHECK_FALSE(f.same_as(c.minimal));
  CHECK(f.v != c.minimal.v);
  REQUIRE(evidence_at(run, 0).has_value());
  const Evidence &ev = *evidence_at(run, 0);
  CHECK(ev.call_error.empty());
  // The exact values are those of the failing problem (every O shifted by 1), not of the generated case.
  const ExactForward on_failing = reference_forward(f.problem()), on_minimal = reference_forward(c.minimal.problem());
  CHECK(ev.exact == on_failing.out);
  CHECK(ev.exact != on_minimal.out);
  Document doc;
  doc.tool_version = "t";
  doc.runs.push_back(run);
  const std::string json = to_json(doc);
  CHECK(json.find("\"failing_case\": {") != std::string::npos);
  CHECK(to_json(from_json(json)) == json);
  const std::string html = to_html(doc);
  CHECK(html.find("Inputs of the failing problem: v + 1 on every value") != std::string::npos);
  CHECK(html.find("Inputs of the generated (minimal) case") != std::string::npos);
}

TEST_CASE("a rescaled failure's evidence runs at the failing scale") {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = {"scale_parameter"};
  opt.evidence = true;
  const attncheck_kernel &kernel = buggy();  // scale ignored
  Run run = run_of(check(kernel, opt));
  REQUIRE(run.report.properties[0].counterexample.has_value());
  const Counterexample &c = *run.report.properties[0].counterexample;
  REQUIRE(c.outcome.failing_case.has_value());
  REQUIRE(c.outcome.failing_scale != 0);
  const Evidence &ev = *evidence_at(run, 0);
  Problem p = c.outcome.failing_case->problem();
  p.params.scale = c.outcome.failing_scale;
  const ExactForward exact = reference_forward(p);
  CHECK((ev.tensor == "O" ? ev.exact == exact.out : ev.exact == exact.lse));
  const auto w = ev.worst_index();
  REQUIRE(w >= 0);
  CHECK(error_ratio(ev.got[static_cast<std::size_t>(w)], ev.exact[static_cast<std::size_t>(w)],
                    ev.bound[static_cast<std::size_t>(w)]) > 1);
}

TEST_CASE("a long-row counterexample keeps its stretch, its core inputs and its evidence through report.json") {
  // A tail block dropped past 16 keys: long_rows shrinks it to a stretched case whose core is tiny.
  const attncheck_kernel &k = support::variant_kernel(support::bug_variant(support::Bug::drop_last_partial_block));
  Document d;
  d.runs.push_back(checked(k, {"long_rows"}));
  const Counterexample &c = *d.runs[0].report.properties.at(0).counterexample;
  REQUIRE(c.minimal.spec.stretch.active());
  const std::string json = to_json(d);
  CHECK(json.find("\"stretch\"") != std::string::npos);
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const Counterexample &b = *back.runs[0].report.properties.at(0).counterexample;
  CHECK(b.minimal.same_as(c.minimal));
  // The evidence is the long problem's O or LSE (its shape, not the core's), against exact values from the core.
  const Evidence &e = *evidence_at(back.runs[0], 0);
  const Shape ls = c.minimal.spec.problem_shape();
  CHECK(e.shape == (e.tensor == "LSE" ? std::vector<std::int64_t>{ls.B, ls.Hq, ls.Lq}
                                      : std::vector<std::int64_t>{ls.B, ls.Hq, ls.Lq, ls.Dv}));
  CHECK(e.exact.size() == e.got.size());
  CHECK(!e.got.empty());
}

TEST_CASE("a declaration that explains a failure replaces the guess in its caption and round-trips report.json") {
  const Case c = empty_row_case();
  const std::string lse = "LSE[0,0,1]: got 0x1p+2 (4), exact 0x1.8p+1 (3), bound 0x1p-20 (9.5e-07), error ÷ bound 1e+06";
  const Finding found_lse = found(Finding::Kind::value, "LSE", {0, 0, 1}, 4, 3, 0x1p-20);
  Document doc = hand_document(
      {failing("softcap", c, Step::values, found_lse, lse), failing("lse", c, Step::values, found_lse, lse)});
  const Explanation tanh{"tanh=approx", "softcap's tanh is the hardware approximation"};
  // A hint the engine computed (here by hand): the caption quotes it while nothing explains the group.
  Hint scale_hint;
  scale_hint.kind = Hint::Kind::scale;
  scale_hint.scale = 1;
  scale_hint.text = "O and LSE are the exact attention at scale 1, not 1/√D = 0.7071";
  doc.runs[0].report.properties[0].counterexample->evidence.emplace().hints = {scale_hint};
  {
    const std::vector<FailureGroup> unexplained = group_failures(doc);
    REQUIRE(unexplained.size() == 1);
    // No canned guess: the caption is the element, the computed hint and the verdict on declarations.
    CHECK(unexplained[0].caption ==
          "step values: LSE elements out of bound by up to ∞× (LSE[0,0,1]: got 4, exact 3) — " + scale_hint.text +
              " — no declaration explains it");
    CHECK(unexplained[0].hints == std::vector<Hint>{scale_hint});
    CHECK(unexplained[0].caption.find("explained by") == std::string::npos);
  }
  for (PropertyReport &p : doc.runs[0].report.properties) p.counterexample->explained_by = {tanh};
  const std::vector<FailureGroup> groups = group_failures(doc);
  REQUIRE(groups.size() == 1);
  // The declaration is the explanation: no hint beside it.
  CHECK(groups[0].caption.find(scale_hint.text) == std::string::npos);
  CHECK(groups[0].hints.empty());
  CHECK(groups[0].caption.find(" — explained by the declaration tanh=approx: if softcap's tanh is the hardware "
                               "approximation, declare it") != std::string::npos);
  CHECK(to_markdown(doc).find("explained by the declaration tanh=approx") != std::string::npos);
  CHECK(groups[0].explained == std::vector<Explanation>{tanh});
  CHECK(count(counterexample_text(doc, 1, {.inputs = true}), "explained by the declaration tanh=approx") == 1);
  const std::string json = to_json(doc);
  CHECK(json.find("\"explained_by\"") != std::string::npos);
  const Document back = from_json(json);
  CHECK(back.runs[0].report.properties[0].counterexample->explained_by == std::vector<Explanation>{tanh});
  CHECK(to_json(back) == json);
  // Explained for one member only: the group's caption claims nothing.
  doc.runs[0].report.properties[1].counterexample->explained_by.clear();
  CHECK(group_failures(doc)[0].caption.find("explained by") == std::string::npos);
  // The summary's text names it under that member then.
  const std::string first = counterexample_text(doc, 1, {.inputs = true});
  CHECK(first.find("\n    explained by the declaration tanh=approx: if softcap's tanh is the hardware approximation, "
                   "declare it\n") != std::string::npos);
  CHECK(counterexample_text(doc, 2, {.inputs = true}).find("explained by") == std::string::npos);
  CHECK(to_text(doc).find("explained by") == std::string::npos);  // the gate's table as it was
}
