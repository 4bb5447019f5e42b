// Helpers shared by the report tests.
#pragma once

#include "attncheck/report_io.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attncheck::test {

/// The message of the ReportError that from_json throws on `text` ("" when it does not throw).
inline std::string error_of(const std::string &text) {
  try {
    (void)reporting::from_json(text);
  } catch (const reporting::ReportError &e) {
    return e.what();
  }
  return "";
}

/// The evidence of property `p` of `run` (nullopt without a counterexample, or when none was gathered).
inline const std::optional<Evidence> &evidence_at(const reporting::Run &run, std::size_t p) {
  static const std::optional<Evidence> kNone;
  const PropertyReport &pr = run.report.properties.at(p);
  return pr.counterexample ? pr.counterexample->evidence : kNone;
}

/// Tags balance (a small XML well-formedness check: no attribute may hold a raw '<' or '>').
inline bool balanced(const std::string &xml, std::string *why) {
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

/// What a check finds at element `index` of `name`: got, exact and bound (as the Ladder makes it).
inline Finding found(Finding::Kind kind, std::string name, std::vector<std::int64_t> index, double got,
                     std::optional<double> exact = std::nullopt, std::optional<double> bound = std::nullopt) {
  Finding f;
  f.kind = kind;
  f.tensor = output_of(name);
  f.name = std::move(name);
  f.index = std::move(index);
  f.got = got;
  f.exact = exact;
  f.bound = bound;
  return f;
}

/// A property line with a counterexample on `minimal`, failing at `step` with `finding`, rendered as `detail`.
inline PropertyReport failing(std::string id, const Case &minimal, Step step, Finding finding, std::string detail,
                              Verdict v = Verdict::fail) {
  PropertyReport p;
  p.id = std::move(id);
  p.formula = "f";
  p.summary = "generic summary of " + p.id;
  p.verdict = v;
  p.tier = v == Verdict::warn ? Tier::advisory : Tier::required;
  p.cases = 1;
  Counterexample c;
  c.minimal = minimal;
  c.original = minimal.spec;
  c.outcome.verdict = v;
  c.outcome.step = step;
  c.outcome.detail = std::move(detail);
  c.outcome.finding = std::move(finding);
  c.outcome.worst_ratio = INFINITY;
  p.counterexample = c;
  return p;
}

}  // namespace attncheck::test
