// group_failures: one defect usually fails several properties, each on its own minimal case. Counterexamples of the
// same run, kind (failure or warning) and minimal case whose failing element has the same signature — the ladder
// step, the tensor and the kind of wrongness, read off Outcome::step and Outcome::detail — are one root cause; the
// group is captioned from that element (what it is, what it should be), not from the properties' generic summaries.
#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace attncheck::reporting {

namespace {

using namespace detail;

constexpr std::string_view kTensors[] = {"LSE", "dQ", "dK", "dV", "O"};
/// error ÷ bound from which an out-of-bound O or LSE reads as a wrong formula rather than rounding.
constexpr double kFormulaRatio = 100;

/// What the failing check said, parsed from Outcome::step and Outcome::detail (the Ladder's and the properties'
/// message formats: "NAME[i,j,…]: got X (x), exact Y (y), bound Z (z)…", "…: got X in a row that sees no key (the
/// contract fixes Y)", "…: changed from X to Y …", "forward returned status 2: …", "O: padding element … was
/// written …").
struct Signature {
  std::optional<Step> step;
  std::string tensor;   ///< "O", "LSE", "dQ", "dK", "dV", or the name the check used; "" when none is named
  std::string kind;     ///< "NaN", "+Inf", "−Inf", "wrong sign", "out of bound", "bits differ", "call failed", …
  bool empty_row = false;  ///< the element is in a row that sees no key
  // For captions only (not compared):
  std::string name;     ///< the name as the check wrote it: "O(k+u) vs O"
  std::string element;  ///< the tensor and index: "O[0,0,1,2]"
  std::optional<double> got, exact, bound;
  bool same_as(const Signature &o) const {
    return step == o.step && tensor == o.tensor && kind == o.kind && empty_row == o.empty_row;
  }
};

/// The number printed at `at` in `text` (hex, decimal, "nan", "-nan", "inf", "-inf"), if any.
std::optional<double> number_at(std::string_view text, std::size_t at) {
  if (at == std::string_view::npos || at >= text.size()) return std::nullopt;
  const std::string s(text.substr(at, 64));
  char *end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  return x;
}

/// The number after the first `key` in `text` at or after `from`.
std::optional<double> number_after(std::string_view text, std::string_view key, std::size_t from = 0) {
  const std::size_t at = text.find(key, from);
  if (at == std::string_view::npos) return std::nullopt;
  return number_at(text, at + key.size());
}

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

/// The base tensor of a name: "O(k+u) vs O" → "O", "LSE (padded)" → "LSE"; else the name itself.
std::string base_tensor(std::string_view name) {
  for (const std::string_view t : kTensors)
    if (name.starts_with(t) && (name.size() == t.size() || name[t.size()] == ' ' || name[t.size()] == '('))
      return std::string(t);
  return std::string(name);
}

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

/// The leading words of a message that names no element, up to the first word holding a digit or a bracket
/// ("effective logits of N(0,1) q, k have variance 0.73 …" → "effective logits of").
std::string leading_words(std::string_view text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word = text.substr(at, end - at);
    if (word.find_first_of("0123456789([:=") != std::string_view::npos) break;
    if (!out.empty()) out += ' ';
    out += word;
    at = end + 1;
  }
  return out.empty() ? std::string(text.substr(0, 40)) : out;
}

