// Printing a configuration and reading it back gives the same value; dotted flags and JSON agree.

#include <gtest/gtest.h>

#include <random>

#include "config/config_test_util.h"
#include "config/dotted_flags.h"
#include "config/random_config.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using nlohmann::json;
using testing_config::RandomConfigGenerator;

std::uint64_t fresh_seed() { return (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}(); }

TEST(RoundTripTest, RandomConfigsPrintAndReparseToEqualValues) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  RandomConfigGenerator generator(seed, {});
  for (int i = 0; i < 2000; ++i) {
    const AttentionConfig config = generator.config();
    const std::string text = config_to_json(config).dump();
    auto again = parse_attention_config_json(text, global_registry());
    ASSERT_TRUE(again.ok()) << text << "\n" << again.status().message();
    ASSERT_EQ(again.value(), config) << text;
    // Printing is stable: the re-read config prints the same text.
    ASSERT_EQ(config_to_json(again.value()).dump(), text);
  }
}

TEST(RoundTripTest, RandomSpecsRoundTripThroughSpecJson) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  RandomConfigGenerator generator(seed, {});
  for (int i = 0; i < 2000; ++i) {
    const AttentionSpec spec = generator.spec();
    auto again = spec_from_json(spec_to_json(spec), "default", global_registry());
    ASSERT_TRUE(again.ok()) << spec_to_json(spec).dump() << "\n" << again.status().message();
    ASSERT_TRUE(again.value().has_value());
    ASSERT_EQ(*again.value(), spec) << spec_to_json(spec).dump();
  }
}

// Every leaf of a JSON config as one dotted flag, values written the way a user would type them.
void to_dotted(const json& node, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (node.is_object() && !node.empty()) {
    for (const auto& item : node.items()) to_dotted(item.value(), path.empty() ? item.key() : path + "." + item.key(), out);
    return;
  }
  if (node.is_string()) {
    const std::string raw = node.get<std::string>();
    auto typed = config_detail::typed_flag_value(raw, "probe");
    out.emplace_back(path, typed.ok() && typed.value() == node ? raw : node.dump());
    return;
  }
  out.emplace_back(path, node.dump());
}

TEST(RoundTripTest, RandomConfigsGiveTheSameValueAsJsonAndAsDottedFlags) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  RandomConfigGenerator generator(seed, {.dots_in_extra_keys = false});
  for (int i = 0; i < 1000; ++i) {
    const AttentionConfig config = generator.config();
    const json printed = config_to_json(config);
    ConfigSources sources;
    to_dotted(printed, "", sources.dotted);
    auto from_flags = parse_attention_config(sources, global_registry());
    ASSERT_TRUE(from_flags.ok()) << printed.dump() << "\n" << from_flags.status().message();
    ASSERT_EQ(from_flags.value(), config) << printed.dump();
  }
}

TEST(RoundTripTest, EmptyConfigPrintsBothKeys) {
  EXPECT_EQ(config_to_json(AttentionConfig{}), json::parse(R"({"default": null, "per_role": {}})"));
}

TEST(RoundTripTest, SpecJsonListsOnlyWhatIsSet) {
  AttentionSpec spec;
  spec.backend = "FLASH_ATTN";
  EXPECT_EQ(spec_to_json(spec), json::parse(R"({"backend": "FLASH_ATTN"})"));
  spec.extra = json::object({{"block_size", 64}});
  EXPECT_EQ(spec_to_json(spec), json::parse(R"({"backend": "FLASH_ATTN", "extra": {"block_size": 64}})"));
}

}  // namespace
}  // namespace diffattn
