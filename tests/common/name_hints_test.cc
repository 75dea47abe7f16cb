#include "common/name_hints.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace diffattn {
namespace {

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
