#include "runner/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace diffattn::runner {
namespace {

constexpr const char* kPalette[] = {"#6b7280", "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2"};
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 60, kPlotHeight = 240;
constexpr double kBarWidth = 22, kGroupGap = 30, kLegendEntry = 170;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Maps a value to [0, 1] of the plot height on the chosen scale.
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;
  double at(double v) const {
    if (log) return (std::log10(std::max(v, std::pow(10.0, lo))) - lo) / (hi - lo);
    return (v - lo) / (hi - lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      for (double e = lo; e <= hi + 1e-9; e += 1) t.push_back(std::pow(10.0, e));
    } else {
      for (int i = 0; i <= 4; ++i) t.push_back(lo + (hi - lo) * i / 4);
    }
    return t;
  }
};

Scale make_scale(const BarChart& c) {
  double min_pos = INFINITY, max_v = 0;
  for (const auto& s : c.values)
    for (const auto& v : s)
      if (v && std::isfinite(*v)) {
        max_v = std::max(max_v, *v);
        if (*v > 0) min_pos = std::min(min_pos, *v);
      }
  if (c.reference) {
    max_v = std::max(max_v, *c.reference);
    if (*c.reference > 0) min_pos = std::min(min_pos, *c.reference);
  }
  Scale s;
  s.log = c.log_scale;
  if (s.log) {
    if (!std::isfinite(min_pos)) min_pos = 1, max_v = 10;
    s.lo = std::floor(std::log10(min_pos));
    s.hi = std::max(s.lo + 1, std::ceil(std::log10(max_v)));
  } else {
    s.hi = max_v > 0 ? max_v * 1.1 : 1;
  }
  return s;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string render_bar_chart(const BarChart& c) {
  const Scale scale = make_scale(c);
  const double group_width = kBarWidth * std::max<std::size_t>(1, c.series.size()) + kGroupGap;
  // Wide enough for the title and a legend row of two entries at least.
  const double plot_width = std::max({340.0, group_width * c.groups.size(), 8.5 * c.title.size()});
  const std::size_t legend_columns = std::max<std::size_t>(1, static_cast<std::size_t>(plot_width / kLegendEntry));
  const double legend_height = 18.0 * ((c.series.size() + legend_columns - 1) / legend_columns);
  const double width = kLeft + plot_width + kRight;
  const double height = kTop + kPlotHeight + kBottom + legend_height;
  const double y0 = kTop + kPlotHeight;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << px(width) << "\" height=\"" << px(height)
    << "\" viewBox=\"0 0 " << px(width) << ' ' << px(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<title>" << html_escape(c.title) << "</title>\n";
  o << "<text x=\"" << px(kLeft) << "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" << html_escape(c.title) << "</text>\n";
  for (double t : scale.ticks()) {
    const double y = y0 - scale.at(t) * kPlotHeight;
    o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(kLeft + plot_width) << "\" y1=\"" << px(y) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e5e7eb\"/><text x=\"" << px(kLeft - 6) << "\" y=\"" << px(y + 4) << "\" text-anchor=\"end\">"
      << num(t) << "</text>\n";
  }
  o << "<text transform=\"translate(14," << px(kTop + kPlotHeight / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << html_escape(c.y_label) << (scale.log ? " (log scale)" : "") << "</text>\n";
  for (std::size_t g = 0; g < c.groups.size(); ++g) {
    const double gx = kLeft + (plot_width - group_width * c.groups.size()) / 2 + g * group_width + kGroupGap / 2;
    for (std::size_t s = 0; s < c.series.size(); ++s) {
      const auto& v = c.values[s][g];
      const double x = gx + s * kBarWidth;
      if (v && *v <= 0 && scale.log) {  // exact agreement has no place on a log axis: say so
        o << "<text x=\"" << px(x + kBarWidth / 2) << "\" y=\"" << px(y0 - 4) << "\" text-anchor=\"middle\">0</text>\n";
        continue;
      }
      if (!v || !std::isfinite(*v)) {
        o << "<text x=\"" << px(x + kBarWidth / 2) << "\" y=\"" << px(y0 - 4) << "\" text-anchor=\"middle\" fill=\"#9ca3af\">-</text>\n";
        continue;
      }
      const double h = std::max(1.0, std::clamp(scale.at(*v), 0.0, 1.0) * kPlotHeight);
      o << "<rect x=\"" << px(x + 1) << "\" y=\"" << px(y0 - h) << "\" width=\"" << px(kBarWidth - 2) << "\" height=\""
        << px(h) << "\" fill=\"" << kPalette[(s + c.first_color) % 8] << "\"><title>" << html_escape(c.series[s] + " / " + c.groups[g])
        << ": " << num(*v) << "</title></rect>\n";
    }
    o << "<text x=\"" << px(gx + kBarWidth * c.series.size() / 2) << "\" y=\"" << px(y0 + 16)
      << "\" text-anchor=\"middle\">" << html_escape(c.groups[g]) << "</text>\n";
  }
  o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(kLeft + plot_width) << "\" y1=\"" << px(y0) << "\" y2=\"" << px(y0)
    << "\" stroke=\"#374151\"/>\n";
  if (c.reference) {
    const double y = y0 - std::clamp(scale.at(*c.reference), 0.0, 1.0) * kPlotHeight;
    o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(kLeft + plot_width) << "\" y1=\"" << px(y) << "\" y2=\"" << px(y)
      << "\" stroke=\"#111827\" stroke-dasharray=\"6 4\"/><text x=\"" << px(kLeft + plot_width) << "\" y=\"" << px(y - 4)
      << "\" text-anchor=\"end\">" << html_escape(c.reference_label) << "</text>\n";
  }
  for (std::size_t s = 0; s < c.series.size(); ++s) {
    const double lx = kLeft + static_cast<double>(s % legend_columns) * kLegendEntry;
    const double ly = y0 + 36 + static_cast<double>(s / legend_columns) * 18.0;
    o << "<rect x=\"" << px(lx) << "\" y=\"" << px(ly - 9) << "\" width=\"10\" height=\"10\" fill=\"" << kPalette[(s + c.first_color) % 8]
      << "\"/><text x=\"" << px(lx + 14) << "\" y=\"" << px(ly) << "\">" << html_escape(c.series[s]) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace diffattn::runner
