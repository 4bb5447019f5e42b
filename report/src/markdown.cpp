// summary.md: a CI job summary or pull-request comment. One table row per (kernel, dtype) with its contract, then
// the failures and, in their own section, the warnings: each group of counterexamples with one root cause
// (group_failures) under its headline and caption, then each member in a few lines with the command that replays it.
#include "common.h"

#include <algorithm>
#include <cmath>

namespace attncheck::reporting {

namespace {

using namespace detail;

/// Counterexamples shown in full; the rest are listed by number (a PR comment is limited to 65536 characters).
constexpr std::size_t kMaxFailuresShown = 20;
/// Failing property ids named in a table cell before "and N more".
constexpr std::size_t kMaxIdsPerCell = 6;

std::string badge(Verdict v) {
  switch (v) {
    case Verdict::pass: return "✅ pass";
    case Verdict::fail: return "❌ **FAIL**";
    case Verdict::warn: return "⚠️ warn";
    case Verdict::undecided: return "❔ undecided";
    case Verdict::unsupported: return "➖ unsupported";
    case Verdict::error: return "🛑 **ERROR** (attncheck)";
  }
  return "?";
}

/// "accuracy, lse" then "…and N more".
std::string id_list(const std::vector<std::string> &ids) {
  std::string out;
  for (std::size_t n = 0; n < ids.size() && n < kMaxIdsPerCell; ++n) out += (n ? ", " : "") + md_escape(ids[n]);
  if (ids.size() > kMaxIdsPerCell) out += " and " + std::to_string(ids.size() - kMaxIdsPerCell) + " more";
  return out;
}

/// The properties cell: failing, warning and undecided ids, then counts of the rest.
std::string properties_cell(const RunReport &r) {
  std::vector<std::string> failing, warning, undecided;
  int pass = 0, unsupported = 0, off = 0;
  for (const PropertyReport &p : r.properties) {
    if (p.verdict == Verdict::fail) failing.push_back(p.id);
    if (p.verdict == Verdict::warn) warning.push_back(p.id);
    if (p.verdict == Verdict::undecided) undecided.push_back(p.id);
    pass += p.verdict == Verdict::pass;
    const bool skipped = p.verdict == Verdict::unsupported;
    off += skipped && p.tier == Tier::off;
    unsupported += skipped && p.tier != Tier::off;
  }
  std::vector<std::string> parts;
  if (!failing.empty()) parts.push_back("fail: " + id_list(failing));
  if (!warning.empty()) parts.push_back("warn: " + id_list(warning));
  if (!undecided.empty()) parts.push_back("undecided: " + id_list(undecided));
  if (pass) parts.push_back(std::to_string(pass) + " pass");
  if (unsupported) parts.push_back(std::to_string(unsupported) + " unsupported");
  if (off) parts.push_back(std::to_string(off) + " off by contract");
  std::string out;
  for (std::size_t n = 0; n < parts.size(); ++n) out += (n ? "; " : "") + parts[n];
  return out.empty() ? "none" : out;
}

/// A property's "cut short" line: `id`: verdict, decided / planned cases — its note; "" for one that decided
/// every planned case, found a counterexample (which ends a search by design), or was not run.
std::string cut_line(const PropertyReport &p, int planned) {
  if (!cut_short(p, planned)) return "";
  return "`" + md_escape(p.id) + "`: " + std::string(verdict_name(p.verdict)) + ", " +
         std::to_string(p.cases - p.undecided) + " / " + std::to_string(planned) + " cases decided" +
         (p.note.empty() ? "" : " — " + md_escape(p.note));
}

std::string worst_element(const Evidence &e, std::size_t x) {
  const auto w = static_cast<std::int64_t>(x);
  std::string s(1, '`');  // not "`" + string&&: GCC 12 warns falsely there (-Wrestrict, PR 105329)
  return s + element_name(e.tensor, e.shape, w) + "`: got `" + hex(e.got[x]) + "` (" + decimal(e.got[x]) +
         "), exact `" + hex(e.exact[x]) + "` (" + decimal(e.exact[x]) + "), bound `" + hex(e.bound[x]) + "` (" +
         decimal(e.bound[x]) + "), error ÷ bound **" + ratio_text(e.ratio(x)) + "**";
}

/// One counterexample in a few lines.
std::string counterexample_md(const Run &run, std::size_t pi, std::size_t number) {
  const PropertyReport &p = run.report.properties[pi];
  const Counterexample &c = *p.counterexample;
  const bool warning = p.verdict == Verdict::warn;
  std::string out = "\n**" + std::to_string(number) + ". " + (warning ? "⚠️ " : "") + md_escape(p.id) + "**";
  if (!p.summary.empty()) out += " — " + md_escape(p.summary);
  out += "\n\n";
  out += "- shape: `" + c.minimal.spec.describe() + "`\n";
  if (c.outcome.failing_case) {
    const Case &f = *c.outcome.failing_case;
    out += "- failing problem: " + md_escape(c.outcome.failing_what);
    if (!(f.spec == c.minimal.spec)) out += " — `" + f.spec.describe() + "`";
    if (c.outcome.failing_scale != 0) out += ", scale `" + hex_dec(c.outcome.failing_scale) + "`";
    out += "\n";
  }
  out += "- failing step: **" + std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + "** — " +
         md_escape(first_line(c.outcome.detail)) + "\n";
  const Evidence *ev = evidence_of(run, pi);
  if (ev && !ev->call_error.empty()) out += "- the call failed: " + md_escape(first_line(ev->call_error)) + "\n";
  if (const auto x = ev ? telling_worst(*ev) : std::nullopt) out += "- worst element: " + worst_element(*ev, *x) + "\n";
  if (ev && ev->original) out += "- " + md_escape(comparison_text(*ev, c.outcome.failing_what)) + "\n";
  if (c.from_corpus())
    out += "- from the corpus: entry `" + md_escape(c.corpus_entry) + "`, recorded by an earlier run, fails again\n";
  if (c.found_after > 0)
    out += "- found after " + std::to_string(c.found_after) + " case" + (c.found_after == 1 ? "" : "s") +
           ", shrunk in " + std::to_string(c.shrink_steps) + " step" + (c.shrink_steps == 1 ? "" : "s") + "\n";
  out += "- replay: `" + replay_command(number) + "`\n";
  return out;
}

}  // namespace

/// The ABI 1.2 features of a run (SPEC.md §2.7): each feature property's verdict and cases, or declined (its tier is
/// off: the contract does not declare it). "" when the run checked no feature property, or none at all (its dtype
/// is off).
std::string features_line(const RunReport &r) {
  if (!r.contract.implements(r.dtype)) return "";
  std::vector<std::string> checked, declined;
  for (const PropertyReport &p : r.properties) {
    if (std::none_of(std::begin(kAllFeatures), std::end(kAllFeatures),
                     [&](std::uint32_t bit) { return feature_property_id(bit) == p.id; }))
      continue;
    if (p.tier == Tier::off)
      declined.push_back(p.id);
    else
      checked.push_back(p.id + " " + std::string(verdict_name(p.verdict)) + " (" + std::to_string(p.cases) +
                        " cases" + (p.unsupported ? ", " + std::to_string(p.unsupported) + " unsupported" : "") + ")");
  }
  if (checked.empty() && declined.empty()) return "";
  std::string out;
  for (const std::string &c : checked) out += (out.empty() ? "checked: " : ", ") + c;
  if (!declined.empty()) {
    out += out.empty() ? "declined: " : "; declined: ";
    for (std::size_t n = 0; n < declined.size(); ++n) out += (n ? ", " : "") + declined[n];
  }
  return out;
}

std::string to_markdown(const Document &doc) {
  const auto failures = doc.failures();
  std::size_t warnings = 0;
  for (const auto &[ri, pi] : failures) warnings += doc.runs[ri].report.properties[pi].verdict == Verdict::warn;
  const std::size_t fails = failures.size() - warnings;
  std::string out = "## attncheck";
  if (!failures.empty()) {
    std::vector<std::string> parts;
    if (fails) parts.push_back(std::to_string(fails) + " failure" + (fails == 1 ? "" : "s"));
    if (warnings) parts.push_back(std::to_string(warnings) + " warning" + (warnings == 1 ? "" : "s"));
    out += ": " + parts[0] + (parts.size() > 1 ? ", " + parts[1] : "");
  }
  if (doc.strict && warnings) out += " (--strict: warnings count as failures)";
  out += "\n\n| kernel | dtype | contract | verdict | properties | warn | cases | worst err/bound |\n";
  out += "|---|---|---|---|---|---:|---:|---:|\n";
  for (const Run &run : doc.runs) {
    const RunReport &r = run.report;
    int cases = 0, warn = 0;
    double worst = 0;
    for (const PropertyReport &p : r.properties) {
      cases += p.cases;
      warn += p.verdict == Verdict::warn;
      // Warnings are beyond the contract: they do not make the run's worst error.
      const double w = p.verdict == Verdict::warn ? p.worst_ratio : p.worst_ratio_overall();
      if (!(w <= worst)) worst = w;  // NaN and +∞ win
    }
    out += "| " + md_escape(r.kernel) + " | " + std::string(dtype_name(r.dtype)) + " | `" +
           r.contract.describe_changes() + "` | " + badge(r.verdict(doc.strict)) + " | " + properties_cell(r) +
           " | " + std::to_string(warn) + " | " + std::to_string(cases) + " | " + ratio_text(worst) + " |\n";
  }
  // Per feature (SPEC.md §2.7): what was checked and what the kernel declined.
  std::string features;
  for (const Run &run : doc.runs) {
    const std::string line = features_line(run.report);
    if (!line.empty())
      features += "- " + md_escape(run.report.kernel) + " " + std::string(dtype_name(run.report.dtype)) + ": " + line + "\n";
  }
  if (!features.empty()) out += "\n**Features**\n\n" + features;
  // What the cases reached (coverage.h): a bug is caught only if its input arrives.
  std::string coverage;
  for (const Run &run : doc.runs) {
    const RunCoverage rc = run.report.coverage();
    if (rc.count(CornerStatus::reached) > 0)
      coverage += "- " + md_escape(run.report.kernel) + " " + std::string(dtype_name(run.report.dtype)) + ": " +
                  md_escape(rc.describe()) + "\n";
  }
  if (!coverage.empty()) out += "\n**Coverage**\n\n" + coverage;
  // The production shapes the check declared (check --shapes), each over the properties that took it.
  std::string shapes;
  for (const Run &run : doc.runs)
    for (const std::string &line : shape_lines(run.report))
      shapes += "- " + md_escape(run.report.kernel) + " " + std::string(dtype_name(run.report.dtype)) + " — " +
                md_escape(line) + "\n";
  if (!shapes.empty()) out += "\n**Declared shapes**\n\n" + shapes;
  // What was cut: each property that decided fewer cases than planned, or none it could decide on, and why.
  std::string cut;
  for (const Run &run : doc.runs)
    for (const PropertyReport &p : run.report.properties) {
      const std::string line = cut_line(p, run.report.cases);
      if (!line.empty())
        cut += "- " + md_escape(run.report.kernel) + " " + std::string(dtype_name(run.report.dtype)) + " " + line + "\n";
    }
  if (!cut.empty()) out += "\n**Cut short**\n\n" + cut;
  if (failures.empty()) return out;

  const std::vector<FailureGroup> groups = group_failures(doc);
  std::size_t shown = 0;
  for (const bool warning_section : {false, true}) {
    std::size_t groups_here = 0, members_here = 0;
    for (const FailureGroup &g : groups)
      if (g.warning == warning_section) ++groups_here, members_here += g.members.size();
    if (!groups_here) continue;
    const std::string causes = std::to_string(groups_here) + (groups_here == 1 ? " root cause" : " root causes");
    if (!warning_section)
      out += "\n### ❌ Failures — " + std::to_string(members_here) + " counterexample" +
             (members_here == 1 ? "" : "s") + ", " + causes + "\n";
    else
      out += "\n### ⚠️ warnings — beyond the declared contract\n\n" + std::to_string(members_here) +
             " counterexample" + (members_here == 1 ? "" : "s") + ", " + causes +
             ": behaviour the kernel's contract does not promise" +
             (doc.strict ? " (counted as failures: --strict)." : " (not failures; `--strict` makes them so).") + "\n";
    char letter = 'A';
    for (const FailureGroup &g : groups) {
      if (g.warning != warning_section) continue;
      const RunReport &r = doc.runs[g.members.front().first].report;
      std::vector<std::string> ids;
      for (const auto &m : g.members) ids.push_back(doc.runs[m.first].report.properties[m.second].id);
      out += "\n#### " + std::string(1, letter) + ". " + md_escape(r.kernel) + " (" +
             std::string(dtype_name(r.dtype)) + "): " + id_list(ids) + "\n\n";
      out += "> " + md_escape(g.caption) + "\n";
      letter = letter == 'Z' ? 'A' : static_cast<char>(letter + 1);
      for (const auto &m : g.members) {
        const std::size_t number = failure_number(failures, m);
        if (shown++ >= kMaxFailuresShown) {
          out += '\n';  // not "\n" + string&&: GCC 12 warns falsely there (-Wrestrict, PR 105329)
          out += std::to_string(number) + ". " + md_escape(doc.runs[m.first].report.properties[m.second].id) +
                 ": `" + replay_command(number) + "`\n";
          continue;
        }
        out += counterexample_md(doc.runs[m.first], m.second, number);
      }
    }
  }
  if (shown > kMaxFailuresShown)
    out += "\n…the counterexamples past the first " + std::to_string(kMaxFailuresShown) +
           " are listed by number only; every one is in report.json.\n";
  return out;
}

}  // namespace attncheck::reporting
