// RunReport: verdict roll-up and the text form (no RapidCheck here).
#include "attncheck/results.h"

#include <cstdio>

namespace attncheck {

namespace {
std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}
}  // namespace


double PropertyReport::worst_ratio_overall() const {
  double r = worst_ratio;
  if (counterexample && !(counterexample->outcome.worst_ratio <= r)) r = counterexample->outcome.worst_ratio;
  return r;
}

Verdict RunReport::verdict(bool strict) const {
  bool any_error = false, any_undecided = false, any_warn = false, all_unsupported = !properties.empty();
  for (const PropertyReport &p : properties) {
    if (p.verdict == Verdict::fail || (strict && p.verdict == Verdict::warn)) return Verdict::fail;
    any_error |= p.verdict == Verdict::error;
    any_undecided |= p.verdict == Verdict::undecided;
    any_warn |= p.verdict == Verdict::warn;
    all_unsupported &= p.verdict == Verdict::unsupported;
  }
  if (any_error) return Verdict::error;
  if (any_undecided) return Verdict::undecided;
  if (any_warn) return Verdict::warn;
  return all_unsupported ? Verdict::unsupported : Verdict::pass;
}

const PropertyReport *RunReport::find(std::string_view id) const {
  for (const PropertyReport &p : properties)
    if (p.id == id) return &p;
  return nullptr;
}

std::string RunReport::text() const {
  std::string out = "attncheck properties: kernel " + kernel + ", " + std::string(dtype_name(dtype)) + " (" +
                    precision().describe() + "), contract " + contract.describe_changes() + ", seed " + std::to_string(seed) + ", " + std::to_string(cases) +
                    " cases per property\n";
  char line[160];
  for (const PropertyReport &p : properties) {
    std::snprintf(line, sizeof line, "  %-22s %-11s %4d cases, %d unsupported, %d undecided, worst %s x bound",
                  p.id.c_str(), std::string(verdict_name(p.verdict)).c_str(), p.cases, p.unsupported, p.undecided,
                  ratio_text(p.worst_ratio).c_str());
    out += line;
    // Decided / planned, when the search decided fewer than it planned (a counterexample ends it by design).
    if (!p.counterexample && p.tier != Tier::off && p.verdict != Verdict::unsupported && p.cases - p.undecided != cases)
      out += " [" + std::to_string(p.cases - p.undecided) + " / " + std::to_string(cases) + " decided]";
    if (p.budget_exhausted) out += " [time budget spent]";
    if (!p.note.empty()) out += " — " + p.note;
    out += "\n";
  }
  out += "verdict: " + std::string(verdict_name(verdict())) + "\n";
  for (const PropertyReport &p : properties) {
    if (!p.worst.empty() && !p.counterexample) out += "\n" + p.id + " worst: " + p.worst + "\n";
    if (!p.counterexample) continue;
    const Counterexample &c = *p.counterexample;
    out += std::string(p.verdict == Verdict::warn ? "\nwarning (advisory, beyond the contract) for " : "\ncounterexample for ") + p.id + ": " + p.formula + "\n";
    if (!p.summary.empty()) out += "  meaning: " + p.summary + "\n";
    if (c.found_after > 0)
      out += "  found after " + std::to_string(c.found_after) + " cases; shrunk in " +
             std::to_string(c.shrink_steps) + " steps (" + std::to_string(c.shrinks_tried) +
             " candidates tried) from " + c.original.describe() + "\n";
    out += "  failing step: " + std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + " — " +
           c.outcome.detail + "\n";
    for (const Explanation &e : c.explained_by)
      out += "  explained by the declaration " + e.declaration + ": " + e.meaning + "\n";
    out += "  inputs: " + c.minimal.describe();
    out += "  seed: " + std::to_string(c.seed) + "\n";
    out += "  reproduce: " + c.reproduce + "   (CheckOptions::reproduce, dtype " + std::string(dtype_name(dtype)) +
           ")\n";
  }
  return out;
}

}  // namespace attncheck
