// report.html: one self-contained page (inline CSS and SVG; no scripts, no external assets). Tooltips are SVG
// <title> elements, so hovering a cell shows its exact values without JavaScript. Each run shows its contract;
// counterexamples come grouped by root cause (group_failures), failures in red, warnings (advisory properties,
// beyond the contract) in amber.
#include "common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace attncheck::reporting {

namespace {

using namespace detail;

// ---- layout limits: a page must stay readable (and small) for large cases; report.json keeps everything ----
constexpr std::int64_t kMaxPanels = 8;        ///< heatmap panels (leading indices) drawn per tensor
constexpr std::int64_t kMaxGridSide = 64;     ///< rows and columns drawn per panel
constexpr double kGridWidth = 360, kGridHeight = 300;  ///< target panel size in px
constexpr double kMinCell = 7, kMaxCell = 30; ///< cell side in px
constexpr double kLabelCell = 24;             ///< cells at least this wide print their ratio when above 1
constexpr std::int64_t kMaxTableRows = 16, kMaxTableCols = 8;  ///< input values shown per tensor
constexpr double kMarginLeft = 34, kMarginTop = 18;            ///< room for axis indices

// Colour scale of error ÷ bound: within the bound, log10 ratio in [kLogLow, 0] from light to dark blue; beyond it,
// log10 ratio in [0, kLogHigh] from orange to dark red.
constexpr double kLogLow = -6, kLogHigh = 4;
constexpr std::array<int, 3> kBlueLight{0xd6, 0xe6, 0xf4}, kBlueDark{0x1f, 0x4e, 0x9a};
constexpr std::array<int, 3> kRedLight{0xf6, 0xa0, 0x5a}, kRedDark{0x7f, 0x00, 0x1c};
constexpr std::array<int, 3> kPLight{0xfb, 0xfa, 0xfd}, kPDark{0x3f, 0x00, 0x7d};
constexpr const char *kExactColour = "#eef1f4", *kInfColour = "#111111";

std::string esc(std::string_view s) { return xml_escape(s); }

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string mix(const std::array<int, 3> &a, const std::array<int, 3> &b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(std::lround(a[0] + (b[0] - a[0]) * t)),
                static_cast<int>(std::lround(a[1] + (b[1] - a[1]) * t)),
                static_cast<int>(std::lround(a[2] + (b[2] - a[2]) * t)));
  return buf;
}

/// A ratio in at most 3-4 characters for a cell label: "7", "42", "3e5".
std::string compact(double r) {
  if (r < 100) return num(std::round(r));
  int e = static_cast<int>(std::floor(std::log10(r)));
  double m = std::round(r / std::pow(10.0, e));
  if (m >= 10) m = 1, ++e;  // 9.6e4 → 1e5, not 10e4
  return num(m) + "e" + std::to_string(e);
}

/// How an element compares with its bound.
enum class Cell { exact, within, beyond, non_finite, no_bound, missing };

Cell classify(const Evidence &e, std::size_t x, double *ratio) {
  const double got = e.got[x], exact = e.exact[x], bound = e.bound[x];
  *ratio = e.ratio(x);
  if (std::isnan(*ratio) || std::isinf(*ratio)) return Cell::non_finite;
  if (!std::isfinite(bound) && !(got == exact) && *ratio != 0) return Cell::no_bound;
  if (*ratio == 0) return Cell::exact;
  return *ratio <= 1 ? Cell::within : Cell::beyond;
}

std::string ratio_colour(Cell c, double r) {
  switch (c) {
    case Cell::exact: return kExactColour;
    case Cell::within: return mix(kBlueLight, kBlueDark, (std::log10(r) - kLogLow) / -kLogLow);
    case Cell::beyond: return mix(kRedLight, kRedDark, std::log10(r) / kLogHigh);
    case Cell::non_finite: return kInfColour;
    case Cell::no_bound: return "url(#hatch)";
    case Cell::missing: return "#ffffff";
  }
  return "#fff";
}

/// Panels of a tensor drawn as grids: the last two dims are rows and columns, the leading ones pick the panel.
struct GridShape {
  std::int64_t panels = 1, rows = 1, cols = 1;
  explicit GridShape(const std::vector<std::int64_t> &shape) {
    const std::size_t r = shape.size();
    if (r >= 1) cols = shape[r - 1];
    if (r >= 2) rows = shape[r - 2];
    for (std::size_t d = 0; d + 2 < r; ++d) panels *= shape[d];
  }
};

/// "O[0,1,:,:]": the panel's leading index.
std::string panel_name(std::string_view tensor, const std::vector<std::int64_t> &shape, std::int64_t panel) {
  if (shape.size() <= 2) return std::string(tensor);
  std::vector<std::int64_t> lead(shape.begin(), shape.end() - 2);
  std::string s = element_name(tensor, lead, panel);
  s.pop_back();
  return s + ",:,:]";
}

double cell_side(std::int64_t rows, std::int64_t cols) {
  const double w = kGridWidth / static_cast<double>(std::min(cols, kMaxGridSide));
  const double h = kGridHeight / static_cast<double>(std::min(rows, kMaxGridSide));
  return std::clamp(std::min(w, h), kMinCell, kMaxCell);
}

