#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace kda::report {

namespace {

// About `n` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart).
std::vector<double> linear_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string tick_text(double v) { return fmt::format("{:g}", v); }

std::string title(const std::string& tooltip) {
  return tooltip.empty() ? "" : "<title>" + escape(tooltip) + "</title>";
}

}  // namespace

std::string line_chart(const LineChart& c) {
  constexpr double W = 760, H = 300, L = 56, R = 150, T = 16, B = 40;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool first = true;
  auto cover = [&](double x, double y) {
    if (first) x0 = x1 = x, y0 = y1 = y, first = false;
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  };
  for (const auto& p : c.points) cover(p.x, p.y);
  for (const auto& [x, y] : c.step) cover(x, y);
  if (c.reference) cover(x0, *c.reference);
  y0 = std::min(0.0, y0);
  y1 = y1 <= y0 ? y0 + 1 : y1 * 1.08;
  if (x1 <= x0) x1 = x0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::string s =
      fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", W, H, W, H);
  for (double t : linear_ticks(y0, y1, 5))
    s += fmt::format(
        R"(<line class="grid" x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}"/><text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)",
        L, W - R, py(t), py(t), L - 6, py(t) + 4, tick_text(t));
  for (double t : linear_ticks(x0, x1, std::min(10, static_cast<int>(x1 - x0) + 1)))
    if (t == std::floor(t))
      s +=
          fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", px(t), H - B + 16, tick_text(t));
  s += fmt::format(
      R"(<line class="axis" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/><line class="axis" x1="{0}" x2="{3}" y1="{2}" y2="{2}"/>)",
      L, T, H - B, W - R);
  s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", (L + W - R) / 2, H - 6,
                   escape(c.x_label));
  s += fmt::format(R"~(<text transform="translate(14,{:.1f}) rotate(-90)" text-anchor="middle">{}</text>)~",
                   (T + H - B) / 2, escape(c.y_label));
  if (c.reference) {
    s += fmt::format(
        R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#7a5af8" stroke-dasharray="5 4"/>)", L, W - R,
        py(*c.reference), py(*c.reference));
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", W - R + 6, py(*c.reference) + 4,
                     escape(c.reference_label));
  }
  if (!c.step.empty()) {
    std::string d = fmt::format("M{:.1f},{:.1f}", px(c.step[0].first), py(c.step[0].second));
    for (size_t i = 1; i < c.step.size(); ++i)
      d += fmt::format(" H{:.1f} V{:.1f}", px(c.step[i].first), py(c.step[i].second));
    s += fmt::format(R"(<path d="{}" fill="none" stroke="#1b7f3b" stroke-width="2"/>)", d);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" fill="#1b7f3b">{}</text>)", W - R + 6, py(c.step.back().second) + 4,
                     escape(c.step_label));
  }
  for (const auto& p : c.points)
    s += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="{}"{}>{}</circle>)", px(p.x), py(p.y),
                     p.color.empty() ? "#2563eb" : p.color, p.srcs.empty() ? "" : provenance_attrs(p.y, p.srcs),
                     title(p.tooltip));
  return s + "</svg>\n";
}

std::string bar_chart(const std::vector<BarRow>& rows, const std::string& unit) {
  constexpr double W = 900, L = 250, R = 30, T = 26, B = 34, kBar = 9, kGap = 8;
  double lo = 0, hi = 0;
  std::vector<std::pair<std::string, std::string>> legend;  // series, colour (first seen order)
  for (const auto& r : rows)
    for (const auto& b : r.bars) {
      for (double v : {b.value, b.low.value_or(b.value), b.high.value_or(b.value)})
        if (v > 0) lo = lo == 0 ? v : std::min(lo, v), hi = std::max(hi, v);
      if (std::none_of(legend.begin(), legend.end(), [&](const auto& l) { return l.first == b.series; }))
        legend.emplace_back(b.series, b.color);
    }
  if (hi <= 0) return "<p class=\"muted\">no measured values to draw</p>\n";
  const double d0 = std::floor(std::log10(lo)), d1 = std::max(d0 + 1, std::ceil(std::log10(hi)));
  auto px = [&](double v) { return L + (std::log10(std::max(v, lo)) - d0) / (d1 - d0) * (W - L - R); };
  double height = T + B;
  for (const auto& r : rows) height += r.bars.size() * kBar + kGap;
  std::string s = fmt::format(R"(<svg class="chart" width="{}" height="{:.0f}" viewBox="0 0 {} {:.0f}" role="img">)", W,
                              height, W, height);
  double lx = L;
  for (const auto& [name, color] : legend) {
    s += fmt::format(R"(<rect x="{:.1f}" y="4" width="10" height="10" fill="{}"/><text x="{:.1f}" y="13">{}</text>)",
                     lx, color, lx + 14, escape(name));
    lx += 24 + 7.0 * name.size();
  }
  for (double d = d0; d <= d1; ++d) {
    const double v = std::pow(10.0, d);
    s += fmt::format(
        R"(<line class="grid" x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2:.0f}"/><text x="{0:.1f}" y="{3:.0f}" text-anchor="middle">{4} {5}</text>)",
        px(v), T, height - B, height - B + 14, tick_text(v), escape(unit));
  }
  double y = T;
  for (const auto& r : rows) {
    const double group = r.bars.size() * kBar;
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", L - 8, y + group / 2 + 4,
                     escape(r.label));
    for (const auto& b : r.bars) {
      if (b.value > 0) {
        s += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"{}>{}</rect>)", L,
                         y + 1, std::max(1.0, px(b.value) - L), kBar - 2, b.color,
                         b.srcs.empty() ? "" : provenance_attrs(b.value, b.srcs), title(b.tooltip));
        if (b.low && b.high && *b.high > *b.low)
          s += fmt::format(
              R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#1d2430" stroke-width="1.2"/>)",
              px(*b.low), px(*b.high), y + kBar / 2, y + kBar / 2);
      }
      y += kBar;
    }
    y += kGap;
  }
  s += fmt::format(R"(<line class="axis" x1="{0}" x2="{0}" y1="{1}" y2="{2:.0f}"/>)", L, T, height - B);
  return s + "</svg>\n";
}

