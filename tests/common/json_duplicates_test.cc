#include "common/json_duplicates.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace diffattn {
namespace {

using nlohmann::json;

TEST(JsonDuplicates, FirstRepeatedKeyIsNamedWithItsPath) {
  struct Case {
    const char* text;
    const char* duplicate;
  };
  const Case cases[] = {
      {R"({"a": 1, "a": 2})", "a"},
      {R"({"default": {"backend": "A", "quant": {}, "backend": "B"}})", "default.backend"},
      {R"({"per_role": {"self": {"backend": "A"}}, "per_role": {}})", "per_role"},
      {R"({"x": [{"k": 1}, {"k": 2, "k": 3}]})", "x.[].k"},
      {R"({"a": {"b": 1}, "c": {"b": 2}})", ""},  // equal keys in different objects are fine
      {R"([{"k": 1}, {"k": 1}])", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::string duplicate = "stale";
    const json value = parse_json_noting_duplicates(c.text, duplicate, /*allow_exceptions=*/false);
    EXPECT_FALSE(value.is_discarded());
    EXPECT_EQ(duplicate, c.duplicate);
  }
}

TEST(JsonDuplicates, ParsesLikeNlohmannWhenNoKeyRepeats) {
  std::mt19937 rng{std::random_device{}()};
  json doc = json::object();
  for (int i = 0; i < 20; ++i) {
    json inner = json::object();
    for (int j = 0; j < 5; ++j) inner["k" + std::to_string(j)] = static_cast<int>(rng() % 1000);
    doc["key" + std::to_string(rng() % 1000) + "_" + std::to_string(i)] = json::array({inner, static_cast<int>(rng() % 7)});
  }
  std::string duplicate;
  EXPECT_EQ(parse_json_noting_duplicates(doc.dump(), duplicate, false), doc);
  EXPECT_TRUE(duplicate.empty());
  EXPECT_TRUE(parse_json_noting_duplicates("{\"a\": ", duplicate, false).is_discarded());
  EXPECT_THROW(parse_json_noting_duplicates("{\"a\": ", duplicate, true), json::parse_error);
}

}  // namespace
}  // namespace diffattn