/// Axis indices along the top and left, every `step`-th so that they never overlap.
std::string axes(std::int64_t rows, std::int64_t cols, double side) {
  std::string s;
  const std::int64_t step = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(14 / side)));
  for (std::int64_t c = 0; c < cols; c += step)
    s += "<text class=\"ax\" x=\"" + num(kMarginLeft + (static_cast<double>(c) + 0.5) * side) + "\" y=\"" +
         num(kMarginTop - 5) + "\" text-anchor=\"middle\">" + std::to_string(c) + "</text>";
  for (std::int64_t r = 0; r < rows; r += step)
    s += "<text class=\"ax\" x=\"" + num(kMarginLeft - 4) + "\" y=\"" +
         num(kMarginTop + (static_cast<double>(r) + 0.5) * side + 3.5) + "\" text-anchor=\"end\">" +
         std::to_string(r) + "</text>";
  return s;
}

std::string truncation_note(const GridShape &g) {
  std::string s;
  if (g.panels > kMaxPanels)
    s += "Showing the first " + std::to_string(kMaxPanels) + " of " + std::to_string(g.panels) + " panels. ";
  if (g.rows > kMaxGridSide || g.cols > kMaxGridSide)
    s += "Each panel shows its first " + std::to_string(kMaxGridSide) + " rows and columns. ";
  return s.empty() ? "" : "<p class=\"note\">" + s + "Every value is in report.json.</p>\n";
}

/// One heatmap panel per leading index; `cell(x, &fill, &title, &label, &mark, &row_class)` describes element x
/// (mark: beyond its bound; row_class: "differs" or "marked" for a row of a metamorphic comparison).
template <class CellFn>
std::string grids(std::string_view tensor, const std::vector<std::int64_t> &shape, std::string_view row_axis,
                  std::string_view col_axis, CellFn cell) {
  const GridShape g(shape);
  const std::int64_t rows = std::min(g.rows, kMaxGridSide), cols = std::min(g.cols, kMaxGridSide);
  const double side = cell_side(g.rows, g.cols);
  std::string out = "<div class=\"panels\">\n";
  for (std::int64_t p = 0; p < std::min(g.panels, kMaxPanels); ++p) {
    const double w = kMarginLeft + static_cast<double>(cols) * side + 2;
    const double h = kMarginTop + static_cast<double>(rows) * side + 2;
    out += "<figure><svg width=\"" + num(w) + "\" height=\"" + num(h) + "\" role=\"img\">";
    out += axes(rows, cols, side);
    std::string marked;  // drawn last so that their outlines lie on top of the neighbours
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t x = (p * g.rows + r) * g.cols + c;
        std::string fill, title, label, row_class;
        bool mark = false;
        cell(x, &fill, &title, &label, &mark, &row_class);
        const std::string cls = mark && !row_class.empty() ? "over " + row_class : mark ? "over" : row_class;
        const std::string rect = "<rect x=\"" + num(kMarginLeft + static_cast<double>(c) * side) + "\" y=\"" +
                                 num(kMarginTop + static_cast<double>(r) * side) + "\" width=\"" + num(side) +
                                 "\" height=\"" + num(side) + "\" fill=\"" + fill + "\"" +
                                 (cls.empty() ? "" : " class=\"" + cls + "\"") + "><title>" + esc(title) +
                                 "</title></rect>";
        if (cls.empty()) {
          out += rect;
          continue;
        }
        marked += rect;
        if (mark && side >= kLabelCell && !label.empty())
          marked += "<text class=\"cl\" x=\"" + num(kMarginLeft + (static_cast<double>(c) + 0.5) * side) +
                    "\" y=\"" + num(kMarginTop + (static_cast<double>(r) + 0.5) * side + 3.5) +
                    "\" text-anchor=\"middle\">" + esc(label) + "</text>";
      }
    out += marked + "</svg><figcaption>" + esc(panel_name(tensor, shape, p)) + " — rows: " + esc(row_axis) +
           ", columns: " + esc(col_axis) + "</figcaption></figure>\n";
  }
  return out + "</div>\n" + truncation_note(g);
}

// ---- legends ----

/// Patterns and gradients shared by every SVG of the page (defined once: ids are unique per document).
std::string page_defs() {
  std::string s = "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>";
  s += "<pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eceef2\"/><line x1=\"0\" "
       "y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b4bac4\" stroke-width=\"2\"/></pattern>";
  const auto gradient = [](const char *id, const std::array<int, 3> &a, const std::array<int, 3> &b) {
    return std::string("<linearGradient id=\"") + id + "\"><stop offset=\"0\" stop-color=\"" + mix(a, b, 0) +
           "\"/><stop offset=\"1\" stop-color=\"" + mix(a, b, 1) + "\"/></linearGradient>";
  };
  s += gradient("gb", kBlueLight, kBlueDark) + gradient("gr", kRedLight, kRedDark);
  s += "<linearGradient id=\"gp\">";
  for (int n = 0; n <= 4; ++n)  // √P scale: stops at even steps of the colour, not of P
    s += "<stop offset=\"" + num(n / 4.0) + "\" stop-color=\"" + mix(kPLight, kPDark, n / 4.0) + "\"/>";
  return s + "</linearGradient></defs></svg>\n";
}

