// A small inline-SVG line-plot writer for the HTML report: axes with ticks and labels, linear or log scales,
// error bars, dashed "claim" curves and a legend.
#pragma once

#include <string>
#include <vector>

namespace attncheck::study {

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> lo, hi;  ///< error bars (empty: none)
  bool dashed = false;         ///< a claimed / theoretical curve rather than a measurement
  int color = 0;               ///< index into the palette
};

enum class AxisScale { linear, log2, log10 };

struct PlotSpec {
  std::string title, xlabel, ylabel;
  AxisScale xscale = AxisScale::linear, yscale = AxisScale::linear;
  std::vector<PlotSeries> series;
};

/// An <svg> element (self-contained, no scripts). Non-finite or non-positive-on-log points are skipped.
std::string render_svg(const PlotSpec &spec);

}  // namespace attncheck::study
