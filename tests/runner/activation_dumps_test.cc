#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/npy.h"
#include "kernels/cpu/half_convert.h"
#include "runner/activation_dumps.h"

namespace diffattn::runner {
namespace {

namespace fs = std::filesystem;

class ActivationDumps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_dumps_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a float32 [B, S, H, D] array of fresh normal values and returns them.
  std::vector<float> write_f32(const fs::path& path, std::vector<std::int64_t> shape) {
    npy::Array a;
    a.type = npy::ElementType::kFloat32;
    a.shape = shape;
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    std::normal_distribution<float> normal;
    for (float& v : values) v = normal(rng_);
    a.data.resize(values.size() * 4);
    std::memcpy(a.data.data(), values.data(), a.data.size());
    fs::create_directories(path.parent_path());
    EXPECT_TRUE(npy::write_file(path.string(), a).ok());
    return values;
  }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

ModelRole role(int heads, int kv_heads, int dim) {
  ModelRole r;
  r.role = "self";
  r.num_heads = heads;
  r.num_kv_heads = kv_heads;
  r.head_size = dim;
  return r;
}

TEST_F(ActivationDumps, LoadsFloat32DumpsAndConvertsToTheRunDtype) {
  const auto q = write_f32(dir_ / "self" / "q.npy", {1, 10, 4, 16});
  const auto k = write_f32(dir_ / "self" / "k.npy", {1, 7, 2, 16});
  write_f32(dir_ / "self" / "v.npy", {1, 7, 2, 16});
  auto found = find_role_dumps(dir_.string(), "self");
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 1u);
  auto t = load_qkv_dump(found->front(), role(4, 2, 16), DType::kBFloat16);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->q.shape()[1], 10);
  EXPECT_EQ(t->k.shape()[1], 7);
  for (std::size_t i = 0; i < q.size(); ++i)
    ASSERT_EQ(t->q.get(static_cast<std::int64_t>(i)), cpu::bf16_to_float(cpu::float_to_bf16(q[i])));
  auto f32 = load_qkv_dump(found->front(), role(4, 2, 16), DType::kFloat32);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->k.get(5), k[5]);
}

TEST_F(ActivationDumps, SeveralSamplesPerRoleAreFoundInOrder) {
  for (const char* sample : {"step_10", "step_00"}) {
    for (const char* op : {"q", "k", "v"}) write_f32(dir_ / "cross" / sample / (std::string(op) + ".npy"), {1, 4, 2, 8});
  }
  write_f32(dir_ / "cross" / "incomplete" / "q.npy", {1, 4, 2, 8});
  auto found = find_role_dumps(dir_.string(), "cross");
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 2u);
  EXPECT_NE((*found)[0].find("step_00"), std::string::npos);
  auto none = find_role_dumps(dir_.string(), "self");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(find_role_dumps((dir_ / "missing").string(), "self").ok());
}

TEST_F(ActivationDumps, ShapesThatDoNotFitTheRoleAreRefused) {
  write_f32(dir_ / "self" / "q.npy", {1, 10, 4, 16});
  write_f32(dir_ / "self" / "k.npy", {1, 10, 4, 16});
  write_f32(dir_ / "self" / "v.npy", {1, 10, 4, 16});
  auto wrong_heads = load_qkv_dump((dir_ / "self").string(), role(8, 8, 16), DType::kFloat32);
  ASSERT_FALSE(wrong_heads.ok());
  EXPECT_EQ(wrong_heads.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(wrong_heads.status().message().find("8 heads"), std::string::npos) << wrong_heads.status().message();
  write_f32(dir_ / "bad" / "q.npy", {10, 4, 16});
  write_f32(dir_ / "bad" / "k.npy", {1, 10, 4, 16});
  write_f32(dir_ / "bad" / "v.npy", {1, 10, 4, 16});
  auto rank = load_qkv_dump((dir_ / "bad").string(), role(4, 4, 16), DType::kFloat32);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("[batch, tokens, heads, head_size]"), std::string::npos);
}

TEST_F(ActivationDumps, NonFiniteValuesAreRefused) {
  npy::Array a;
  a.type = npy::ElementType::kFloat32;
  a.shape = {1, 2, 1, 8};
  std::vector<float> values(16, 0.25f);
  values[3] = std::nanf("");
  a.data.resize(64);
  std::memcpy(a.data.data(), values.data(), 64);
  for (const char* op : {"q", "k", "v"}) ASSERT_TRUE(npy::write_file((dir_ / (std::string(op) + ".npy")).string(), a).ok());
  auto t = load_qkv_dump(dir_.string(), role(1, 1, 8), DType::kFloat32);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("non-finite"), std::string::npos);
}

}  // namespace
}  // namespace diffattn::runner
