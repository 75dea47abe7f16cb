// The small JSON helpers every configuration message depends on.

#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "config/json_values.h"

namespace diffattn::config_detail {
namespace {

using nlohmann::json;

TEST(JsonValuesTest, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xc3\xbc"));              // ü
  EXPECT_TRUE(is_valid_utf8("\xe2\x82\xac"));          // €
  EXPECT_TRUE(is_valid_utf8("\xf0\x9f\x98\x80"));      // U+1F600
  EXPECT_FALSE(is_valid_utf8("\xc3"));                 // truncated
  EXPECT_FALSE(is_valid_utf8("\xc3\x28"));             // bad continuation
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));             // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));         // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));     // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_EQ(sanitize_utf8("a\xffz\xc3\xbc"), "a?z\xc3\xbc");
  EXPECT_EQ(sanitize_utf8("\xf0\x9f\x98"), "???");
}

TEST(JsonValuesTest, BriefJsonCutsOnACharacterBoundary) {
  // 2-byte characters at every offset around the cut: the shortened text must stay valid UTF-8.
  for (int pad = 0; pad < 4; ++pad) {
    const std::string value = std::string(static_cast<std::size_t>(pad), 'x') + std::string(80, 'a') + "\xc8\xbf\xc8\xbf";
    std::string text;
    for (int i = 0; i < 40; ++i) text += "\xc8\xbf";
    const std::string brief = brief_json(json(std::string(static_cast<std::size_t>(pad), 'x') + text));
    EXPECT_TRUE(is_valid_utf8(brief)) << "pad " << pad;
    EXPECT_EQ(brief.substr(brief.size() - 3), "...");
    EXPECT_TRUE(is_valid_utf8(brief_json(json(value))));
  }
}

TEST(JsonValuesTest, ReprQuotesLikeTheMessagesShowNames) {
  EXPECT_EQ(repr("FLASH_ATTN"), "'FLASH_ATTN'");
  EXPECT_EQ(repr("it's"), "\"it's\"");
  EXPECT_EQ(repr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(repr("tab\there"), "'tab\\x09here'");
  EXPECT_EQ(repr("\xff"), "'\\xff'");
  EXPECT_EQ(repr("\xc3\xbc"), "'\xc3\xbc'");
}

TEST(JsonValuesTest, IntegersMustBeIntegral) {
  EXPECT_EQ(read_integer(json(7), "f", "n").value(), 7);
  EXPECT_EQ(read_integer(json(-7), "f", "n").value(), -7);
  EXPECT_EQ(read_integer(json(16.0), "f", "n").value(), 16);
  EXPECT_FALSE(read_integer(json(1.5), "f", "n").ok());
  EXPECT_FALSE(read_integer(json(1e300), "f", "n").ok());
  EXPECT_FALSE(read_integer(json(std::uint64_t{1} << 63), "f", "n").ok());
  EXPECT_FALSE(read_integer(json(true), "f", "n").ok());
  EXPECT_FALSE(read_integer(json("3"), "f", "n").ok());
}

TEST(JsonValuesTest, NumbersAreJsonNumbersOnly) {
  EXPECT_EQ(read_number(json(3), "f", "n").value(), 3.0);
  EXPECT_EQ(read_number(json(0.25), "f", "n").value(), 0.25);
  testing_config::expect_config_error(read_number(json(false), "f", "x.y").status(),
                                      {"f: x.y must be a number; got boolean false."});
}

TEST(JsonValuesTest, TextDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(json_text_depth(R"({"a": [1, {"b": 2}]})"), 3);
  EXPECT_EQ(json_text_depth(R"({"a": "[[[[\"[["})"), 1);
  EXPECT_EQ(json_text_depth("]]]]"), 0);
}

TEST(JsonValuesTest, ParseErrorsAreStatusesWithPrintableText) {
  auto parsed = parse_json_text("{\"a\": \xff}", "--diffusion-attention-config");
  testing_config::expect_config_error(parsed.status(), {"--diffusion-attention-config is not valid JSON"});
  EXPECT_NO_THROW((void)json(parsed.status().message()).dump());
  EXPECT_FALSE(parse_json_text("1e999", "x").ok());
}

}  // namespace
}  // namespace diffattn::config_detail
