// The evidence of metamorphic properties: a failure there is a difference between two problems (the generated case
// and a modified copy), so the evidence keeps the kernel on both, the rows that differ beyond what the property
// allows and the failing element's row — on a real check of a planted causal bug, on a hand-made causal comparison
// judged by a correct and a buggy kernel, and through report.json, summary.md, report.html and JUnit.
#include "attncheck/check.h"
#include "attncheck/reference.h"
#include "attncheck/report_io.h"
#include "diagnosis/diagnosis.h"
#include "report_support.h"
#include "variant_kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace attncheck;
using namespace attncheck::reporting;
using attncheck::test::balanced;
using attncheck::test::error_of;
using attncheck::test::evidence_at;
using attncheck::test::failing;
using attncheck::test::found;

namespace {

/// Few cases: the planted bug fails on the first causal case, and the MPFR reference dominates the time.
constexpr int kCases = 20;

const attncheck_kernel &off_by_one() {
  return support::variant_kernel(support::bug_variant(support::Bug::causal_off_by_one));
}
const attncheck_kernel &correct() { return support::variant_kernel(support::Variant{}); }

Document one_run(RunReport report) {
  Document doc;
  doc.tool_version = "t";
  Run run;
  run.plan = "quick";
  run.report = std::move(report);
  doc.runs.push_back(std::move(run));
  return doc;
}

/// A hand-made report with the evidence of `kernel` on its counterexamples.
Document one_run(RunReport report, const attncheck_kernel &kernel) {
  diagnosis::add_evidence(report, kernel);
  return one_run(std::move(report));
}

Document checked(const attncheck_kernel &kernel, std::vector<std::string> properties) {
  CheckOptions opt;
  opt.cases = kCases;
  opt.properties = std::move(properties);
  opt.evidence = true;  // the engine gathers each counterexample's evidence
  return one_run(check(kernel, opt));
}

/// The planted off-by-one causal mask, checked once for every test that reads it.
const Document &causal_bug() {
  static const Document doc = checked(off_by_one(), {"causal"});
  return doc;
}

/// Rows [row·len, (row+1)·len) of `a` and `b` hold the same values.
bool same_row(const std::vector<double> &a, const std::vector<double> &b, std::int64_t row, std::int64_t len) {
  const auto first = static_cast<std::ptrdiff_t>(row * len);
  return std::equal(a.begin() + first, a.begin() + first + len, b.begin() + first);
}

/// The row whose elements `text` names first ("O[0,0,1,2]: …" is in row O[0,0,1]), or −1.
std::int64_t row_named(const Evidence &e, const std::string &text) {
  for (std::int64_t r = 0; r < e.rows(); ++r) {
    std::string prefix = e.row_name(r);
    if (e.tensor != "LSE") prefix.back() = ',';  // "O[0,0,1]" → "O[0,0,1,": its elements
    if (text.starts_with(prefix)) return r;
  }
  return -1;
}

/// A four-row causal case (Lq = Lk = 4, D = Dv = 2) with small distinct values.
Case causal_case() {
  Case c;
  c.spec.shape = {.Lq = 4, .Lk = 4, .D = 2, .Dv = 2};
  c.spec.mask = Mask::causal;
  c.resize_values(false);
  c.q = {1, 0, 0, 1, 1, 1, -1, 1};
  c.k = {1, -1, 0, 1, 1, 0, -1, -1};
  c.v = {1, 2, -1, 0, 3, 1, 0, -2};
  return c;
}

/// causal's comparison for row 1, by hand: the keys hidden from row 1 (j ≥ 2) changed, failing at step mask on
/// O[0,0,1,0] — whichever kernel is then re-run on it.
RunReport causal_comparison() {
  const Case c = causal_case();
  Case changed = c;
  constexpr std::size_t kFirstHidden = 2 * 2;  // key 2's first element (D = Dv = 2)
  for (std::vector<double> *t : {&changed.k, &changed.v})
    for (std::size_t x = kFirstHidden; x < t->size(); ++x) (*t)[x] = (*t)[x] == 2 ? -2 : 2;
  PropertyReport p = failing("causal", c, Step::mask, found(Finding::Kind::changed, "O", {0, 0, 1, 0}, 1, 0),
                             "O[0,0,1,0]: changed to … with the keys hidden from row 1 (j ≥ 2) changed, … without");
  Outcome &o = p.counterexample->outcome;
  o.failing_case = changed;
  o.failing_what = "keys hidden from row 1 (j ≥ 2) changed to other finite values";
  RunReport r;
  r.kernel = "hand";
  r.properties.push_back(p);
  return r;
}

/// Element [a,b,c,d] of a float32 tensor (strides in elements, as the ABI hands them).
float *element(const DLTensor *t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  const std::int64_t x = a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3];
  return reinterpret_cast<float *>(static_cast<char *>(t->data) + t->byte_offset) + x;
}

