// Charts drawn by kda itself as inline SVG (no script, no library): a line chart over rounds, a
// horizontal grouped bar chart on a log scale, a heat map and a candidate DAG. Shapes that stand for
// a number carry its provenance (page.h) and a <title> tooltip.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/page.h"

namespace kda::report {

struct ChartPoint {
  double x = 0, y = 0;
  std::string tooltip;
  std::string color;
  std::vector<Source> srcs;  // where y came from
};

struct LineChart {
  std::string x_label, y_label;
  std::vector<ChartPoint> points;               // drawn as dots
  std::vector<std::pair<double, double>> step;  // drawn as a step line (e.g. the incumbent)
  std::string step_label;
  std::optional<double> reference;  // a horizontal line (e.g. the target)
  std::string reference_label;
};
std::string line_chart(const LineChart& chart);

struct Bar {
  std::string series;  // legend name
  std::string color;
  double value = 0;
  std::optional<double> low, high;  // a whisker (spread)
  std::string tooltip;
  std::vector<Source> srcs;
};
struct BarRow {
  std::string label;
  std::vector<Bar> bars;
};
// Horizontal bars, one group per row, on a log axis (latencies span orders of magnitude).
std::string bar_chart(const std::vector<BarRow>& rows, const std::string& unit);

struct HeatCell {
  std::optional<double> value;  // colour: 1 = best (green) .. `worst` and beyond (red); none: grey
  std::string text;
  std::string tooltip;
  std::vector<Source> srcs;
  Derivation derivation = Derivation::kValue;
};
std::string heat_map(const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                     const std::vector<std::vector<HeatCell>>& cells, double worst);

struct DagNode {
  std::string id, parent;  // parent "" for a root
  int column = 0;          // e.g. the round
  std::string label, tooltip, color;
};
std::string dag(const std::vector<DagNode>& nodes);

}  // namespace kda::report
