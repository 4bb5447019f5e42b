#include "svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck::study {
namespace {

constexpr double kWidth = 720, kHeight = 380;
constexpr double kLeft = 78, kRight = 190, kTop = 36, kBottom = 56;  ///< margins around the plot area
constexpr double kLegendRow = 20, kLegendLine = 26, kMarker = 3.5, kCap = 4;
constexpr int kLinearTicks = 5;
constexpr double kPad = 0.05;  ///< fraction of the data range added on each side
constexpr const char *kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

double transform(AxisScale s, double v) {
  switch (s) {
    case AxisScale::linear: return v;
    case AxisScale::log2: return std::log2(v);
    case AxisScale::log10: return std::log10(v);
  }
  return v;
}
bool usable(AxisScale s, double v) { return std::isfinite(v) && (s == AxisScale::linear || v > 0); }

std::string tick_label(double v) { return fmt::format("{:g}", v); }

/// Tick values within [lo, hi] (data units).
std::vector<double> ticks(AxisScale s, double lo, double hi) {
  std::vector<double> t;
  if (s == AxisScale::log2) {
    for (double e = std::ceil(std::log2(lo)); e <= std::floor(std::log2(hi)); ++e) t.push_back(std::exp2(e));
  } else if (s == AxisScale::log10) {
    const double e0 = std::floor(std::log10(lo)), e1 = std::ceil(std::log10(hi));
    constexpr double kFewDecades = 2;
    const bool dense = e1 - e0 <= kFewDecades;
    for (double e = e0; e <= e1; ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1 && !dense) continue;
        const double v = m * std::pow(10.0, e);
        if (v >= lo && v <= hi) t.push_back(v);
      }
  } else {
    const double raw = (hi - lo) / kLinearTicks;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {2.0, 5.0, 10.0})
      if (raw > step) step = m * mag;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * kPad; v += step) t.push_back(std::abs(v) < step * kPad ? 0 : v);
  }
  return t;
}

std::string escape(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

}  // namespace

std::string render_svg(const PlotSpec &spec) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto &s : spec.series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(spec.xscale, s.x[i]) || !usable(spec.yscale, s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      for (double y : {s.y[i], s.lo.empty() ? s.y[i] : s.lo[i], s.hi.empty() ? s.y[i] : s.hi[i]})
        if (usable(spec.yscale, y)) {
          ymin = std::min(ymin, y);
          ymax = std::max(ymax, y);
        }
    }
  if (!(xmin <= xmax) || !(ymin <= ymax)) return "<p><em>(no data to plot)</em></p>";
  if (spec.yscale == AxisScale::linear && ymin > 0 && ymin < (ymax - ymin)) ymin = 0;  // anchor at 0 when close
  double tx0 = transform(spec.xscale, xmin), tx1 = transform(spec.xscale, xmax);
  double ty0 = transform(spec.yscale, ymin), ty1 = transform(spec.yscale, ymax);
  if (tx1 == tx0) tx0 -= 1, tx1 += 1;
  if (ty1 == ty0) ty0 -= 1, ty1 += 1;
  const double padx = (tx1 - tx0) * kPad, pady = (ty1 - ty0) * kPad;
  tx0 -= padx, tx1 += padx, ty0 -= pady, ty1 += pady;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (transform(spec.xscale, x) - tx0) / (tx1 - tx0) * pw; };
  auto py = [&](double y) { return kTop + ph - (transform(spec.yscale, y) - ty0) / (ty1 - ty0) * ph; };
  auto inv = [](AxisScale s, double t) {
    return s == AxisScale::linear ? t : (s == AxisScale::log2 ? std::exp2(t) : std::pow(10.0, t));
  };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n",
      kWidth, kHeight);
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", kLeft, kTop - 14,
                   escape(spec.title));
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft, kTop,
                   pw, ph);
  for (double t : ticks(spec.xscale, inv(spec.xscale, tx0), inv(spec.xscale, tx1))) {
    const double x = px(t);
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                     x, kTop, kTop + ph, kTop + ph + 16, tick_label(t));
  }
  for (double t : ticks(spec.yscale, inv(spec.yscale, ty0), inv(spec.yscale, ty1))) {
    const double y = py(t);
    o += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                     kLeft, y, kLeft + pw, kLeft - 6, y + 4, tick_label(t));
  }
  auto scale_note = [](AxisScale s) {
    return s == AxisScale::linear ? "" : (s == AxisScale::log2 ? " (log₂ scale)" : " (log scale)");
  };
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n", kLeft + pw / 2, kHeight - 14,
                   escape(spec.xlabel), scale_note(spec.xscale));
  o += fmt::format("<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}{}</text>\n",
                   kTop + ph / 2, escape(spec.ylabel), scale_note(spec.yscale));

  const std::size_t palette = std::size(kPalette);
  for (std::size_t si = 0; si < spec.series.size(); ++si) {
    const auto &s = spec.series[si];
    const char *color = kPalette[static_cast<std::size_t>(s.color) % palette];
    std::string path;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(spec.xscale, s.x[i]) || !usable(spec.yscale, s.y[i])) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(s.x[i]), py(s.y[i]));
    }
    o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", path, color,
                     s.dashed ? " stroke-dasharray=\"6,4\"" : "");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(spec.xscale, s.x[i]) || !usable(spec.yscale, s.y[i])) continue;
      const double x = px(s.x[i]);
      if (!s.lo.empty() && usable(spec.yscale, s.lo[i]) && usable(spec.yscale, s.hi[i]))
        o += fmt::format("<path d=\"M{0:.1f},{1:.1f} L{0:.1f},{2:.1f} M{3:.1f},{1:.1f} L{4:.1f},{1:.1f} M{3:.1f},{2:.1f} "
                         "L{4:.1f},{2:.1f}\" stroke=\"{5}\"/>\n",
                         x, py(s.lo[i]), py(s.hi[i]), x - kCap, x + kCap, color);
      if (!s.dashed)
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n", x, py(s.y[i]), kMarker, color);
    }
    const double ly = kTop + kLegendRow * static_cast<double>(si) + kLegendRow / 2;
    const double lx = kLeft + pw + kLegendRow / 2;
    o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>"
                     "<text x=\"{5}\" y=\"{6}\">{7}</text>\n",
                     lx, ly, lx + kLegendLine, color, s.dashed ? " stroke-dasharray=\"6,4\"" : "",
                     lx + kLegendLine + 6, ly + 4, escape(s.name));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace attncheck::study
