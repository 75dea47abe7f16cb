#include "common/name_hints.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace diffattn {
namespace {

const std::vector<std::string> kNames = {"TORCH_SDPA", "FLASH_ATTN", "CUDNN_ATTN", "SAGE_ATTN", "SAGE_ATTN_3"};

TEST(NameHints, TyposOfAnyCaseFindTheirName) {
  std::mt19937 rng{std::random_device{}()};
  for (const std::string& name : kNames) {
    std::string typo = name;
    typo[rng() % typo.size()] = 'q';  // one substitution
    for (char& c : typo) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto near = nearest_name(typo, kNames);
    ASSERT_TRUE(near.has_value()) << typo;
    EXPECT_EQ(*near, name) << typo;
  }
  EXPECT_EQ(did_you_mean("flash_atn", kNames), " Did you mean 'FLASH_ATTN'?");
}

TEST(NameHints, UnrelatedOrEmptyNamesGetNoSuggestion) {
  EXPECT_FALSE(nearest_name("XFORMERS", kNames).has_value());
  EXPECT_FALSE(nearest_name("", kNames).has_value());
  EXPECT_FALSE(nearest_name(std::string(100000, 'A'), kNames).has_value());
  EXPECT_EQ(did_you_mean("MY_PLUGIN_THING", kNames), "");
}

TEST(NameHints, LongEchoesAreCut) {
  std::mt19937 rng{std::random_device{}()};
  const std::size_t length = 65 + rng() % 100000;
  const std::string text(length, 'z');
  EXPECT_EQ(bounded_echo(text), std::string(64, 'z') + "...");
  EXPECT_EQ(bounded_echo("short"), "short");
  EXPECT_EQ(bounded_echo(std::string(64, 'y')), std::string(64, 'y'));
  // "é" is two bytes; 63 ASCII bytes then "é" straddles the cut, which moves before it.
  EXPECT_EQ(bounded_echo(std::string(63, 'a') + "\xc3\xa9" + "tail"), std::string(63, 'a') + "...");
}

}  // namespace
}  // namespace diffattn
