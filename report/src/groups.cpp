// group_failures: one defect usually fails several properties, each on its own minimal case. Counterexamples of the
// same run, kind (failure or warning) and minimal case whose failing element has the same signature — the ladder
// step, the tensor and the kind of wrongness, read off the outcome's Finding — are one root cause; the group is
// captioned from that element (what it is, what it should be), not from the properties' generic summaries, then the
// declaration that explains it or, when none does, the hints the engine verified on its evidence (Evidence::hints) —
// never a guess. No message text is read: the captions render findings and hints.
#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace attncheck::reporting {

namespace {

using namespace detail;

/// What the failing check found (its Finding), reduced to what identifies a root cause.
struct Signature {
  std::optional<Step> step;
  std::string tensor;   ///< "O", "LSE", "dQ", "dK", "dV", or the name the check used; "" when none is named
  std::string kind;     ///< "NaN", "+Inf", "−Inf", "wrong sign", "out of bound", "bits differ", "call failed", …
  bool empty_row = false;  ///< the element is in a row that sees no key
  // For captions only (not compared):
  std::string element;  ///< the tensor and index: "O[0,0,1,2]"
  std::optional<double> got, exact, bound;
  bool same_as(const Signature &o) const {
    return step == o.step && tensor == o.tensor && kind == o.kind && empty_row == o.empty_row;
  }
};

/// "+Inf", "−Inf", "NaN", or a short decimal ("0.25", "-3e+05").
std::string value_text(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "−Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

/// A ratio for a caption: "3.1", "420", "3.1e5".
std::string ratio_short(double r) {
  if (std::isnan(r) || std::isinf(r)) return "∞";
  char buf[32];
  if (r < 1e4) {
    std::snprintf(buf, sizeof buf, "%.3g", r);
    return buf;
  }
  int e = static_cast<int>(std::floor(std::log10(r)));
  double m = r / std::pow(10.0, e);
  if (m >= 9.95) m /= 10, ++e;
  std::snprintf(buf, sizeof buf, "%.2ge%d", m, e);
  return buf;
}

/// The kind of wrongness of an element found against its exact value.
std::string value_kind(const Finding &f, Step step) {
  if (!f.got) return "not an allowed value";
  const double g = *f.got;
  if (std::isnan(g)) return "NaN";
  if (std::isinf(g)) return g > 0 ? "+Inf" : "−Inf";
  if (f.exact && std::isinf(*f.exact)) return "finite, not " + value_text(*f.exact);
  if (step == Step::mask) return "not the fixed value";
  if (!f.exact) return "not an allowed value";
  if (f.bound && g != 0 && *f.exact != 0 && std::signbit(g) != std::signbit(*f.exact) &&
      std::abs(-g - *f.exact) <= *f.bound)
    return "wrong sign";
  return "out of bound";
}

Signature signature_of(const Counterexample &cx) {
  const Outcome &o = cx.outcome;
  Signature sig;
  sig.step = o.step;
  if (!o.finding) {  // a report from before findings: its step alone
    sig.kind = "failed";
    return sig;
  }
  const Finding &f = *o.finding;
  sig.tensor = f.tensor.empty() ? f.name : f.tensor;
  if (!f.index.empty() && f.kind != Finding::Kind::wrote_input && f.kind != Finding::Kind::wrote_padding) {
    sig.element = sig.tensor + "[";
    for (std::size_t d = 0; d < f.index.size(); ++d) {
      if (d) sig.element += ',';
      sig.element += std::to_string(f.index[d]);
    }
    sig.element += "]";
  }
  sig.got = f.got;
  sig.exact = f.exact;
  sig.bound = f.bound;

  // A row that sees no key: said by the check, or read off the element's row in the judged case.
  const Case &c = cx.judged();
  const Shape &s = c.spec.shape;
  sig.empty_row = f.empty_row;
  if (!sig.empty_row && f.kind == Finding::Kind::value && f.index.size() >= 3 && !f.tensor.empty() &&
      (f.tensor == "O" || f.tensor == "LSE" || f.tensor == "dQ") && f.index[2] < s.Lq)
    sig.empty_row = visible_count(c.spec.mask, f.index[2], s.Lq, s.Lk) == 0;

  switch (f.kind) {
    case Finding::Kind::call: sig.kind = "call failed"; break;
    case Finding::Kind::wrote_input: sig.kind = "wrote into an input"; break;
    case Finding::Kind::wrote_padding: sig.kind = "wrote outside its outputs"; break;
    case Finding::Kind::changed:  // a result that must not change turned non-finite (poison leaking in), or changed
      if (f.got && std::isnan(*f.got)) sig.kind = "turns NaN";
      else if (f.got && std::isinf(*f.got)) sig.kind = *f.got > 0 ? "turns +Inf" : "turns −Inf";
      else sig.kind = "bits differ";
      break;
    case Finding::Kind::value: sig.kind = value_kind(f, o.step.value_or(Step::values)); break;
    case Finding::Kind::aggregate: sig.kind = f.what; break;
  }
  return sig;
}

/// "step values: O out of bound", "step mask: LSE +Inf in a row that sees no key".
std::string short_text(const Signature &sig) {
  std::string s = "step " + std::string(sig.step ? step_id(*sig.step) : "?") + ":";
  if (!sig.tensor.empty()) s += " " + sig.tensor;
  s += " " + sig.kind;
  if (sig.empty_row) s += " in a row that sees no key";
  return s;
}

/// What the failing element is and what it should be; no guess at the defect (the hints, computed from the evidence,
/// are added by group_failures).
std::string caption_of(const Signature &sig, const Counterexample &first, double worst_ratio) {
  const std::string step = "step " + std::string(sig.step ? step_id(*sig.step) : "?") + ": ";
  const std::string element = sig.element.empty() ? sig.tensor : sig.element;
  const std::string detail = first_line(first.outcome.detail);
  if (sig.kind == "call failed") return step + "the call failed — " + detail;
  if (sig.kind == "wrote outside its outputs" || sig.kind == "wrote into an input")
    return step + "the kernel " + sig.kind + " — " + detail;
  if (sig.kind == "bits differ") return step + element + " changes where it must not — " + detail;
  if (sig.kind.starts_with("turns ")) return step + element + " " + sig.kind + " where it must not change — " + detail;
  if (!sig.got || sig.element.empty()) return step + detail;
  const std::string got = value_text(*sig.got);
  if (sig.empty_row) {
    std::string s = step + element + " of a row that sees no key is " + got;
    if (sig.exact) s += ", the contract fixes " + value_text(*sig.exact);
    return s;
  }
  const std::string exact = sig.exact ? value_text(*sig.exact) : "?";
  if (sig.kind == "NaN" || sig.kind == "+Inf" || sig.kind == "−Inf")
    return step + element + " is " + got + " where the exact value is " + exact;
  if (sig.kind == "wrong sign") return step + element + " has the wrong sign: got " + got + ", exact " + exact;
  if (sig.kind == "not the fixed value") return step + element + " is " + got + ", the contract fixes " + exact;
  if (sig.kind == "out of bound")
    return step + sig.tensor + " elements out of bound by up to " + ratio_short(worst_ratio) + "× (" + element +
           ": got " + got + ", exact " + exact + ")";
  return step + element + ": got " + got + ", exact " + exact;
}

}  // namespace

std::vector<FailureGroup> group_failures(const Document &doc) {
  const auto failures = doc.failures();
  struct Building {
    FailureGroup group;
    Signature sig;
    std::vector<std::size_t> numbers;  // 1-based failure numbers of the members
  };
  std::vector<Building> groups;
  for (std::size_t n = 0; n < failures.size(); ++n) {
    const auto [ri, pi] = failures[n];
    const PropertyReport &p = doc.runs[ri].report.properties[pi];
    const Counterexample &c = *p.counterexample;
    const bool warning = p.verdict == Verdict::warn;
    Signature sig = signature_of(c);
    Building *into = nullptr;
    for (Building &g : groups) {
      const auto [gr, gp] = g.group.members.front();
      const Counterexample &first = *doc.runs[gr].report.properties[gp].counterexample;
      if (gr == ri && g.group.warning == warning && g.sig.same_as(sig) &&
          first.minimal.spec.shape == c.minimal.spec.shape && first.minimal.spec.mask == c.minimal.spec.mask) {
        into = &g;
        break;
      }
    }
    if (!into) {
      groups.push_back({FailureGroup{{}, {}, {}, warning}, std::move(sig), {}});
      into = &groups.back();
    }
    into->group.members.emplace_back(ri, pi);
    into->numbers.push_back(n + 1);
  }

  // A kernel follows one set of practices: each run's declaration is the one that explains most of its
  // counterexamples (the earlier in a counterexample's list among equals, the narrower: the diagnosis orders them so).
  std::vector<std::optional<Explanation>> run_declaration(doc.runs.size());
  for (std::size_t ri = 0; ri < doc.runs.size(); ++ri) {
    std::vector<std::pair<Explanation, int>> counts;
    for (const PropertyReport &p : doc.runs[ri].report.properties)
      if (p.counterexample)
        for (const Explanation &e : p.counterexample->explained_by) {
          auto it = std::find_if(counts.begin(), counts.end(), [&](const auto &c) { return c.first == e; });
          if (it == counts.end()) counts.emplace_back(e, 1);
          else ++it->second;
        }
    std::stable_sort(counts.begin(), counts.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
    if (!counts.empty()) run_declaration[ri] = counts.front().first;
  }

  std::vector<FailureGroup> out;
  out.reserve(groups.size());
  for (Building &b : groups) {
    FailureGroup &g = b.group;
    const auto [ri, pi] = g.members.front();
    const RunReport &r = doc.runs[ri].report;
    const Counterexample &first = *r.properties[pi].counterexample;
    double worst = 0;
    std::string ids, what = first.outcome.failing_what;
    std::vector<Explanation> explained = first.explained_by;  // what explains every member
    for (const auto &[mr, mp] : g.members) {
      const PropertyReport &p = doc.runs[mr].report.properties[mp];
      const double w = p.counterexample->outcome.worst_ratio;
      if (!(w <= worst)) worst = w;  // NaN and +∞ win
      ids += (ids.empty() ? "" : ", ") + p.id;
      if (p.counterexample->outcome.failing_what != what) what.clear();
      const std::vector<Explanation> &own = p.counterexample->explained_by;
      std::erase_if(explained, [&](const Explanation &e) { return std::find(own.begin(), own.end(), e) == own.end(); });
    }
    // One declaration names the group: the run's when it explains every member, else the narrowest that does.
    const auto chosen = run_declaration[ri] ? std::find(explained.begin(), explained.end(), *run_declaration[ri])
                                            : explained.end();
    if (chosen != explained.end()) explained = {*chosen};
    explained.resize(std::min<std::size_t>(explained.size(), 1));
    // What the run learned: a group nothing explains alone is the run's declaration's when every member's minimal
    // case passes under it (Counterexample::passes_under) — its fresh cases failed, for this practice's sibling or
    // for a bug, which the check under the declaration will tell.
    bool by_siblings = false;
    if (explained.empty() && run_declaration[ri]) {
      const std::string &learned = run_declaration[ri]->declaration;  // a structured binding: no lambda captures it
      by_siblings = std::all_of(g.members.begin(), g.members.end(), [&](const auto &m) {
        const Counterexample &c = *doc.runs[m.first].report.properties[m.second].counterexample;
        return std::find(c.passes_under.begin(), c.passes_under.end(), learned) != c.passes_under.end();
      });
      if (by_siblings) explained = {*run_declaration[ri]};
    }
    g.caption = caption_of(b.sig, first, worst);
    if (!what.empty()) g.caption += " — on the modified problem: " + what;
    // What the evidence shows (Evidence::hints, verified where they were computed): the first member's that has
    // any. A declaration that explains the group is the explanation: no hint beside it.
    if (explained.empty())
      for (const auto &[mr, mp] : g.members)
        if (const auto &ev = doc.runs[mr].report.properties[mp].counterexample->evidence; ev && !ev->hints.empty()) {
          for (const Hint &h : ev->hints) g.caption += " — " + h.text;
          g.hints = ev->hints;
          break;
        }
    for (const Explanation &e : explained)
      g.caption += " — explained by the declaration " + e.declaration +
                   (by_siblings ? " as the run's other failures are (its minimal case passes under it, not every "
                                  "fresh case)"
                                : "") +
                   ": if " + e.meaning + ", declare it";
    if (explained.empty() && !g.warning) g.caption += " — no declaration explains it";
    g.explained = std::move(explained);
    std::string numbers;
    for (const std::size_t n : b.numbers) numbers += (numbers.empty() ? "" : ", ") + std::to_string(n);
    g.headline = r.kernel + " (" + std::string(dtype_name(r.dtype)) + ")" + (g.warning ? " · warning" : "") + " · " +
                 short_text(b.sig) + " · " + ids + " · " + (b.numbers.size() == 1 ? "failure " : "failures ") +
                 numbers;
    for (std::string *text : {&g.headline, &g.caption})  // one line each, whatever a kernel's name holds
      std::replace_if(text->begin(), text->end(), [](char ch) { return ch == '\n' || ch == '\r'; }, ' ');
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace attncheck::reporting
