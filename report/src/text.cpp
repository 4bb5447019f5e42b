// The terminal text: the gate's table that `attncheck check` and `attncheck merge` print, and — with TextOptions —
// the summary Python's Report prints. Each (kernel, dtype) run's properties (or one verdict line per run), what was
// cut short and why, each kernel's contract, the coverage and time of each run, then the counterexamples grouped by
// root cause, numbered as `attncheck replay --failure N` takes them.
#include "common.h"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace attncheck::reporting {

namespace {

using namespace detail;

/// The terminal summary names this many of a run's slowest properties.
constexpr std::size_t kSlowestShown = 3;

/// One line per (kernel, dtype, property); a dtype the kernel declines entirely, or does not declare (dtypes=), is one
/// line, not one per property.
std::string table(const Document &doc) {
  std::size_t width = 14;  // the kernel column fits the longest name
  for (const Run &run : doc.runs) width = std::max(width, run.report.kernel.size());
  std::string out = fmt::format("{:<{}} {:<5} {:<26} {:<9} {:<11} {:>6} {:>9} {:>9} {:>12}\n", "kernel", width,
                                "dtype", "property", "tier", "verdict", "cases", "declined", "undecided",
                                "worst err/β");
  for (const Run &run : doc.runs) {
    const RunReport &r = run.report;
    if (!r.contract.implements(r.dtype)) {
      out += fmt::format("{:<{}} {:<5} {:<26} off: the kernel's contract declares dtypes={}, nothing was called\n",
                         r.kernel, width, dtype_name(r.dtype), fmt::format("({} properties)", r.properties.size()),
                         dtype_list(r.contract.dtypes));
      continue;
    }
    if (declined_entirely(r)) {
      int declined = 0;
      for (const PropertyReport &p : r.properties) declined += p.unsupported;
      // A kernel that lacks the dtype says so (dtypes=): the run is then off and costs nothing.
      out += fmt::format("{:<{}} {:<5} {:<26} the kernel declined all {} cases it was given: every property "
                         "unsupported (a kernel without {} declares dtypes= without it)\n",
                         r.kernel, width, dtype_name(r.dtype), fmt::format("({} properties)", r.properties.size()),
                         declined, dtype_name(r.dtype));
      continue;
    }
    for (const PropertyReport &p : r.properties)
      out += fmt::format("{:<{}} {:<5} {:<26} {:<9} {:<11} {:>6} {:>9} {:>9} {:>12.3g}\n", r.kernel, width,
                         dtype_name(r.dtype), p.id, tier_name(p.tier),
                         p.tier == Tier::off ? "-" : verdict_name(p.verdict), p.cases, p.unsupported, p.undecided,
                         p.worst_ratio_overall());
  }
  return out;
}

/// What was cut: each property that decided fewer cases than planned, or is undecided, with its reason; under
/// `declined` each property the kernel declined entirely too (in a run it did not decline entirely).
std::string cut_short_section(const Document &doc, bool declined) {
  std::string out;
  for (const Run &run : doc.runs) {
    const RunReport &r = run.report;
    const bool all_declined = declined_entirely(r);
    for (const PropertyReport &p : r.properties) {
      std::string line;
      if (cut_short(p, r.cases))
        line = fmt::format("{}, {} / {} cases decided{}", verdict_name(p.verdict), p.cases - p.undecided, r.cases,
                           p.note.empty() ? "" : " — " + p.note);
      else if (declined && !all_declined && p.verdict == Verdict::unsupported && p.tier != Tier::off)
        line = "unsupported" + (p.note.empty() ? "" : " — " + p.note);
      if (!line.empty()) out += fmt::format("  {} {} {}: {}\n", r.kernel, dtype_name(r.dtype), p.id, line);
    }
  }
  return out.empty() ? out : "cut short:\n" + out;
}

/// The contract each kernel was checked against, once per kernel (the same for every dtype); what the cases reached
/// (coverage.h), for each run that decided any; where the time went (the one part of a run that depends on the
/// machine): each run, its kernel's share, and its slowest properties.
std::string runs_section(const Document &doc) {
  std::string out;
  for (std::size_t n = 0; n < doc.runs.size(); ++n) {
    const RunReport &r = doc.runs[n].report;
    if (n > 0 && doc.runs[n - 1].report.kernel == r.kernel && doc.runs[n - 1].report.contract == r.contract) continue;
    out += fmt::format("contract of {}: {}\n", r.kernel, r.contract.describe_changes());
  }
  for (const Run &run : doc.runs) {
    const RunCoverage rc = run.report.coverage();
    if (rc.count(CornerStatus::reached) > 0)
      out += fmt::format("coverage of {} {}: {}\n", run.report.kernel, dtype_name(run.report.dtype), rc.describe());
  }
  for (const Run &run : doc.runs)  // the production shapes the check declared (check --shapes)
    for (const std::string &line : shape_lines(run.report))
      out += fmt::format("declared shape of {} {}: {}\n", run.report.kernel, dtype_name(run.report.dtype), line);
  for (const Run &run : doc.runs) {  // a run that replayed a corpus (check --corpus): its recorded cases, passed or not
    int replayed = 0, passed = 0, failed = 0;
    for (const PropertyReport &p : run.report.properties) {
      replayed += p.corpus.replayed;
      passed += p.corpus.passed;
      failed += p.counterexample && p.counterexample->from_corpus() ? 1 : 0;
    }
    if (replayed > 0)
      out += fmt::format("corpus of {} {}: {} recorded case{} replayed first, {} passed, {} failed again\n",
                         run.report.kernel, dtype_name(run.report.dtype), replayed, replayed == 1 ? "" : "s", passed,
                         failed);
  }
  for (const Run &run : doc.runs) {
    double seconds = 0, kernel = 0;
    std::vector<const PropertyReport *> by_time;
    for (const PropertyReport &p : run.report.properties) {
      seconds += p.timing.seconds;
      kernel += p.timing.kernel_seconds;
      by_time.push_back(&p);
    }
    if (by_time.empty() || !run.report.contract.implements(run.report.dtype)) continue;  // nothing ran
    std::stable_sort(by_time.begin(), by_time.end(),
                     [](const auto *a, const auto *b) { return a->timing.seconds > b->timing.seconds; });
    std::string slowest;
    for (std::size_t n = 0; n < std::min<std::size_t>(kSlowestShown, by_time.size()); ++n)
      slowest += fmt::format("{}{} {:.1f} s", n ? ", " : "", by_time[n]->id, by_time[n]->timing.seconds);
    out += fmt::format("time of {} {}: {:.1f} s, {:.1f} s of it in the kernel; slowest: {}\n", run.report.kernel,
                       dtype_name(run.report.dtype), seconds, kernel, slowest);
  }
  return out;
}

/// `values` (row-major, of `shape`) as nested lists in decimal, each innermost row on a line of its own, aligned
/// under the first when the text starts at column `column`: "[[0.5, -1.25],\n  [2, 0]]" at column 0.
void nested(std::string &out, const std::vector<std::int64_t> &shape, const std::vector<double> &values,
            std::size_t dim, std::size_t offset, std::size_t column) {
  out += '[';
  std::size_t stride = 1;
  for (std::size_t d = dim + 1; d < shape.size(); ++d) stride *= static_cast<std::size_t>(shape[d]);
  for (std::size_t i = 0; i < static_cast<std::size_t>(shape[dim]); ++i) {
    if (dim + 1 == shape.size()) {
      out += (i ? ", " : "") + decimal(values[offset + i]);
      continue;
    }
    if (i) out += ",\n" + std::string(column + dim + 1, ' ');
    nested(out, shape, values, dim + 1, offset + i * stride, column);
  }
  out += ']';
}

/// A counterexample's minimal inputs, each tensor of at most TextOptions::kSmallTensor elements: "    q = [[[[…]]]]".
std::string small_inputs(const Case &c) {
  const Shape &s = c.spec.shape;
  struct Tensor {
    const char *name;
    std::vector<std::int64_t> shape;
    const std::vector<double> &values;
  };
  const Tensor tensors[] = {{"q", q_shape(s), c.q}, {"k", k_shape(s), c.k}, {"v", v_shape(s), c.v},
                            {"dout", o_shape(s), c.dout}};
  std::string out;
  for (const Tensor &t : tensors) {
    if (t.values.empty() || t.values.size() > TextOptions::kSmallTensor || numel(t.shape) != t.values.size()) continue;
    const std::string head = fmt::format("    {} = ", t.name);
    out += head;
    nested(out, t.shape, t.values, 0, 0, head.size());
    out += '\n';
  }
  return out;
}

/// One member of a group: "  counterexample N: id — shape (step s, found after n cases, k shrinks)" — or "(step s,
/// from the corpus: entry <hash>)" for a case an earlier run recorded (check --corpus) — and its detail;
/// under TextOptions::inputs the declarations that explain it (those the group's caption does not name) and its
/// small inputs.
std::string member_text(const Document &doc, const FailureGroup &g, std::pair<std::size_t, std::size_t> member,
                        std::size_t number, const TextOptions &opt) {
  const PropertyReport &p = doc.runs[member.first].report.properties[member.second];
  const Counterexample &cx = *p.counterexample;
  // A corpus case was found by an earlier run: it names its entry instead of this run's search.
  const std::string found = cx.from_corpus()
                                ? fmt::format("from the corpus: entry {}", cx.corpus_entry)
                                : fmt::format("found after {} cases, {} shrinks", cx.found_after, cx.shrink_steps);
  std::string out = fmt::format("  counterexample {}: {} — {} (step {}, {})\n    {}\n", number, p.id,
                                cx.minimal.spec.describe(), cx.outcome.step ? step_id(*cx.outcome.step) : "?", found,
                                cx.outcome.detail);
  if (!opt.inputs) return out;
  // A member its group's caption does not explain names its own narrowest explanation.
  if (g.explained.empty() && !cx.explained_by.empty())
    out += fmt::format("    explained by the declaration {}: if {}, declare it\n", cx.explained_by.front().declaration,
                       cx.explained_by.front().meaning);
  // A member whose own evidence shows something other than what the group's caption quotes.
  if (g.explained.empty() && cx.evidence && cx.evidence->hints != g.hints)
    for (const Hint &h : cx.evidence->hints) out += fmt::format("    hint: {}\n", h.text);
  return out + small_inputs(cx.minimal);
}

/// A group: a blank line, its kind and headline, its caption, then its members (those in `only`, when given).
std::string group_text(const Document &doc, const FailureGroup &g,
                       const std::vector<std::pair<std::size_t, std::size_t>> &failures, const TextOptions &opt,
                       const std::pair<std::size_t, std::size_t> *only = nullptr) {
  std::string out = fmt::format("\n{} {}\n  {}\n", g.warning ? "warning (beyond the declared contract):" : "failure:",
                                g.headline, g.caption);
  for (const auto &member : g.members)
    if (!only || member == *only)
      out += member_text(doc, g, member, failure_number(failures, member), opt);
  return out;
}

}  // namespace

