#include "common/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/safetensors_writer.h"

namespace diffattn::safetensors {
namespace {

namespace fs = std::filesystem;
using test_files::random_tensor;
using test_files::safetensors_image;
using test_files::StoredTensor;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_safetensors_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& bytes) {
    const fs::path path = dir_ / ("file" + std::to_string(files_++) + ".safetensors");
    test_files::write_bytes(path, bytes);
    return path;
  }

  // Both the in-memory parser and the file reader refuse `image` with a message holding every fragment.
  void expect_refused(const std::string& image, std::initializer_list<std::string> fragments) {
    const auto in_memory = parse(reinterpret_cast<const std::byte*>(image.data()), image.size(), "dump.safetensors");
    ASSERT_FALSE(in_memory.ok());
    EXPECT_EQ(in_memory.status().code(), ErrorCode::kInvalidInput);
    EXPECT_EQ(in_memory.status().message().rfind("dump.safetensors: ", 0), 0u) << in_memory.status().message();
    const fs::path path = write(image);
    const auto from_file = read_header(path.string());
    ASSERT_FALSE(from_file.ok());
    EXPECT_EQ(from_file.status().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(from_file.status().message().find(path.string()), std::string::npos) << from_file.status().message();
    for (const auto& message : {in_memory.status().message(), from_file.status().message()}) {
      for (const std::string& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
      EXPECT_NO_THROW((void)nlohmann::json(message).dump()) << "messages must be printable inside JSON errors";
    }
  }

  fs::path dir_;
  int files_ = 0;
  std::mt19937 rng_{std::random_device{}()};
};

// One F32 tensor "q" of shape [2, 4] (32 bytes) described by `entry`, followed by `data_bytes` bytes.
std::string one_tensor(const std::string& entry, std::size_t data_bytes = 32) {
  return safetensors_image("{\"q\": " + entry + "}", std::string(data_bytes, '\x01'));
}

TEST_F(Safetensors, EveryDtypeRoundTripsExactly) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const std::vector<StoredTensor> tensors = {random_tensor("q", dtype, {2, 3, 4, 5}, rng_),
                                               random_tensor("k", dtype, {7}, rng_)};
    const std::string image = safetensors_image(tensors);
    const fs::path path = write(image);
    auto header = read_header(path.string());
    ASSERT_TRUE(header.ok()) << header.status().message();
    EXPECT_EQ(header->metadata.at("format"), "pt");
    ASSERT_EQ(header->tensors.size(), 2u);
    auto in_memory = parse(reinterpret_cast<const std::byte*>(image.data()), image.size(), "image");
    ASSERT_TRUE(in_memory.ok()) << in_memory.status().message();
    EXPECT_EQ(in_memory->data_start, header->data_start);
    for (const StoredTensor& t : tensors) {
      const TensorInfo& info = header->tensors.at(t.name);
      EXPECT_EQ(info.dtype, dtype);
      EXPECT_EQ(info.shape, t.shape);
      EXPECT_EQ(info.numel(), static_cast<std::int64_t>(t.values.size()));
      auto data = read_tensor_data(path.string(), *header, t.name);
      ASSERT_TRUE(data.ok()) << data.status().message();
      ASSERT_EQ(data->size(), t.bytes.size());
      EXPECT_EQ(std::memcmp(data->data(), t.bytes.data(), t.bytes.size()), 0) << dtype_name(dtype);
    }
  }
}

TEST_F(Safetensors, EmptyAndScalarTensorsAndGapsAreAccepted) {
  const std::string header = R"({"empty": {"dtype": "F16", "shape": [0, 4], "data_offsets": [4, 4]},
                                 "scalar": {"dtype": "F32", "shape": [], "data_offsets": [8, 12]}})";
  const std::string image = safetensors_image(header, std::string(16, 'x'));
  auto parsed = parse(reinterpret_cast<const std::byte*>(image.data()), image.size(), "ok");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->tensors.at("scalar").numel(), 1);
  EXPECT_EQ(parsed->tensors.at("empty").numel(), 0);
}

TEST_F(Safetensors, TruncatedFilesAreRefused) {
  const std::string image = safetensors_image({random_tensor("q", DType::kFloat32, {1, 4, 2, 8}, rng_)});
  expect_refused(image.substr(0, 5), {"is 5 bytes, shorter than the 8-byte header length", "truncated"});
  expect_refused(image.substr(0, 20), {"header length field says", "only 12 follow it", "truncated (copy it again)"});
  expect_refused(image.substr(0, image.size() - 10),
                 {"tensor \"q\" occupies bytes [0, 256) of the data section, which has only 246 bytes", "truncated"});
}

TEST_F(Safetensors, HeaderLengthBeyondTheLimitIsRefused) {
  std::string image = one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]})");
  image[5] = '\x01';  // 2^40 and more
  expect_refused(image, {"more than the 100000000 a safetensors header may have", "not a safetensors file"});
}

