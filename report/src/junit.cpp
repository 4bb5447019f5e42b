// JUnit XML: a <testsuite> per (kernel, dtype) with its contract in <properties>, a <testcase> per property.
// fail → <failure> with the counterexample; warn (an advisory property: beyond the contract) → a passing testcase
// with a "warning" <property> and "WARNING: …" in <system-out>, or <failure> when the Document is strict;
// unsupported → <skipped/>; undecided → <skipped message="undecided: …"/> (not a failure: the checks could not
// decide, which a CI gate should see but not count as a bug).
#include "common.h"

namespace attncheck::reporting {

namespace {

using namespace detail;

/// Input values printed per tensor in a failure's text.
constexpr std::size_t kValuesInText = 64;

std::string failure_text(const PropertyReport &p, std::size_t number, const Evidence *ev) {
  const Counterexample &c = *p.counterexample;
  std::string t = p.id + ": " + p.formula + "\n";
  if (!p.summary.empty()) t += "meaning: " + p.summary + "\n";
  if (p.verdict == Verdict::warn) t += "tier: advisory — beyond the kernel's declared contract\n";
  t += "failing step: " + std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + " — " + c.outcome.detail +
       "\n";
  if (ev && !ev->call_error.empty()) t += "call error: " + ev->call_error + "\n";
  if (const auto w = ev ? telling_worst(*ev) : std::nullopt) {
    const std::size_t x = *w;
    t += "worst element: " + element_name(ev->tensor, ev->shape, static_cast<std::int64_t>(x)) + ": got " +
         hex_dec(ev->got[x]) + ", exact " + hex_dec(ev->exact[x]) + ", bound " + hex_dec(ev->bound[x]) +
         ", error ÷ bound " + ratio_text(ev->ratio(x)) + "\n";
  }
  if (ev && ev->original) t += comparison_text(*ev, c.outcome.failing_what) + "\n";
  if (ev && c.explained_by.empty())  // what the evidence shows about the defect (verified, Evidence::hints)
    for (const Hint &h : ev->hints) t += "hint: " + h.text + "\n";
  if (c.from_corpus()) t += "from the corpus: entry " + c.corpus_entry + ", recorded by an earlier run, fails again\n";
  if (c.found_after > 0)
    t += "found after " + std::to_string(c.found_after) + " cases; shrunk in " + std::to_string(c.shrink_steps) +
         " steps from " + c.original.describe() + "\n";
  t += "inputs: " + c.minimal.describe(kValuesInText);
  if (c.outcome.failing_case) {
    t += "failing problem (" + c.outcome.failing_what + ")";
    if (c.outcome.failing_scale != 0) t += ", scale " + hex_dec(c.outcome.failing_scale);
    t += ": " + c.outcome.failing_case->describe(kValuesInText);
  }
  t += "seed: " + std::to_string(c.seed) + "\nreproduce: " + c.reproduce + "\nreplay: " + replay_command(number) +
       "\n";
  return t;
}

std::string property_xml(std::string_view name, std::string_view value) {
  return "<property name=\"" + xml_escape(name) + "\" value=\"" + xml_escape(value) + "\"/>";
}

}  // namespace

std::string to_junit(const Document &doc) {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  std::string suites;
  std::size_t number = 0;
  for (const Run &run : doc.runs) {
    const RunReport &r = run.report;
    const std::string cls = xml_escape("attncheck." + r.kernel + "." + std::string(dtype_name(r.dtype)));
    int s_failures = 0, s_errors = 0, s_skipped = 0;
    std::string cases;
    for (std::size_t pi = 0; pi < r.properties.size(); ++pi) {
      const PropertyReport &p = r.properties[pi];
      const Evidence *ev = evidence_of(run, pi);
      if (p.counterexample) ++number;
      cases += "    <testcase classname=\"" + cls + "\" name=\"" + xml_escape(p.id) + "\"";
      const bool warning = p.verdict == Verdict::warn;
      const std::string text = p.counterexample ? failure_text(p, number, ev) : p.note;
      // A counterexample from the corpus says so first: an earlier run recorded it (check --corpus).
      const std::string message =
          p.counterexample ? (p.counterexample->from_corpus()
                                  ? "from the corpus (entry " + p.counterexample->corpus_entry + "): "
                                  : std::string()) +
                                 first_line(p.counterexample->outcome.detail)
                           : first_line(p.note);
      const std::string type =
          p.counterexample && p.counterexample->outcome.step ? std::string(step_id(*p.counterexample->outcome.step))
                                                             : "fail";
      if (p.verdict == Verdict::fail || (warning && doc.strict)) {
        ++s_failures;
        cases += ">\n";
        if (warning) cases += "      <properties>" + property_xml("warning", message) + "</properties>\n";
        cases += "      <failure message=\"" + xml_escape((warning ? "WARNING (--strict): " : "") + message) +
                 "\" type=\"" + xml_escape(type) + "\">" + xml_escape(text) + "</failure>\n    </testcase>\n";
        continue;
      }
      switch (p.verdict) {
        case Verdict::pass: cases += "/>\n"; break;
        case Verdict::fail: break;  // above
        case Verdict::warn:
          // Beyond the contract: a passing testcase that says what it found.
          cases += ">\n      <properties>" + property_xml("warning", message) + "</properties>\n      <system-out>" +
                   xml_escape("WARNING: " + text) + "</system-out>\n    </testcase>\n";
          break;
        case Verdict::unsupported:
          ++s_skipped;
          cases += ">\n      <skipped message=\"" +
                   xml_escape((p.tier == Tier::off ? "off by contract: " : "unsupported: ") + first_line(p.note)) +
                   "\"/>\n    </testcase>\n";
          break;
        case Verdict::undecided:
          ++s_skipped;
          cases += ">\n      <skipped message=\"" + xml_escape("undecided: " + first_line(p.note)) +
                   "\"/>\n    </testcase>\n";
          break;
        case Verdict::error:  // attncheck's own failure: JUnit's <error>, not a failure of the kernel
          ++s_errors;
          cases += ">\n      <error message=\"" + xml_escape(first_line(p.note)) + "\" type=\"attncheck\">" +
                   xml_escape(p.note) + "</error>\n    </testcase>\n";
          break;
      }
    }
    const int n = static_cast<int>(r.properties.size());
    tests += n, failures += s_failures, errors += s_errors, skipped += s_skipped;
    suites += "  <testsuite name=\"" + cls + "\" tests=\"" + std::to_string(n) + "\" failures=\"" +
              std::to_string(s_failures) + "\" errors=\"" + std::to_string(s_errors) + "\" skipped=\"" +
              std::to_string(s_skipped) + "\">\n" +
              "    <properties>" + property_xml("contract", r.contract.describe()) +
              property_xml("contract_changes", r.contract.describe_changes()) +
              property_xml("profile", r.precision().describe()) + property_xml("strict", doc.strict ? "true" : "false") +
              "</properties>\n" + cases + "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attncheck\" tests=\"" +
         std::to_string(tests) + "\" failures=\"" + std::to_string(failures) + "\" errors=\"" +
         std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) + "\">\n" + suites + "</testsuites>\n";
}

}  // namespace attncheck::reporting