std::string ratio_legend() {
  constexpr double x0 = 70, blue = 180, red = 150, y = 12, hgt = 14;
  std::string s = "<svg class=\"legend\" width=\"560\" height=\"50\" role=\"img\">";
  s += "<rect x=\"8\" y=\"" + num(y) + "\" width=\"" + num(hgt) + "\" height=\"" + num(hgt) + "\" fill=\"" +
       kExactColour + "\" stroke=\"#bbb\"/><text class=\"ax\" x=\"15\" y=\"40\" text-anchor=\"middle\">exact</text>";
  s += "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(blue) + "\" height=\"" + num(hgt) +
       "\" fill=\"url(#gb)\"/>";
  s += "<rect x=\"" + num(x0 + blue) + "\" y=\"" + num(y) + "\" width=\"" + num(red) + "\" height=\"" + num(hgt) +
       "\" fill=\"url(#gr)\" class=\"over\"/>";
  for (int e = static_cast<int>(kLogLow); e <= static_cast<int>(kLogHigh); e += 2) {
    const double x = e <= 0 ? x0 + blue * (e - kLogLow) / -kLogLow : x0 + blue + red * e / kLogHigh;
    s += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(y + hgt) + "\" y2=\"" + num(y + hgt + 4) +
         "\" stroke=\"#555\"/><text class=\"ax\" x=\"" + num(x) + "\" y=\"40\" text-anchor=\"middle\">" +
         (e == 0 ? std::string("1") : "1e" + std::to_string(e)) + "</text>";
  }
  s += "<text class=\"ax\" x=\"" + num(x0 + blue) + "\" y=\"9\" text-anchor=\"middle\" fill=\"#c0392b\">bound</text>";
  const double xs = x0 + blue + red + 24;
  s += "<rect x=\"" + num(xs) + "\" y=\"" + num(y) + "\" width=\"" + num(hgt) + "\" height=\"" + num(hgt) +
       "\" fill=\"" + kInfColour + "\"/><text class=\"ax\" x=\"" + num(xs + 7) +
       "\" y=\"40\" text-anchor=\"middle\">NaN/∞</text>";
  s += "<rect x=\"" + num(xs + 64) + "\" y=\"" + num(y) + "\" width=\"" + num(hgt) + "\" height=\"" + num(hgt) +
       "\" fill=\"url(#hatch)\" stroke=\"#bbb\"/><text class=\"ax\" x=\"" + num(xs + 71) +
       "\" y=\"40\" text-anchor=\"middle\">no bound</text>";
  return s + "</svg>\n";
}

std::string p_legend() {
  std::string s = "<svg class=\"legend\" width=\"420\" height=\"48\" role=\"img\">"
                  "<rect x=\"20\" y=\"8\" width=\"240\" height=\"14\" fill=\"url(#gp)\" stroke=\"#bbb\"/>";
  for (const double p : {0.0, 0.01, 0.1, 0.25, 0.5, 1.0}) {
    const double x = 20 + 240 * std::sqrt(p);  // the colour scale is √P so that small weights stay visible
    s += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"22\" y2=\"26\" stroke=\"#555\"/><text "
         "class=\"ax\" x=\"" + num(x) + "\" y=\"36\" text-anchor=\"middle\">" + num(p) + "</text>";
  }
  s += "<rect x=\"290\" y=\"8\" width=\"14\" height=\"14\" fill=\"url(#hatch)\" stroke=\"#bbb\"/><text class=\"ax\" "
       "x=\"310\" y=\"19\">masked key</text>";
  return s + "</svg>\n";
}

// ---- sections of a counterexample ----

/// The class of element x's cell in a metamorphic comparison's heatmap: "marked" (the failing element's row),
/// "differs" (a row that differs beyond what the property allows) or "".
std::string row_class(const Evidence &marks, std::int64_t x) {
  const std::int64_t row = x / std::max<std::int64_t>(marks.row_length(), 1);
  if (row == marks.marked_row) return "marked";
  return std::binary_search(marks.differing_rows.begin(), marks.differing_rows.end(), row) ? "differs" : "";
}

/// Error ÷ bound over `e`; `marks` (the metamorphic evidence, when e is one of its two problems) marks its rows.
std::string ratio_heatmap(const Evidence &e, const Evidence *marks = nullptr) {
  if (e.got.empty()) return "<p class=\"note\">No kernel values: " + esc(e.call_error) + "</p>\n";
  // Row and column meaning of each output's last two dimensions.
  const auto [rows, cols] = e.tensor == "LSE"  ? std::pair{"head h", "query i"}
                            : e.tensor == "dQ" ? std::pair{"query i", "d"}
                            : e.tensor == "dK" ? std::pair{"key j", "d"}
                            : e.tensor == "dV" ? std::pair{"key j", "channel c"}
                                               : std::pair{"query i", "channel c"};
  const auto cell = [&](std::int64_t x, std::string *fill, std::string *title, std::string *label, bool *mark,
                        std::string *cls) {
    const auto i = static_cast<std::size_t>(x);
    double r = 0;
    const Cell c = classify(e, i, &r);
    *fill = ratio_colour(c, r);
    *mark = c == Cell::beyond || c == Cell::non_finite;
    *label = c == Cell::non_finite ? "∞" : compact(r);
    *title = element_name(e.tensor, e.shape, x) + "\nerror ÷ bound " + ratio_text(r) + "\ngot " + hex_dec(e.got[i]) +
             "\nexact " + hex_dec(e.exact[i]) + "\nbound " + hex_dec(e.bound[i]);
    if (marks) *cls = row_class(*marks, x);
    if (*cls == "marked") *title += "\nthe failing element's row";
    else if (*cls == "differs") *title += "\na row that differs between the two problems";
  };
  return ratio_legend() + grids(e.tensor, e.shape, rows, cols, cell);
}

std::string p_heatmap(const Evidence &e, const Case &c) {
  const Shape &s = c.spec.shape;
  const std::vector<std::int64_t> shape{s.B, s.Hq, s.Lq, s.Lk};
  if (e.probabilities.size() != numel(shape)) return "";
  return p_legend() +
         grids("P", shape, "query i", "key j",
               [&](std::int64_t x, std::string *fill, std::string *title, std::string *, bool *, std::string *) {
                 const std::int64_t i = (x / s.Lk) % s.Lq, j = x % s.Lk;
                 const double p = e.probabilities[static_cast<std::size_t>(x)];
                 const bool shown = visible(c.spec.mask, i, j, s.Lq, s.Lk);
                 *fill = shown ? mix(kPLight, kPDark, std::sqrt(std::max(p, 0.0))) : "url(#hatch)";
                 *title = element_name("P", shape, x) + (shown ? " = " + hex_dec(p) : ": masked");
               });
}

