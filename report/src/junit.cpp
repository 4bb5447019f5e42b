// JUnit XML: a <testsuite> per (kernel, dtype), a <testcase> per property. fail → <failure> with the
// counterexample; unsupported → <skipped/>; undecided → <skipped message="undecided: …"/> (not a failure: the
// checks could not decide, which a CI gate should see but not count as a bug).
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
  t += "failing step: " + std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + " — " + c.outcome.detail +
       "\n";
  if (ev && !ev->call_error.empty()) t += "call error: " + ev->call_error + "\n";
  if (const auto w = ev ? telling_worst(*ev) : std::nullopt) {
    const std::size_t x = *w;
    t += "worst element: " + element_name(ev->tensor, ev->shape, static_cast<std::int64_t>(x)) + ": got " +
         hex_dec(ev->got[x]) + ", exact " + hex_dec(ev->exact[x]) + ", bound " + hex_dec(ev->bound[x]) +
         ", error ÷ bound " + ratio_text(error_ratio(ev->got[x], ev->exact[x], ev->bound[x])) + "\n";
  }
  if (c.found_after > 0)
    t += "found after " + std::to_string(c.found_after) + " cases; shrunk in " + std::to_string(c.shrink_steps) +
         " steps from " + c.original.describe() + "\n";
  t += "inputs: " + c.minimal.describe(kValuesInText);
  t += "seed: " + std::to_string(c.seed) + "\nreproduce: " + c.reproduce + "\nreplay: " + replay_command(number) +
       "\n";
  return t;
}

}  // namespace

std::string to_junit(const Document &doc) {
  int tests = 0, failures = 0, skipped = 0;
  std::string suites;
  std::size_t number = 0;
  for (const Run &run : doc.runs) {
    const Report &r = run.report;
    const std::string cls = xml_escape("attncheck." + r.kernel + "." + std::string(dtype_name(r.dtype)));
    int s_failures = 0, s_skipped = 0;
    std::string cases;
    for (std::size_t pi = 0; pi < r.properties.size(); ++pi) {
      const PropertyReport &p = r.properties[pi];
      cases += "    <testcase classname=\"" + cls + "\" name=\"" + xml_escape(p.id) + "\"";
      switch (p.verdict) {
        case Verdict::pass: cases += "/>\n"; break;
        case Verdict::fail: {
          ++s_failures;
          const Evidence *ev = pi < run.evidence.size() && run.evidence[pi] ? &*run.evidence[pi] : nullptr;
          const std::string text = p.counterexample ? failure_text(p, ++number, ev) : p.note;
          const std::string message =
              p.counterexample ? first_line(p.counterexample->outcome.detail) : first_line(p.note);
          cases += ">\n      <failure message=\"" + xml_escape(message) + "\" type=\"" +
                   xml_escape(p.counterexample && p.counterexample->outcome.step
                                  ? step_id(*p.counterexample->outcome.step)
                                  : "fail") +
                   "\">" + xml_escape(text) + "</failure>\n    </testcase>\n";
          break;
        }
        case Verdict::unsupported:
          ++s_skipped;
          cases += ">\n      <skipped message=\"" + xml_escape("unsupported: " + first_line(p.note)) +
                   "\"/>\n    </testcase>\n";
          break;
        case Verdict::undecided:
          ++s_skipped;
          cases += ">\n      <skipped message=\"" + xml_escape("undecided: " + first_line(p.note)) +
                   "\"/>\n    </testcase>\n";
          break;
      }
    }
    const int n = static_cast<int>(r.properties.size());
    tests += n, failures += s_failures, skipped += s_skipped;
    suites += "  <testsuite name=\"" + cls + "\" tests=\"" + std::to_string(n) + "\" failures=\"" +
              std::to_string(s_failures) + "\" errors=\"0\" skipped=\"" + std::to_string(s_skipped) + "\">\n" +
              cases + "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attncheck\" tests=\"" +
         std::to_string(tests) + "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" skipped=\"" +
         std::to_string(skipped) + "\">\n" + suites + "</testsuites>\n";
}

}  // namespace attncheck::reporting
