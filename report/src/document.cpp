// The Document model (failure numbering, worst element) and the helpers every writer shares.
#include "common.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace attncheck::reporting {

std::string_view kind_name(KernelSource::Kind k) {
  switch (k) {
    case KernelSource::Kind::builtin: return "builtin";
    case KernelSource::Kind::plugin: return "plugin";
    case KernelSource::Kind::exec: return "exec";
    case KernelSource::Kind::python: return "python";
  }
  return "?";
}

std::vector<std::pair<std::size_t, std::size_t>> Document::failures() const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (std::size_t p = 0; p < runs[r].report.properties.size(); ++p)
      if (runs[r].report.properties[p].counterexample) out.emplace_back(r, p);
  return out;
}

Verdict Document::verdict() const {
  bool error = false, undecided = false, warn = false;
  for (const Run &run : runs) {
    const Verdict v = run.report.verdict(strict);
    if (v == Verdict::fail) return Verdict::fail;
    error |= v == Verdict::error;
    undecided |= v == Verdict::undecided;
    warn |= v == Verdict::warn;
    // RunReport::verdict ranks undecided above warn: a run with both says undecided, yet it warned.
    for (const PropertyReport &p : run.report.properties) warn |= p.verdict == Verdict::warn;
  }
  return error ? Verdict::error : undecided ? Verdict::undecided : warn ? Verdict::warn : Verdict::pass;
}

namespace detail {

const Evidence *evidence_of(const Run &run, std::size_t pi) {
  const PropertyReport &p = run.report.properties[pi];
  return p.counterexample && p.counterexample->evidence ? &*p.counterexample->evidence : nullptr;
}

std::string hex(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

bool parse_hex(std::string_view s, double *out) {
  if (s == "nan") return *out = NAN, true;
  if (s == "inf") return *out = INFINITY, true;
  if (s == "-inf") return *out = -INFINITY, true;
  if (s.empty() || s.size() > 64) return false;
  const std::string z(s);  // strtod needs a terminated string
  char *end = nullptr;
  *out = std::strtod(z.c_str(), &end);
  return end == z.c_str() + z.size() && !std::isnan(*out) && !std::isinf(*out);
}

std::string decimal(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string hex_dec(double x) { return hex(x) + " (" + decimal(x) + ")"; }

std::string ratio_text(double r) {
  if (std::isnan(r)) return "nan";
  if (std::isinf(r)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
          out += "\xEF\xBF\xBD";  // U+FFFD: XML 1.0 has no way to carry these
        else
          out += ch;
    }
  }
  return out;
}

std::string md_escape(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '|': out += "\\|"; break;
      case '`': out += "\\`"; break;
      case '*': out += "\\*"; break;
      case '_': out += "\\_"; break;
      case '[': out += "\\["; break;
      case ']': out += "\\]"; break;
      case '\n':
      case '\r': out += ' '; break;
      default: out += ch;
    }
  }
  return out;
}

std::string first_line(std::string_view s) { return std::string(s.substr(0, s.find('\n'))); }

std::vector<std::int64_t> q_shape(const Shape &s) { return {s.B, s.Hq, s.Lq, s.D}; }
std::vector<std::int64_t> k_shape(const Shape &s) { return {s.B, s.Hkv, s.Lk, s.D}; }
std::vector<std::int64_t> v_shape(const Shape &s) { return {s.B, s.Hkv, s.Lk, s.Dv}; }
std::vector<std::int64_t> o_shape(const Shape &s) { return {s.B, s.Hq, s.Lq, s.Dv}; }
std::size_t numel(const std::vector<std::int64_t> &shape) {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d < 0 ? 0 : d);
  return n;
}

std::optional<std::size_t> telling_worst(const Evidence &e) {
  const std::int64_t w = e.worst_index();
  if (w < 0) return std::nullopt;
  const auto x = static_cast<std::size_t>(w);
  if (!(e.ratio(x) > 1)) return std::nullopt;
  return x;
}

std::int64_t shown_row(const Evidence &e) {
  if (e.marked_row >= 0) return e.marked_row;
  return e.differing_rows.empty() ? -1 : e.differing_rows.front();
}

namespace {
constexpr std::int64_t kRowValuesShown = 4;  ///< values of a row in a comparison line
constexpr std::size_t kRowNamesShown = 8;    ///< differing rows named in a comparison line

/// "[0.5, 0.25, … 8 values]": the first values of row `row` (of `len` elements) of `v`.
std::string row_values(const std::vector<double> &v, std::int64_t row, std::int64_t len) {
  std::string s = "[";
  for (std::int64_t c = 0; c < std::min(len, kRowValuesShown); ++c)
    s += (c ? ", " : "") + decimal(v[static_cast<std::size_t>(row * len + c)]);
  if (len > kRowValuesShown) s += ", … " + std::to_string(len) + " values";
  return s + "]";
}

std::string shape_text(const std::vector<std::int64_t> &shape) {
  std::string s = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ',';  // not ("," or "") + string&&: GCC 12 warns falsely there (-Wrestrict, PR 105329)
    s += std::to_string(shape[d]);
  }
  return s + "]";
}
}  // namespace