/// Bins of error ÷ bound: exact, (0, 1e-6], a decade each up to 1e4, above, NaN/∞, no bound.
std::string histogram(const Evidence &e) {
  if (e.got.empty()) return "";
  constexpr int kDecadeFirst = -6, kDecadeLast = 4;
  constexpr int kDecades = kDecadeLast - kDecadeFirst;
  constexpr std::size_t kTiny = 1, kFirstDecade = 2, kAbove = kFirstDecade + kDecades, kNonFinite = kAbove + 1,
                        kNoBound = kAbove + 2, kBins = kAbove + 3;
  std::array<std::int64_t, kBins> count{};
  for (std::size_t i = 0; i < e.got.size(); ++i) {
    double r = 0;
    const Cell c = classify(e, i, &r);
    std::size_t bin = 0;
    if (c == Cell::non_finite) bin = kNonFinite;
    else if (c == Cell::no_bound) bin = kNoBound;
    else if (c == Cell::exact) bin = 0;
    else if (r <= std::pow(10.0, kDecadeFirst)) bin = kTiny;
    else if (r > std::pow(10.0, kDecadeLast)) bin = kAbove;
    else {
      // Decade bins are (10^d, 10^(d+1)]: a ratio of exactly 1 is within the bound, left of the bound line.
      const int d = std::clamp(static_cast<int>(std::ceil(std::log10(r))) - 1, kDecadeFirst, kDecadeLast - 1);
      bin = kFirstDecade + static_cast<std::size_t>(d - kDecadeFirst);
    }
    ++count[bin];
  }
  const std::int64_t most = std::max<std::int64_t>(1, *std::max_element(count.begin(), count.end()));
  constexpr double kBar = 44, kPlot = 110, kTop = 18, kLeft = 12, kGap = 8;
  const auto bar_x = [&](std::size_t b) {  // the special bins stand apart from the decades
    return kLeft + kBar * static_cast<double>(b) + (b >= kFirstDecade ? kGap : 0) + (b > kAbove ? kGap : 0);
  };
  const double axis_y = kTop + kPlot;
  std::string s = "<svg class=\"hist\" width=\"" + num(bar_x(kBins) + kLeft) + "\" height=\"" + num(axis_y + 44) +
                  "\" role=\"img\">";
  s += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(bar_x(kBins)) + "\" y1=\"" + num(axis_y) + "\" y2=\"" +
       num(axis_y) + "\" stroke=\"#9aa0a8\"/>";
  const std::size_t first_over = kFirstDecade + static_cast<std::size_t>(-kDecadeFirst);  // (1, 10]
  for (std::size_t b = 0; b < kBins; ++b) {
    const double h = count[b] ? std::max(2.0, kPlot * std::log1p(static_cast<double>(count[b])) /
                                                  std::log1p(static_cast<double>(most)))
                              : 0;
    const char *colour = b == 0 ? "#c9ced6"
                         : b == kNonFinite ? kInfColour
                         : b == kNoBound   ? "#9aa0a8"
                         : b >= first_over ? "#c0392b"
                                           : "#3a6db5";
    const double x = bar_x(b);
    std::string range;
    if (b == 0) range = "exact";
    else if (b == kTiny) range = "≤ 1e" + std::to_string(kDecadeFirst);
    else if (b == kAbove) range = "> 1e" + std::to_string(kDecadeLast);
    else if (b == kNonFinite) range = "NaN/∞";
    else if (b == kNoBound) range = "no bound";
    else {
      const int d = kDecadeFirst + static_cast<int>(b - kFirstDecade);
      range = "(1e" + std::to_string(d) + ", 1e" + std::to_string(d + 1) + "]";
    }
    s += "<rect x=\"" + num(x + 5) + "\" y=\"" + num(axis_y - h) + "\" width=\"" + num(kBar - 10) + "\" height=\"" +
         num(h) + "\" fill=\"" + colour + "\"><title>" + esc(range) + ": " + std::to_string(count[b]) +
         " elements</title></rect>";
    if (count[b])
      s += "<text class=\"ax\" x=\"" + num(x + kBar / 2) + "\" y=\"" + num(axis_y - h - 3) +
           "\" text-anchor=\"middle\">" + std::to_string(count[b]) + "</text>";
    // Decades are labelled at their edges (the axis is logarithmic); the special bins under their bars.
    if (b < kFirstDecade || b > kAbove)
      s += "<text class=\"ax\" x=\"" + num(x + kBar / 2) + "\" y=\"" + num(axis_y + 14) +
           "\" text-anchor=\"middle\">" + esc(b == kTiny ? "tiny" : range) + "</text>";
  }
  for (int d = kDecadeFirst; d <= kDecadeLast; ++d) {
    const double x = bar_x(kFirstDecade + static_cast<std::size_t>(d - kDecadeFirst));
    s += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(axis_y) + "\" y2=\"" + num(axis_y + 4) +
         "\" stroke=\"#555\"/><text class=\"ax\" x=\"" + num(x) + "\" y=\"" + num(axis_y + 14) +
         "\" text-anchor=\"middle\">" + (d == 0 ? std::string("1") : "1e" + std::to_string(d)) + "</text>";
  }
  const double xl = bar_x(first_over);
  s += "<line x1=\"" + num(xl) + "\" x2=\"" + num(xl) + "\" y1=\"" + num(kTop - 8) + "\" y2=\"" + num(axis_y) +
       "\" stroke=\"#c0392b\" stroke-dasharray=\"4 3\"/><text class=\"ax\" x=\"" + num(xl + 4) + "\" y=\"" +
       num(kTop - 2) + "\" fill=\"#c0392b\">bound</text>";
  s += "<text class=\"ax\" x=\"" + num(kLeft) + "\" y=\"" + num(axis_y + 34) +
       "\">elements per bin of error ÷ bound (decades; bar height on a log scale of the count)</text>";
  return s + "</svg>\n";
}