std::string heat_map(const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                     const std::vector<std::vector<HeatCell>>& cells, double worst) {
  // Margins from the labels' lengths (about 6.2 px a character at 11 px; column labels run up at 40 degrees).
  constexpr double CW = 74, CH = 26, kChar = 7.0;
  size_t row_chars = 0, col_chars = 0;
  for (const auto& l : row_labels) row_chars = std::max(row_chars, l.size());
  for (const auto& l : col_labels) col_chars = std::max(col_chars, l.size());
  const double L = 16 + kChar * row_chars, T = 16 + kChar * col_chars * 0.643;
  const double W = L + CW * col_labels.size() + kChar * col_chars * 0.766 + 10, H = T + CH * row_labels.size() + 10;
  std::string s = fmt::format(
      R"(<svg class="chart heat" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img">)", W, H, W, H);
  for (size_t c = 0; c < col_labels.size(); ++c)
    s += fmt::format(R"~(<text transform="translate({:.1f},{:.1f}) rotate(-40)">{}</text>)~", L + CW * c + CW / 2,
                     T - 6, escape(col_labels[c]));
  for (size_t r = 0; r < row_labels.size(); ++r) {
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", L - 8, T + CH * r + CH / 2 + 4,
                     escape(row_labels[r]));
    for (size_t c = 0; c < col_labels.size() && r < cells.size() && c < cells[r].size(); ++c) {
      const HeatCell& cell = cells[r][c];
      std::string fill = "#eef0f4";
      if (cell.value) {
        // 1 (the row's best) is green, `worst` and beyond red, linear in between.
        const double t = std::clamp((*cell.value - 1) / std::max(1e-9, worst - 1), 0.0, 1.0);
        fill = fmt::format("rgb({},{},{})", static_cast<int>(60 + 180 * t), static_cast<int>(170 - 110 * t),
                           static_cast<int>(90 - 30 * t));
      }
      const double x = L + CW * c, y = T + CH * r;
      s += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" stroke="#fff"{}>{}</rect>)", x, y, CW,
          CH, fill, cell.value && !cell.srcs.empty() ? provenance_attrs(*cell.value, cell.srcs, cell.derivation) : "",
          title(cell.tooltip));
      if (!cell.text.empty())
        s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" style="fill:#fff">{}</text>)", x + CW / 2,
                         y + CH / 2 + 4, escape(cell.text));
    }
  }
  return s + "</svg>\n";
}

std::string dag(const std::vector<DagNode>& nodes) {
  constexpr double CW = 96, RH = 46, L = 20, T = 20, NW = 76, NH = 30;
  std::map<int, int> per_column;
  std::map<std::string, std::pair<double, double>> at;
  int columns = 0, rows = 1;
  for (const auto& n : nodes) {
    const int row = per_column[n.column]++;
    at[n.id] = {L + CW * n.column, T + RH * row};
    columns = std::max(columns, n.column + 1);
    rows = std::max(rows, row + 1);
  }
  const double W = L * 2 + CW * columns, H = T * 2 + RH * rows;
  std::string s = fmt::format(
      R"(<svg class="chart dag" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img">)", W, H, W, H);
  for (const auto& n : nodes) {
    auto p = at.find(n.parent);
    if (n.parent.empty() || p == at.end()) continue;
    const auto [x0, y0] = p->second;
    const auto [x1, y1] = at[n.id];
    s += fmt::format(
        R"(<path d="M{:.1f},{:.1f} C{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}" fill="none" stroke="#8a94a6"/>)",
        x0 + NW, y0 + NH / 2, x0 + NW + 12, y0 + NH / 2, x1 - 12, y1 + NH / 2, x1, y1 + NH / 2);
  }
  for (const auto& n : nodes) {
    const auto [x, y] = at[n.id];
    s += fmt::format(
        R"(<g class="node" data-id="{}"><rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" rx="5" fill="{}"/>)"
        R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" style="fill:#fff">{}</text>{}</g>)",
        escape(n.id), x, y, NW, NH, n.color, x + NW / 2, y + NH / 2 + 4, escape(n.label), title(n.tooltip));
  }
  return s + "</svg>\n";
}

}  // namespace kda::report