std::string comparison_text(const Evidence &e, std::string_view failing_what) {
  if (!e.original) return "";
  const Evidence::Original &o = *e.original;
  const std::string modified = "modified (" + std::string(failing_what) + ")";
  if (!o.call_error.empty()) return "original: " + o.call_error;
  if (o.shape != e.shape)
    return "the original (minimal) case's " + e.tensor + " is " + shape_text(o.shape) + ", the " + modified + " " +
           shape_text(e.shape) + ": no row-by-row comparison";
  const std::size_t n = numel(e.shape);
  const auto full = [n](const std::vector<double> &v) { return v.size() == n; };
  if (!full(o.got) || !full(e.got) || !full(o.exact) || !full(e.exact)) return "no values to compare the two problems";
  std::string s;
  const std::int64_t row = shown_row(e), len = e.row_length();
  if (row >= 0) {
    const bool differs = std::binary_search(e.differing_rows.begin(), e.differing_rows.end(), row);
    const std::string was = row_values(o.exact, row, len), now = row_values(e.exact, row, len);
    const auto first = static_cast<std::ptrdiff_t>(row * len);
    const auto same = [&](const std::vector<double> &a, const std::vector<double> &b) {
      return std::equal(a.begin() + first, a.begin() + first + len, b.begin() + first);
    };
    const bool same_exact = same(o.exact, e.exact);
    s = "row " + e.row_name(row) +
        (differs ? " differs" : same(o.got, e.got) ? " is the same" : " changed within what the bounds allow") +
        (row == e.marked_row ? " (the failing element's)" : "") + ": original " + row_values(o.got, row, len) +
        " vs " + modified + " " + row_values(e.got, row, len) + "; exact " +
        (same_exact ? was + " on both" : was + " vs " + now) + "; ";
  }
  const std::size_t count = e.differing_rows.size();
  s += std::to_string(count) + " of " + std::to_string(e.rows()) + (count == 1 ? " rows differs" : " rows differ") +
       " beyond what the property allows";
  for (std::size_t r = 0; r < std::min(count, kRowNamesShown); ++r)
    s += (r ? ", " : ": ") + e.row_name(e.differing_rows[r]);
  if (count > kRowNamesShown) s += ", …";
  return s;
}

bool cut_short(const PropertyReport &p, int planned) {
  if (p.counterexample || p.tier == Tier::off || p.verdict == Verdict::unsupported) return false;
  return p.verdict != Verdict::pass || p.cases - p.undecided < planned || p.budget_exhausted;
}

bool declined_entirely(const RunReport &r) {
  const auto declined = [](const PropertyReport &p) { return p.verdict == Verdict::unsupported; };
  return !r.properties.empty() && r.contract.implements(r.dtype) &&
         std::all_of(r.properties.begin(), r.properties.end(), declined);
}

std::vector<std::string> shape_lines(const RunReport &r) {
  std::vector<std::string> lines;
  for (std::size_t i = 0;; ++i) {
    std::string shape, failed, undecided;
    int passed = 0, declined = 0, not_taken = 0;
    double worst = 0;
    for (const PropertyReport &p : r.properties) {
      if (i >= p.shapes.size()) continue;
      const ShapeRun &s = p.shapes[i];
      shape = s.shape;
      const std::string named = p.id + " (" + ratio_text(s.ratio) + ")";
      switch (s.verdict) {
        case Verdict::pass:
          ++passed;
          worst = std::max(worst, s.ratio);
          break;
        case Verdict::fail:
        case Verdict::warn: failed += (failed.empty() ? "" : ", ") + named; break;
        case Verdict::unsupported: ++(s.spec.empty() ? not_taken : declined); break;
        default: undecided += (undecided.empty() ? "" : ", ") + p.id; break;
      }
    }
    if (shape.empty()) return lines;
    std::string line = fmt::format("{}: {} passed", shape, passed);
    if (passed) line += " (worst err/bound " + ratio_text(worst) + ")";
    if (!failed.empty()) line += "; failed: " + failed;
    if (!undecided.empty()) line += "; undecided: " + undecided;
    if (declined) line += fmt::format("; declined by the kernel: {}", declined);
    if (not_taken) line += fmt::format("; not taken: {}", not_taken);
    lines.push_back(std::move(line));
  }
}

std::size_t failure_number(const std::vector<std::pair<std::size_t, std::size_t>> &failures,
                           std::pair<std::size_t, std::size_t> member) {
  return static_cast<std::size_t>(std::find(failures.begin(), failures.end(), member) - failures.begin()) + 1;
}

std::string replay_command(std::size_t failure_number) {
  return "attncheck replay report.json --failure " + std::to_string(failure_number);
}

}  // namespace detail
}  // namespace attncheck::reporting