std::string value_table(const char *name, const std::vector<std::int64_t> &shape, const std::vector<double> &v) {
  const std::int64_t cols = shape.back();
  const std::int64_t rows = static_cast<std::int64_t>(v.size()) / std::max<std::int64_t>(cols, 1);
  const std::vector<std::int64_t> lead(shape.begin(), shape.end() - 1);
  std::string s = "<details open><summary><b>" + std::string(name) + "</b> [";
  for (std::size_t d = 0; d < shape.size(); ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  s += "]</summary>\n<div class=\"scroll\"><table class=\"vals\"><tr><th></th>";
  for (std::int64_t c = 0; c < std::min(cols, kMaxTableCols); ++c) s += "<th>" + std::to_string(c) + "</th>";
  s += "</tr>\n";
  for (std::int64_t r = 0; r < std::min(rows, kMaxTableRows); ++r) {
    std::string label = element_name("", lead, r);
    s += "<tr><th>" + label + "</th>";
    for (std::int64_t c = 0; c < std::min(cols, kMaxTableCols); ++c) {
      const double x = v[static_cast<std::size_t>(r * cols + c)];
      s += "<td><span class=\"hex\">" + hex(x) + "</span><span class=\"dec\">" + decimal(x) + "</span></td>";
    }
    s += "</tr>\n";
  }
  s += "</table></div>";
  if (rows > kMaxTableRows || cols > kMaxTableCols)
    s += "<p class=\"note\">Showing " + std::to_string(std::min(rows, kMaxTableRows)) + " of " +
         std::to_string(rows) + " rows and " + std::to_string(std::min(cols, kMaxTableCols)) + " of " +
         std::to_string(cols) + " columns; every value is in report.json.</p>";
  return s + "</details>\n";
}

/// The original problem of a metamorphic evidence as an evidence of its own, for its heatmap.
Evidence original_of(const Evidence &e) {
  Evidence o;
  o.tensor = e.tensor;
  o.shape = e.original->shape;
  o.got = e.original->got;
  o.exact = e.original->exact;
  o.bound = e.original->bound;
  o.call_error = e.original->call_error;
  return o;
}

/// The row comparison_text shows, on both problems: the kernel's and the exact values, element by element.
std::string row_table(const Evidence &e, std::string_view what) {
  const std::int64_t row = shown_row(e), len = e.row_length();
  const Evidence::Original &o = *e.original;
  const std::size_t n = numel(e.shape);
  if (row < 0 || o.shape != e.shape || o.got.size() != n || e.got.size() != n || o.exact.size() != n ||
      e.exact.size() != n)
    return "";
  std::string s = "<div class=\"scroll\"><table class=\"vals\"><tr><th>" + esc(e.row_name(row)) + "</th>";
  for (std::int64_t c = 0; c < std::min(len, kMaxTableCols); ++c) s += "<th>" + std::to_string(c) + "</th>";
  s += "</tr>\n";
  const auto line = [&](const std::string &label, const std::vector<double> &v) {
    s += "<tr><th>" + esc(label) + "</th>";
    for (std::int64_t c = 0; c < std::min(len, kMaxTableCols); ++c) {
      const double x = v[static_cast<std::size_t>(row * len + c)];
      s += "<td><span class=\"hex\">" + hex(x) + "</span><span class=\"dec\">" + decimal(x) + "</span></td>";
    }
    s += "</tr>\n";
  };
  line("original: got", o.got);
  line("modified: got", e.got);
  line("original: exact", o.exact);
  line("modified: exact", e.exact);
  s += "</table></div>";
  if (len > kMaxTableCols)
    s += "<p class=\"note\">Showing " + std::to_string(kMaxTableCols) + " of " + std::to_string(len) +
         " values; every value is in report.json.</p>";
  return s + "<p class=\"note\">modified: " + esc(what) + "</p>\n";
}

/// Both problems of a metamorphic failure side by side, their rows that differ outlined.
std::string comparison_section(const Evidence &e, std::string_view what) {
  const bool same_shape = e.original->shape == e.shape;
  return "<h4>The two problems: original and modified (" + esc(what) + ")</h4>\n<p class=\"cmp\">" +
         esc(comparison_text(e, what)) + "</p>\n<p class=\"note\">Outlined: the failing element's row (solid) " +
         "and the other rows that differ beyond what the property allows (dashed).</p>\n<div class=\"pair\">" +
         "<section><h5>original: the generated (minimal) case</h5>\n" +
         ratio_heatmap(original_of(e), same_shape ? &e : nullptr) + "</section>\n<section><h5>modified: " +
         esc(what) + "</h5>\n" + ratio_heatmap(e, &e) + "</section></div>\n" + row_table(e, what);
}

std::string verdict_cell(Verdict v) {
  return "<td class=\"v v-" + std::string(verdict_id(v)) + "\">" + std::string(verdict_name(v)) + "</td>";
}

std::string inputs_tables(const Case &c) {
  const Shape &sh = c.spec.shape;
  std::string s = value_table("q", q_shape(sh), c.q) + value_table("k", k_shape(sh), c.k) +
                  value_table("v", v_shape(sh), c.v);
  if (!c.dout.empty()) s += value_table("dout", o_shape(sh), c.dout);
  return s;
}

std::string failure_section(const Run &run, const PropertyReport &p, const Evidence *ev, std::size_t number) {
  const Counterexample &c = *p.counterexample;
  const RunReport &r = run.report;
  const bool warning = p.verdict == Verdict::warn;
  const Case &judged = c.judged();
  std::string s = "<article class=\"" + std::string(warning ? "failure warning" : "failure") + "\" id=\"failure-" +
                  std::to_string(number) + "\">\n<h3 class=\"title\">" + (warning ? "Warning " : "Failure ") +
                  std::to_string(number) + " · <code>" + esc(p.id) + "</code> on <code>" + esc(r.kernel) +
                  "</code> (" + std::string(dtype_name(r.dtype)) + ")" +
                  (warning ? " <span class=\"tier\">advisory: beyond the declared contract</span>" : "") + "</h3>\n";
  if (!p.summary.empty()) s += "<p class=\"meaning\">" + esc(p.summary) + ".</p>\n";
  s += "<p class=\"formula\">" + esc(p.formula) + "</p>\n<dl>\n";
  s += "<dt>failing step</dt><dd><span class=\"step\">" +
       std::string(c.outcome.step ? step_id(*c.outcome.step) : "?") + "</span> " + esc(c.outcome.detail) + "</dd>\n";
  if (ev && !ev->call_error.empty()) s += "<dt>call error</dt><dd class=\"err\">" + esc(ev->call_error) + "</dd>\n";
  if (const auto w = ev ? telling_worst(*ev) : std::nullopt) {
    const std::size_t x = *w;
    s += "<dt>worst element</dt><dd><code>" + esc(element_name(ev->tensor, ev->shape, static_cast<std::int64_t>(x))) +
         "</code>: got <code>" + hex_dec(ev->got[x]) + "</code>, exact <code>" + hex_dec(ev->exact[x]) +
         "</code>, bound <code>" + hex_dec(ev->bound[x]) + "</code>, error ÷ bound <b>" +
         ratio_text(ev->ratio(x)) + "</b></dd>\n";
  }
  s += "<dt>case</dt><dd><code>" + esc(c.minimal.spec.describe()) + "</code>, scale <code>" +
       hex_dec(c.minimal.spec.scale()) + "</code></dd>\n";
  if (c.outcome.failing_case)
    s += "<dt>failing problem</dt><dd>" + esc(c.outcome.failing_what) + ": <code>" + esc(judged.spec.describe()) +
         "</code>, scale <code>" + hex_dec(c.judged_scale()) + "</code></dd>\n";
  if (c.from_corpus())
    s += "<dt>corpus</dt><dd>from the corpus: entry <code>" + esc(c.corpus_entry) +
         "</code>, recorded by an earlier run, fails again</dd>\n";
  if (c.found_after > 0)
    s += "<dt>search</dt><dd>found after " + std::to_string(c.found_after) + " cases; shrunk in " +
         std::to_string(c.shrink_steps) + " steps (" + std::to_string(c.shrinks_tried) + " tried) from <code>" +
         esc(c.original.describe()) + "</code></dd>\n";
  s += "<dt>replay</dt><dd><code>" + replay_command(number) + "</code></dd>\n";
  s += "<dt>seed</dt><dd><code>" + std::to_string(c.seed) + "</code>, reproduce <code class=\"wrap\">" +
       esc(c.reproduce) + "</code></dd>\n</dl>\n";
  const std::string on = c.outcome.failing_case ? " — failing problem: " + esc(c.outcome.failing_what) : "";
  if (ev) {
    s += ev->original ? comparison_section(*ev, c.outcome.failing_what)
                      : "<h4>Error ÷ bound over " + esc(ev->tensor) + on + "</h4>\n" + ratio_heatmap(*ev);
    s += "<h4>Error histogram</h4>\n" + histogram(*ev);
    const std::string ph = p_heatmap(*ev, judged);
    if (!ph.empty()) s += "<h4>Attention probabilities P (exact)" + on + "</h4>\n" + ph;
  } else {
    s += "<p class=\"note\">No evidence recorded (the check gathers it when report files are written).</p>\n";
  }
  if (c.outcome.failing_case) {
    s += "<h4>Inputs of the failing problem: " + esc(c.outcome.failing_what) + "</h4>\n<div class=\"inputs\">\n" +
         inputs_tables(judged) + "</div>\n";
    s += "<details class=\"generated\"><summary>Inputs of the generated (minimal) case</summary>\n"
         "<div class=\"inputs\">\n" + inputs_tables(c.minimal) + "</div>\n</details>\n";
  } else {
    s += "<h4>Inputs</h4>\n<div class=\"inputs\">\n" + inputs_tables(c.minimal) + "</div>\n";
  }
  return s + "</article>\n";
}

constexpr const char *kStyle = R"(
:root{--fg:#1d2330;--muted:#5b6575;--line:#dde2ea;--pass:#1e7b3c;--fail:#b3261e;--warn:#b86e00;--warnbg:#fff6e0;--und:#6a5a9c;--uns:#6b7280}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:0 0 8px}h3{font-size:16px;margin:0 0 8px}h4{font-size:15px;margin:22px 0 8px}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f5;padding:1px 4px;border-radius:3px}
code.wrap{word-break:break-all}
.sub{color:var(--muted);margin:0 0 18px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:13px}
.b-pass{background:var(--pass)}.b-fail{background:var(--fail)}.b-warn{background:var(--warn)}.b-undecided{background:var(--und)}.b-unsupported{background:var(--uns)}.b-error{background:var(--fail)}
section.run,article.failure{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:0 0 18px}
article.failure{border-left:5px solid var(--fail)}
article.warning{border-left-color:var(--warn);background:#fffdf7}
article.warning .step{background:var(--warn)}
.tier{display:inline-block;font-size:12px;font-weight:600;color:var(--warn);background:var(--warnbg);border:1px solid #f0d08a;border-radius:10px;padding:0 8px;margin-left:6px}
section.group{border-radius:8px;padding:12px 18px;margin:26px 0 12px}
section.g-fail{background:#fdecea;border:1px solid #f3b7b1}section.g-warn{background:var(--warnbg);border:1px solid #f0d08a}
section.group h2{font-size:16px;margin:0 0 4px}section.g-fail h2{color:var(--fail)}section.g-warn h2{color:var(--warn)}
section.group p{margin:0}.caption{font-weight:600}.members{color:var(--muted);font-size:13px}
h2.section{font-size:20px;margin:30px 0 6px}h2.s-warn{color:var(--warn)}h2.s-fail{color:var(--fail)}
.contract{margin:0 0 10px}.contract code{background:#f3f0ff}
details.generated{margin:6px 0 0}details.generated>summary{cursor:pointer;color:var(--muted)}
.meta{color:var(--muted);margin:0 0 10px}
table{border-collapse:collapse}
table.props{width:100%}
table.props th,table.props td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
table.props th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.v{font-weight:700}.v-pass{color:var(--pass)}.v-fail{color:var(--fail);background:#fdecea}.v-warn{color:var(--warn);background:var(--warnbg)}.v-undecided{color:var(--und);background:#f1eef8}.v-unsupported{color:var(--uns)}.v-error{color:var(--fail);background:#fdecea}
td.tier-advisory{color:var(--warn)}td.tier-off{color:var(--uns)}
td.note{color:var(--muted);font-size:13px}
details.coverage{margin:10px 0 0}details.coverage>summary{cursor:pointer}
tr.c-declined td{color:var(--uns)}tr.c-not-reached td{color:var(--fail)}tr.c-not-declared td,tr.c-not-applicable td{color:var(--muted)}
dl{display:grid;grid-template-columns:130px 1fr;gap:4px 12px;margin:10px 0}
dt{color:var(--muted);font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.step{display:inline-block;background:var(--fail);color:#fff;border-radius:3px;padding:0 6px;font-size:12px;font-weight:700;margin-right:4px}
.err{color:var(--fail)}
.meaning{font-weight:600;margin:0 0 2px}.formula{color:var(--muted);margin:0 0 6px;font-style:italic}
.panels{display:flex;flex-wrap:wrap;gap:10px 22px}
figure{margin:0}figcaption{font-size:12px;color:var(--muted);text-align:center}
svg text.ax{font:10.5px ui-monospace,Menlo,Consolas,monospace;fill:#4a5363}
svg text.cl{font:bold 9.5px ui-monospace,Menlo,monospace;fill:#fff;pointer-events:none}
svg rect.over{stroke:#000;stroke-width:1.6}
svg rect.differs{stroke:#8e44ad;stroke-width:1.4;stroke-dasharray:3 2}svg rect.marked{stroke:#8e44ad;stroke-width:2.6}
.pair{display:flex;flex-wrap:wrap;gap:10px 28px}.pair h5{margin:4px 0}
svg.legend{display:block;margin:2px 0 8px}
.note{color:var(--muted);font-size:12.5px}
.inputs details{margin:0 0 10px}
.scroll{overflow-x:auto}
table.vals th,table.vals td{border:1px solid var(--line);padding:2px 6px;text-align:right}
table.vals th{background:#f1f3f7;font:11px ui-monospace,Menlo,monospace;color:var(--muted)}
.hex{display:block;font:12px ui-monospace,Menlo,Consolas,monospace}
.dec{display:block;font-size:11px;color:var(--muted)}
)";

}  // namespace

/// A run's coverage (coverage.h): the summary line, then every corner by dimension with its decided and declined
/// cases and its status, folded.
std::string coverage_section(const RunCoverage &rc) {
  if (rc.count(CornerStatus::reached) == 0) return "";
  std::string s = "<details class=\"coverage\"><summary>" + esc(rc.describe()) +
                  "</summary>\n<table class=\"props\"><tr><th>dimension</th><th>corner</th><th></th><th>decided</th>"
                  "<th>declined</th><th>status</th></tr>\n";
  for (const CornerCount &c : rc.corners) {
    const std::string status(corner_status_name(c.status));
    s += "<tr class=\"c-" + corner_status_id(c.status, '-') + "\"><td>" + esc(c.corner->dimension) +
         "</td><td><code>" + esc(c.corner->id) + "</code></td><td>" + esc(c.corner->name) +
         "</td><td class=\"n\">" + std::to_string(c.decided) + "</td><td class=\"n\">" + std::to_string(c.declined) +
         "</td><td>" + status + "</td></tr>\n";
  }
  return s + "</table>\n</details>\n";
}

std::string to_html(const Document &doc) {
  const auto failures = doc.failures();
  const Verdict overall = doc.verdict();
  std::size_t warnings = 0;
  for (const auto &[ri, pi] : failures) warnings += doc.runs[ri].report.properties[pi].verdict == Verdict::warn;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                  "<title>attncheck report</title>\n<style>" +
                  std::string(kStyle) + "</style>\n</head>\n<body>\n";
  s += page_defs();
  s += "<main>\n<h1>attncheck report <span class=\"badge b-" + std::string(verdict_id(overall)) + "\">" +
       std::string(verdict_name(overall)) + "</span></h1>\n<p class=\"sub\">attncheck " + esc(doc.tool_version) +
       " · " + std::to_string(doc.runs.size()) + " kernel/dtype run" + (doc.runs.size() == 1 ? "" : "s") + " · " +
       std::to_string(failures.size() - warnings) + " failure" + (failures.size() - warnings == 1 ? "" : "s") +
       " · " + std::to_string(warnings) + " warning" + (warnings == 1 ? "" : "s") +
       (doc.strict ? " · --strict: warnings count as failures" : "") + "</p>\n";

  std::size_t number = 0;
  for (const Run &run : doc.runs) {
    const RunReport &r = run.report;
    const Verdict rv = r.verdict(doc.strict);
    s += "<section class=\"run\">\n<h2><code>" + esc(r.kernel) + "</code> · " + std::string(dtype_name(r.dtype)) +
         " <span class=\"badge b-" + std::string(verdict_id(rv)) + "\">" + std::string(verdict_name(rv)) +
         "</span></h2>\n<p class=\"contract\">contract: <code title=\"" + esc(r.contract.describe()) + "\">" +
         esc(r.contract.describe_changes()) + "</code> <span class=\"note\">(" + esc(r.contract.describe()) +
         ")</span></p>\n<p class=\"meta\">" + esc(r.precision().describe()) + " · " +
         std::string(kind_name(run.source.kind)) +
         (run.source.location.empty() ? "" : " <code>" + esc(run.source.location) + "</code>") + " · profile " +
         esc(run.plan) + " · seed " + std::to_string(r.seed) + " · " + std::to_string(r.cases) +
         " cases per property</p>\n";
    s += "<table class=\"props\"><tr><th>property</th><th>tier</th><th>verdict</th><th>cases</th><th>unsupported</th>"
         "<th>undecided</th><th>worst err/bound</th><th>note</th></tr>\n";
    for (const PropertyReport &p : r.properties) {
      std::string id = "<code>" + esc(p.id) + "</code>";
      if (p.counterexample) id = "<a href=\"#failure-" + std::to_string(++number) + "\">" + id + "</a>";
      std::string note = esc(p.note);
      if (p.budget_exhausted) note = "time budget spent" + std::string(note.empty() ? "" : "; ") + note;
      s += "<tr><td>" + id + "</td><td class=\"tier-" + std::string(tier_name(p.tier)) + "\">" +
           std::string(tier_name(p.tier)) + "</td>" + verdict_cell(p.verdict) + "<td class=\"n\">" +
           std::to_string(p.cases) + "</td><td class=\"n\">" + std::to_string(p.unsupported) +
           "</td><td class=\"n\">" + std::to_string(p.undecided) + "</td><td class=\"n\">" +
           ratio_text(p.worst_ratio_overall()) + "</td><td class=\"note\">" + note + "</td></tr>\n";
    }
    s += "</table>\n" + coverage_section(r.coverage());
    if (const std::vector<std::string> shapes = shape_lines(r); !shapes.empty()) {  // check --shapes
      s += "<p>Declared shapes:</p><ul>";
      for (const std::string &line : shapes) s += "<li>" + esc(line) + "</li>";
      s += "</ul>\n";
    }
    s += "</section>\n";
  }

  // Counterexamples by root cause: failures first, then warnings; each group's headline, then its members.
  const std::vector<FailureGroup> groups = group_failures(doc);
  for (const bool warning_section : {false, true}) {
    bool any = false;
    for (const FailureGroup &g : groups) any |= g.warning == warning_section;
    if (!any) continue;
    s += warning_section ? "<h2 class=\"section s-warn\">⚠️ Warnings — beyond the declared contract</h2>\n"
                           "<p class=\"note\">Advisory properties: behaviour the kernel's contract does not promise." +
                               std::string(doc.strict ? " Counted as failures (--strict)." : " Not failures.") +
                               "</p>\n"
                         : "<h2 class=\"section s-fail\">Failures</h2>\n";
    for (const FailureGroup &g : groups) {
      if (g.warning != warning_section) continue;
      std::string members;
      for (const auto &m : g.members) {
        const std::size_t n =
            static_cast<std::size_t>(std::find(failures.begin(), failures.end(), m) - failures.begin()) + 1;
        members += std::string(members.empty() ? "" : ", ") + "<a href=\"#failure-" + std::to_string(n) +
                   "\"><code>" + esc(doc.runs[m.first].report.properties[m.second].id) + "</code> (" +
                   std::to_string(n) + ")</a>";
      }
      s += "<section class=\"group " + std::string(warning_section ? "g-warn" : "g-fail") + "\">\n<h2>" +
           esc(g.headline) + "</h2>\n<p class=\"caption\">" + esc(g.caption) + "</p>\n<p class=\"members\">" +
           std::to_string(g.members.size()) + " counterexample" + (g.members.size() == 1 ? "" : "s") +
           " with this root cause: " + members + "</p>\n</section>\n";
      for (const auto &m : g.members) {
        const std::size_t n =
            static_cast<std::size_t>(std::find(failures.begin(), failures.end(), m) - failures.begin()) + 1;
        const Run &run = doc.runs[m.first];
        s += failure_section(run, run.report.properties[m.second], evidence_of(run, m.second), n);
      }
    }
  }
  return s + "</main>\n</body>\n</html>\n";
}

}  // namespace attncheck::reporting
