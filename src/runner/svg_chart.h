#pragma once
// Inline SVG grouped bar charts for the HTML report: one group per role, one bar per configuration.

#include <optional>
#include <string>
#include <vector>

namespace diffattn::runner {

struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> groups;                     // x axis: roles
  std::vector<std::string> series;                     // bars in a group: configurations
  std::vector<std::vector<std::optional<double>>> values;  // [series][group]; absent: no bar
  bool log_scale = false;
  std::optional<double> reference;  // a dashed horizontal line, e.g. the quality bound
  std::string reference_label;
  int first_color = 0;  // palette index of the first series, so a configuration keeps its colour across charts
};

std::string render_bar_chart(const BarChart& chart);

// Escapes &, <, >, " for HTML and SVG text.
std::string html_escape(const std::string& text);

}  // namespace diffattn::runner
