#include <gtest/gtest.h>

#include <string>

#include "runner/svg_chart.h"

namespace diffattn::runner {
namespace {

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

BarChart two_roles() {
  BarChart c;
  c.title = "Time per <call>";
  c.y_label = "ms";
  c.groups = {"self", "cross"};
  c.series = {"A", "B"};
  c.values = {{4.0, 0.25}, {2.0, std::nullopt}};
  return c;
}

TEST(SvgChart, OneBarPerPresentValueAndEscapedText) {
  const std::string svg = render_bar_chart(two_roles());
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<rect") - 2, 3);  // minus the two legend swatches
  EXPECT_NE(svg.find("Time per &lt;call&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<call>"), std::string::npos);
  EXPECT_NE(svg.find("B / self: 2"), std::string::npos);
}

TEST(SvgChart, LogScaleSpansTheDecadesOfTheData) {
  BarChart c = two_roles();
  c.log_scale = true;
  const std::string svg = render_bar_chart(c);
  EXPECT_NE(svg.find(">0.1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);
}

TEST(SvgChart, ReferenceLineAndExactZeros) {
  BarChart c = two_roles();
  c.log_scale = true;
  c.values = {{0.0, 3e-3}, {2e-2, 0.0}};
  c.reference = 1e-2;
  c.reference_label = "bound";
  c.first_color = 1;
  const std::string svg = render_bar_chart(c);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find(">bound</text>"), std::string::npos);
  EXPECT_EQ(count(svg, ">0</text>"), 2);
  EXPECT_EQ(svg.find("#6b7280"), std::string::npos);  // first_color skips the baseline grey
}

}  // namespace
}  // namespace diffattn::runner
