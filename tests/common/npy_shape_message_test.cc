#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "common/npy.h"

namespace diffattn::npy {
namespace {

// A version-1.0 .npy image with `shape_text` as the header's shape and no data.
std::vector<std::byte> image_with_shape(const std::string& shape_text) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  std::vector<std::byte> out(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = static_cast<std::byte>(bytes[i]);
  return out;
}

TEST(NpyShapeMessages, NegativeSizesAreNamedAsNegative) {
  std::mt19937 rng{std::random_device{}()};
  const int negative = -1 - static_cast<int>(rng() % 1000);
  const std::string shape = "(2, " + std::to_string(negative) + ")";
  const auto bytes = image_with_shape(shape);
  auto parsed = parse(bytes.data(), bytes.size(), "x.npy");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("a negative size (" + std::to_string(negative) + ")"), std::string::npos)
      << parsed.status().message();
  EXPECT_EQ(parsed.status().message().find("non-integer"), std::string::npos) << parsed.status().message();

  const auto fraction = image_with_shape("(2.5,)");
  auto not_integer = parse(fraction.data(), fraction.size(), "x.npy");
  ASSERT_FALSE(not_integer.ok());
  EXPECT_NE(not_integer.status().message().find("non-integer size"), std::string::npos) << not_integer.status().message();
}

}  // namespace
}  // namespace diffattn::npy