std::string run_line(const RunReport &r, bool strict) {
  if (!r.contract.implements(r.dtype))
    return fmt::format("{} {}: off — the kernel's contract declares dtypes={}, {} properties not run", r.kernel,
                       dtype_name(r.dtype), dtype_list(r.contract.dtypes), r.properties.size());
  int passed = 0, failed = 0, warned = 0, undecided = 0, unsupported = 0, errors = 0, cases = 0;
  for (const PropertyReport &p : r.properties) {
    cases += p.cases;
    switch (p.verdict) {
      case Verdict::pass: ++passed; break;
      case Verdict::fail: ++failed; break;
      case Verdict::warn: ++warned; break;
      case Verdict::undecided: ++undecided; break;
      case Verdict::unsupported: ++unsupported; break;
      case Verdict::error: ++errors; break;
    }
  }
  // The errors only when there are any: a run line without them reads as before.
  return fmt::format("{} {}: {} — {} passed, {} failed, {} warnings, {} undecided, {} unsupported{} ({} cases)",
                     r.kernel, dtype_name(r.dtype), verdict_name(r.verdict(strict)), passed, failed, warned,
                     undecided, unsupported, errors ? fmt::format(", {} attncheck errors", errors) : "", cases);
}

std::string to_text(const Document &doc, const TextOptions &opt) {
  std::string out;
  if (opt.run_lines) {
    for (const Run &run : doc.runs) out += run_line(run.report, doc.strict) + "\n";
  } else {
    out += table(doc);
  }
  out += cut_short_section(doc, opt.declined) + runs_section(doc);
  const auto failures = doc.failures();
  if (opt.totals) {
    std::size_t warnings = 0;
    for (const auto &[r, p] : failures) warnings += doc.runs[r].report.properties[p].verdict == Verdict::warn;
    out += fmt::format("{} failure(s), {} warning(s){}\n", failures.size() - warnings, warnings,
                       doc.strict && warnings ? " (strict: warnings fail the gate)" : "");
  }
  // Failures before warnings.
  std::vector<FailureGroup> groups = group_failures(doc);
  std::stable_partition(groups.begin(), groups.end(), [](const auto &g) { return !g.warning; });
  for (const FailureGroup &g : groups) out += group_text(doc, g, failures, opt);
  return out;
}

std::string counterexample_text(const Document &doc, std::size_t failure, const TextOptions &opt) {
  const auto failures = doc.failures();
  if (failure < 1 || failure > failures.size())
    throw std::out_of_range("counterexample " + std::to_string(failure) + " is out of range: the report has " +
                            std::to_string(failures.size()));
  const auto member = failures[failure - 1];
  for (const FailureGroup &g : group_failures(doc))
    if (std::find(g.members.begin(), g.members.end(), member) != g.members.end())
      return group_text(doc, g, failures, opt, &member).substr(1);  // without the blank line that separates groups
  throw std::logic_error("counterexample_text: counterexample " + std::to_string(failure) + " is in no group");
}

}  // namespace attncheck::reporting