/// The correct kernel, except that O[0,0,1,0] moves up one ulp when k[0,0,3,0] is 2: row 1 reads a key its mask
/// hides (in causal_comparison's changed copy), by far less than any bound.
const attncheck_kernel &ulp_leak() {
  static const attncheck_kernel kernel{
      ATTNCHECK_ABI_VERSION, "ulp_leak",
      [](const attncheck_params *p, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
         DLTensor *lse) {
        const int status = correct().forward(p, q, k, v, out, lse);
        if (status == ATTNCHECK_OK && *element(k, 0, 0, 3, 0) == 2) {
          float *o = element(out, 0, 0, 1, 0);
          *o = std::nextafter(*o, INFINITY);
        }
        return status;
      },
      nullptr, nullptr};
  return kernel;
}

}  // namespace

TEST_CASE("a planted causal bug's evidence holds both problems, each with its exact values") {
  const Document &doc = causal_bug();
  const PropertyReport &p = doc.runs[0].report.properties.at(0);
  INFO(doc.runs[0].report.text());
  REQUIRE(p.counterexample.has_value());
  const Counterexample &c = *p.counterexample;
  REQUIRE(c.outcome.failing_case.has_value());
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.original.has_value());
  CHECK(ev.original->call_error.empty());
  CHECK(ev.original->shape == ev.shape);
  const ExactForward on_minimal = reference_forward(c.minimal.problem());
  const ExactForward on_modified = reference_forward(c.outcome.failing_case->problem());
  CHECK(ev.original->exact == (ev.tensor == "LSE" ? on_minimal.lse : on_minimal.out));
  CHECK(ev.exact == (ev.tensor == "LSE" ? on_modified.lse : on_modified.out));
  CHECK(ev.original->got.size() == ev.got.size());
  CHECK(ev.original->got != ev.got);
  CHECK(ev.original->bound.size() == ev.bound.size());
}

TEST_CASE("a planted causal bug's evidence marks the row the kernel got wrong, and only rows that differ") {
  const Document &doc = causal_bug();
  const Counterexample &c = *doc.runs[0].report.properties.at(0).counterexample;
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.original.has_value());
  INFO(c.outcome.detail);
  // The failing element's row: its exact values are the same on both problems (the mask hides every changed key
  // from it), yet the kernel's changed — it read a key it must not see.
  const std::int64_t row = row_named(ev, c.outcome.detail);
  REQUIRE(row >= 0);
  CHECK(ev.marked_row == row);
  CHECK(std::binary_search(ev.differing_rows.begin(), ev.differing_rows.end(), row));
  const std::int64_t len = ev.row_length();
  CHECK(same_row(ev.original->exact, ev.exact, row, len));
  CHECK_FALSE(same_row(ev.original->got, ev.got, row, len));
  // Every row listed changed in the kernel's values; every row the kernel left unchanged is not listed.
  for (std::int64_t r = 0; r < ev.rows(); ++r) {
    const bool listed = std::binary_search(ev.differing_rows.begin(), ev.differing_rows.end(), r);
    if (same_row(ev.original->got, ev.got, r, len)) CHECK_FALSE(listed);
  }
  CHECK(std::is_sorted(ev.differing_rows.begin(), ev.differing_rows.end()));
}

TEST_CASE("a correct kernel passes the metamorphic properties and its report has no comparison of two problems") {
  const Document doc = checked(correct(), {"causal", "shift_invariance", "permutation_equivariance"});
  INFO(doc.runs[0].report.text());
  for (const PropertyReport &p : doc.runs[0].report.properties) CHECK(p.verdict == Verdict::pass);
  for (const PropertyReport &p : doc.runs[0].report.properties) CHECK_FALSE(p.counterexample.has_value());
  CHECK(to_markdown(doc).find("beyond what the property allows") == std::string::npos);
  CHECK(to_html(doc).find("The two problems") == std::string::npos);
  CHECK(to_json(doc).find("\"differing_rows\"") == std::string::npos);
}

TEST_CASE("on one causal comparison a correct kernel differs in no row, the off-by-one mask in the row it misreads") {
  const Document right = one_run(causal_comparison(), correct());
  const Evidence &ok = *evidence_at(right.runs[0], 0);
  REQUIRE(ok.original.has_value());
  CHECK(ok.tensor == "O");
  CHECK(ok.marked_row == 1);
  CHECK(ok.differing_rows.empty());
  // Rows 2 and 3 see the changed keys: both the kernel's and the exact values change there, alike.
  CHECK_FALSE(same_row(ok.original->got, ok.got, 3, ok.row_length()));
  CHECK_FALSE(same_row(ok.original->exact, ok.exact, 3, ok.row_length()));

  const Document wrong = one_run(causal_comparison(), off_by_one());
  const Evidence &bad = *evidence_at(wrong.runs[0], 0);
  REQUIRE(bad.original.has_value());
  CHECK(bad.marked_row == 1);
  CHECK(std::binary_search(bad.differing_rows.begin(), bad.differing_rows.end(), 1));
  CHECK_FALSE(std::binary_search(bad.differing_rows.begin(), bad.differing_rows.end(), 0));
}