TEST_F(Safetensors, OffsetsOutOfRangeAreRefused) {
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [1000, 1032]})"),
                 {"tensor \"q\" occupies bytes [1000, 1032)", "which has only 32 bytes"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [32, 0]})"),
                 {"data_offsets [32, 0]", "0 <= begin <= end"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0]})"), {"[begin, end]"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [-8, 24]})"), {"0 <= begin <= end"});
}

TEST_F(Safetensors, ByteCountThatDoesNotMatchTheShapeIsRefused) {
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 16]})"),
                 {"tensor \"q\" spans 16 bytes but shape [2, 4] of F32 needs 32", "safetensors.torch.save_file"});
  expect_refused(one_tensor(R"({"dtype": "BF16", "shape": [2, 4], "data_offsets": [0, 32]})"),
                 {"spans 32 bytes but shape [2, 4] of BF16 needs 16"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 32]})"),
                 {"too large"});
}

TEST_F(Safetensors, UnsupportedDtypesAreRefusedNamingTheSupportedOnes) {
  for (const char* dtype : {"F64", "I64", "F8_E4M3", "BOOL", "float32"}) {
    expect_refused(one_tensor(std::string(R"({"dtype": ")") + dtype + R"(", "shape": [2, 4], "data_offsets": [0, 32]})"),
                   {std::string("tensor \"q\" has dtype \"") + dtype + "\"", "diffattn reads F32, F16 and BF16", "convert"});
  }
  expect_refused(one_tensor(R"({"dtype": 32, "shape": [2, 4], "data_offsets": [0, 32]})"), {"not a string such as \"F32\""});
}

TEST_F(Safetensors, MalformedHeadersAreRefused) {
  expect_refused(safetensors_image(R"({"q": {"dtype": "F32", "shape": [2, 4],)", std::string(32, 'x')),
                 {"header is not valid JSON (", "corrupt"});
  expect_refused(safetensors_image("{\"q\xff\": 1}", ""), {"header is not valid JSON", "UTF-8"});
  expect_refused(safetensors_image("", ""), {"header is not valid JSON"});
  expect_refused(safetensors_image("[1, 2]", ""), {"header is [1, 2], not a JSON object"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4]})"), {"tensor \"q\" has no \"data_offsets\""});
  expect_refused(one_tensor(R"([1, 2, 3])"), {"tensor \"q\" is described by [1, 2, 3], not an object"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, -4], "data_offsets": [0, 32]})"),
                 {"shape [2, -4]", "list of non-negative integers"});
  expect_refused(one_tensor(R"({"dtype": "F32", "shape": [2, 4.0], "data_offsets": [0, 32]})"), {"non-negative integers"});
  expect_refused(safetensors_image(R"({"__metadata__": {"step": 10}})", ""), {"\"__metadata__\" entry \"step\"", "not a string"});
  expect_refused(safetensors_image(R"({"__metadata__": [1]})", ""), {"\"__metadata__\" is [1], not an object"});
}

TEST_F(Safetensors, DuplicateAndOverlappingTensorsAreRefused) {
  const std::string entry = R"({"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]})";
  expect_refused(safetensors_image("{\"q\": " + entry + ", \"q\": " + entry + "}", std::string(32, 'x')),
                 {"describes tensor \"q\" twice"});
  expect_refused(safetensors_image(R"({"a": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
                                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
                                       "c": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]}})",
                                   std::string(64, 'x')),
                 {"tensors \"a\" (bytes [0, 64)) and \"b\" (bytes [8, 16)) overlap"});
}

TEST_F(Safetensors, MissingTensorNamesWhatTheFileHolds) {
  const fs::path path = write(safetensors_image({random_tensor("q", DType::kFloat16, {1, 2, 1, 4}, rng_),
                                                 random_tensor("k", DType::kFloat16, {1, 2, 1, 4}, rng_)}));
  auto header = read_header(path.string());
  ASSERT_TRUE(header.ok()) << header.status().message();
  auto v = read_tensor_data(path.string(), *header, "v");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("has no tensor \"v\"; it holds \"k\", \"q\""), std::string::npos) << v.status().message();
}

TEST_F(Safetensors, LongAndUnprintableNamesArePrintedShortAndAscii) {
  const std::string name = "\xc3\xa9" + std::string(500, 'n');
  const std::string image =
      safetensors_image("{\"" + name + R"(": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", std::string(8, 'x'));
  expect_refused(image, {"\"\\u00e9nnn", "...", "F32, F16 and BF16"});
  auto refused = parse(reinterpret_cast<const std::byte*>(image.data()), image.size(), "f");
  EXPECT_LT(refused.status().message().size(), 300u);
}

TEST_F(Safetensors, MissingFileIsRefused) {
  auto missing = read_header((dir_ / "absent.safetensors").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("check the path"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace diffattn::safetensors