Signature signature_of(const Counterexample &cx) {
  const Outcome &o = cx.outcome;
  const std::string_view d = o.detail;
  Signature sig;
  sig.step = o.step;
  // The element: "NAME[i,j,…]:" at the start (the name holds no ':', but may hold brackets of its own).
  std::vector<std::int64_t> index;
  std::size_t after = 0;
  const std::size_t close = d.find("]:"), colon = d.find(':');
  const std::size_t open = close == std::string_view::npos ? close : d.rfind('[', close);
  if (open != std::string_view::npos && open > 0 && colon == close + 1) {
    bool ok = true;
    std::string_view idx = d.substr(open + 1, close - open - 1);
    while (ok && !idx.empty()) {
      const std::size_t comma = idx.find(',');
      const std::string part(idx.substr(0, comma));
      char *end = nullptr;
      const long long v = std::strtoll(part.c_str(), &end, 10);
      ok = !part.empty() && end == part.c_str() + part.size();
      index.push_back(v);
      idx = comma == std::string_view::npos ? std::string_view{} : idx.substr(comma + 1);
    }
    if (ok) {
      sig.name = std::string(d.substr(0, open));
      sig.tensor = base_tensor(sig.name);
      after = close + 2;
      sig.element = sig.tensor + std::string(d.substr(open, close - open + 1));
    } else {
      index.clear();
    }
  }
  if (sig.name.empty() && d.find(": padding element") != std::string_view::npos)
    sig.tensor = base_tensor(d.substr(0, d.find(": padding element")));

  // Values.
  const std::string_view rest = d.substr(std::min(after, d.size()));
  bool comparison = false;  // the kernel against itself: bits (or values) that must not change did
  if (contains(rest, "changed from ")) {
    comparison = true;
    sig.exact = number_after(rest, "changed from ");
    sig.got = number_after(rest, " to ", rest.find("changed from "));
  } else if (contains(rest, " from the first call")) {
    comparison = true;
    sig.exact = number_at(rest, rest.find_first_not_of(' '));
    sig.got = number_after(rest, "), ");
  } else if (contains(rest, " with the ") && contains(rest, " without")) {
    comparison = true;
    sig.got = number_after(rest, "got ");
    if (!sig.got) sig.got = number_after(rest, "changed to ");
  } else {
    sig.got = number_after(rest, "got ");
    sig.exact = number_after(rest, "exact ");
    if (!sig.exact) sig.exact = number_after(rest, "the contract fixes ");
    sig.bound = number_after(rest, "bound ");
  }

  // A row that sees no key: said by the check, or read off the element's row in the judged case.
  const Case &c = judged_case(cx);
  const Shape &s = c.spec.shape;
  sig.empty_row = contains(d, "row that sees no key");
  if (!sig.empty_row && index.size() >= 3 && (sig.tensor == "O" || sig.tensor == "LSE" || sig.tensor == "dQ") &&
      !sig.name.starts_with("Σ") && index[2] >= 0 && index[2] < s.Lq)
    sig.empty_row = visible_count(c.spec.mask, index[2], s.Lq, s.Lk) == 0;

  // The kind of wrongness.
  const Step step = o.step.value_or(Step::values);
  if (step == Step::shape) {
    if (contains(d, "wrote its input")) sig.kind = "wrote into an input";
    else if (contains(d, "padding element") && contains(d, "was written")) sig.kind = "wrote outside its outputs";
    else sig.kind = "call failed";
  } else if (comparison) {
    // A result that must not change turned non-finite (poison leaking in), or changed.
    if (sig.got && std::isnan(*sig.got)) sig.kind = "turns NaN";
    else if (sig.got && std::isinf(*sig.got)) sig.kind = *sig.got > 0 ? "turns +Inf" : "turns −Inf";
    else sig.kind = "bits differ";
  } else if (sig.got) {
    const double g = *sig.got;
    if (std::isnan(g)) sig.kind = "NaN";
    else if (std::isinf(g)) sig.kind = g > 0 ? "+Inf" : "−Inf";
    else if (sig.exact && std::isinf(*sig.exact)) sig.kind = std::string("finite, not ") + value_text(*sig.exact);
    else if (step == Step::mask) sig.kind = "not the fixed value";
    else if (sig.exact && sig.bound && g != 0 && *sig.exact != 0 && std::signbit(g) != std::signbit(*sig.exact) &&
             std::abs(-g - *sig.exact) <= *sig.bound)
      sig.kind = "wrong sign";
    else sig.kind = "out of bound";
  } else {
    sig.kind = leading_words(first_line(d));
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

/// `explained`: a declaration explains the group, so no guess at the defect is added.
std::string caption_of(const Signature &sig, const Counterexample &first, double worst_ratio, bool explained) {
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
    if (sig.tensor == "O" && std::isnan(*sig.got)) s += " (0/0: the row's weights sum to 0?)";
    return s;
  }
  const std::string exact = sig.exact ? value_text(*sig.exact) : "?";
  if (sig.kind == "NaN" || sig.kind == "+Inf" || sig.kind == "−Inf") {
    std::string s = step + element + " is " + got + " where the exact value is " + exact;
    if ((sig.tensor == "O" || sig.tensor == "LSE") && sig.exact && std::isfinite(*sig.exact))
      s += " (exp overflow: the row max not subtracted?)";
    return s;
  }
  if (sig.kind == "wrong sign") return step + element + " has the wrong sign: got " + got + ", exact " + exact;
  if (sig.kind == "not the fixed value") return step + element + " is " + got + ", the contract fixes " + exact;
  if (sig.kind == "out of bound") {
    std::string s = step + sig.tensor + " elements out of bound by up to " + ratio_short(worst_ratio) + "× (" +
                    element + ": got " + got + ", exact " + exact + ")";
    if ((sig.tensor == "O" || sig.tensor == "LSE") && worst_ratio >= kFormulaRatio && !explained)
      s += " — a wrong scale, or a lost rescale?";
    return s;
  }
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

  std::vector<FailureGroup> out;
  out.reserve(groups.size());
  for (Building &b : groups) {
    FailureGroup &g = b.group;
    const auto [ri, pi] = g.members.front();
    const Report &r = doc.runs[ri].report;
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
      if (p.counterexample->explained_by != explained) explained.clear();
    }
    g.caption = caption_of(b.sig, first, worst, !explained.empty());
    if (!what.empty()) g.caption += " — on the modified problem: " + what;
    for (const Explanation &e : explained)
      g.caption += " — explained by the declaration " + e.declaration + ": if " + e.meaning + ", declare it";
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