TEST_CASE("a row the mask fixes that moves by one ulp differs though the change is within both bounds") {
  const Document doc = one_run(causal_comparison(), ulp_leak());
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.original.has_value());
  CHECK(ev.differing_rows == std::vector<std::int64_t>{1});
  const std::size_t x = 1 * 2;  // O[0,0,1,0]
  CHECK(ev.got[x] != ev.original->got[x]);
  CHECK(ev.exact[x] == ev.original->exact[x]);
  CHECK(std::abs(ev.got[x] - ev.original->got[x]) <= ev.bound[x] + ev.original->bound[x]);
}

TEST_CASE("report.json round-trips the original, the differing rows and the marked row, and refuses rows outside") {
  const Document &doc = causal_bug();
  const std::string json = to_json(doc);
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.marked_row >= 0);
  CHECK(json.find("\"original\": {") != std::string::npos);
  CHECK(json.find("\"marked_row\": " + std::to_string(ev.marked_row)) != std::string::npos);
  const Document back = from_json(json);
  CHECK(to_json(back) == json);
  const Evidence &b = *evidence_at(back.runs[0], 0);
  CHECK(b.original == ev.original);
  CHECK(b.differing_rows == ev.differing_rows);
  CHECK(b.marked_row == ev.marked_row);

  const std::string marked = "\"marked_row\": " + std::to_string(ev.marked_row);
  std::string beyond = json;
  beyond.replace(beyond.find(marked), marked.size(), "\"marked_row\": " + std::to_string(ev.rows()));
  CHECK(error_of(beyond).find("\"marked_row\"") != std::string::npos);
  std::string unmarked = json;
  unmarked.replace(unmarked.find(marked), marked.size(), "\"marked_row\": null");
  CHECK(evidence_at(from_json(unmarked).runs[0], 0)->marked_row == -1);
  std::string repeated = json;
  const std::string rows = "\"differing_rows\": [";
  repeated.insert(repeated.find(rows) + rows.size(), std::to_string(ev.differing_rows.at(0)) + ", ");
  CHECK(error_of(repeated).find("\"differing_rows\" are not ascending rows") != std::string::npos);
}

TEST_CASE("summary.md, report.html and JUnit name the row that differs and show it on both problems") {
  const Document &doc = causal_bug();
  const Counterexample &c = *doc.runs[0].report.properties.at(0).counterexample;
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.marked_row >= 0);
  std::string name = ev.row_name(ev.marked_row);  // "O[0,0,1]", escaped as Markdown writes it
  name.replace(name.find('['), 1, "\\[").replace(name.find(']'), 1, "\\]");
  const std::string md = to_markdown(doc);
  INFO(md);
  CHECK(md.find("- row " + name + " differs (the failing element's): original \\[") != std::string::npos);
  CHECK(md.find(" beyond what the property allows: ") != std::string::npos);
  const std::string html = to_html(doc);
  CHECK(html.find("row " + ev.row_name(ev.marked_row) + " differs (the failing element") != std::string::npos);
  CHECK(html.find("<h5>original: the generated (minimal) case</h5>") != std::string::npos);
  CHECK(html.find("<h5>modified: " + c.outcome.failing_what + "</h5>") != std::string::npos);
  CHECK(html.find("marked\"><title>") != std::string::npos);  // class "marked" or "over marked"
  CHECK(html.find("<tr><th>original: got</th>") != std::string::npos);
  std::string why;
  const bool ok = balanced(html.substr(html.find("<html")), &why);
  INFO(why);
  CHECK(ok);
  CHECK(to_junit(doc).find("row " + ev.row_name(ev.marked_row) + " differs (the failing element&#39;s): original [") !=
        std::string::npos);
}

TEST_CASE("a kernel that ignores the scale differs in the row whose exact values move while its own stay") {
  const Document doc = checked(support::variant_kernel(support::bug_variant(support::Bug::missing_scale)),
                               {"scale_parameter"});
  const Counterexample &c = *doc.runs[0].report.properties.at(0).counterexample;
  REQUIRE(c.outcome.failing_case.has_value());
  const Evidence &ev = *evidence_at(doc.runs[0], 0);
  REQUIRE(ev.original.has_value());
  INFO(to_markdown(doc));
  const std::int64_t row = row_named(ev, c.outcome.detail);
  REQUIRE(row >= 0);
  CHECK(ev.marked_row == row);
  CHECK(std::binary_search(ev.differing_rows.begin(), ev.differing_rows.end(), row));
  CHECK_FALSE(same_row(ev.original->exact, ev.exact, row, ev.row_length()));
}
