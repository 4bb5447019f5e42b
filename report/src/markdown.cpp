// summary.md: a CI job summary or pull-request comment. One table row per (kernel, dtype), then each
// counterexample in a few lines with the command that replays it.
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
    case Verdict::undecided: return "⚠️ undecided";
    case Verdict::unsupported: return "➖ unsupported";
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

/// The properties cell: failing and undecided ids, then counts of the rest.
std::string properties_cell(const Report &r) {
  std::vector<std::string> failing, undecided;
  int pass = 0, unsupported = 0;
  for (const PropertyReport &p : r.properties) {
    if (p.verdict == Verdict::fail) failing.push_back(p.id);
    if (p.verdict == Verdict::undecided) undecided.push_back(p.id);
    pass += p.verdict == Verdict::pass;
    unsupported += p.verdict == Verdict::unsupported;
  }
  std::vector<std::string> parts;
  if (!failing.empty()) parts.push_back("fail: " + id_list(failing));
  if (!undecided.empty()) parts.push_back("undecided: " + id_list(undecided));
  if (pass) parts.push_back(std::to_string(pass) + " pass");
  if (unsupported) parts.push_back(std::to_string(unsupported) + " unsupported");
  std::string out;
  for (std::size_t n = 0; n < parts.size(); ++n) out += (n ? "; " : "") + parts[n];
  return out.empty() ? "none" : out;
}

std::string worst_element(const Evidence &e, std::size_t x) {
  const auto w = static_cast<std::int64_t>(x);
  std::string s(1, '`');  // not "`" + string&&: GCC 12 warns falsely there (-Wrestrict, PR 105329)
  return s + element_name(e.tensor, e.shape, w) + "`: got `" + hex(e.got[x]) + "` (" + decimal(e.got[x]) +
         "), exact `" + hex(e.exact[x]) + "` (" + decimal(e.exact[x]) + "), bound `" + hex(e.bound[x]) + "` (" +
         decimal(e.bound[x]) + "), error ÷ bound **" + ratio_text(error_ratio(e.got[x], e.exact[x], e.bound[x])) +
         "**";
}

}  // namespace

std::string to_markdown(const Document &doc) {
  const auto failures = doc.failures();
  std::string out = "## attncheck";
  out += failures.empty() ? "" : ": " + std::to_string(failures.size()) + " counterexample" +
                                     (failures.size() == 1 ? "" : "s");
  out += "\n\n| kernel | dtype | verdict | properties | cases | worst err/bound |\n";
  out += "|---|---|---|---|---:|---:|\n";
  for (const Run &run : doc.runs) {
    const Report &r = run.report;
    int cases = 0;
    double worst = 0;
    for (const PropertyReport &p : r.properties) {
      cases += p.cases;
      const double w = p.worst_ratio_overall();
      if (!(w <= worst)) worst = w;  // NaN and +∞ win
    }
    out += "| " + md_escape(r.kernel) + " | " + std::string(dtype_name(r.dtype)) + " | " + badge(r.verdict()) +
           " | " + properties_cell(r) + " | " + std::to_string(cases) + " | " + ratio_text(worst) + " |\n";
  }
  if (failures.empty()) return out;

  out += "\n### Counterexamples\n";
  for (std::size_t n = 0; n < failures.size(); ++n) {
    const Run &run = doc.runs[failures[n].first];
    const PropertyReport &p = run.report.properties[failures[n].second];
    const Counterexample &c = *p.counterexample;
    const std::size_t number = n + 1;
    if (n == kMaxFailuresShown) {
      out += "\n…and " + std::to_string(failures.size() - n) +
             " more, every one in report.json (replay any with `attncheck replay report.json --failure N`).\n";
      break;
    }
    out += "\n**" + std::to_string(number) + ". " + md_escape(p.id) + "** on " + md_escape(run.report.kernel) +
           " (" + std::string(dtype_name(run.report.dtype)) + ")";
    if (!p.summary.empty()) out += " — " + md_escape(p.summary);
    out += "\n\n";
    out += "- shape: `" + c.minimal.spec.describe() + "`\n";
    out += "- failing step: **" + std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + "** — " +
           md_escape(first_line(c.outcome.detail)) + "\n";
    const std::size_t pi = failures[n].second;
    const Evidence *ev = pi < run.evidence.size() && run.evidence[pi] ? &*run.evidence[pi] : nullptr;
    if (ev && !ev->call_error.empty()) out += "- the call failed: " + md_escape(first_line(ev->call_error)) + "\n";
    if (const auto x = ev ? telling_worst(*ev) : std::nullopt) out += "- worst element: " + worst_element(*ev, *x) + "\n";
    if (c.found_after > 0)
      out += "- found after " + std::to_string(c.found_after) + " case" + (c.found_after == 1 ? "" : "s") +
             ", shrunk in " + std::to_string(c.shrink_steps) + " step" + (c.shrink_steps == 1 ? "" : "s") + "\n";
    out += "- replay: `" + replay_command(number) + "`\n";
  }
  return out;
}

}  // namespace attncheck::reporting
