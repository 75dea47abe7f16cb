#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/npy.h"
#include "kernels/cpu/half_convert.h"
#include "runner/activation_dumps.h"
#include "runner/safetensors_writer.h"

namespace diffattn::runner {
namespace {

namespace fs = std::filesystem;
using test_files::random_tensor;
using test_files::safetensors_image;
using test_files::StoredTensor;
using test_files::write_bytes;

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
  fs::create_directories(dir_ / "cross" / "notes");  // a folder without .npy files is not a sample
  auto found = find_role_dumps(dir_.string(), "cross");
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 2u);
  EXPECT_NE((*found)[0].find("step_00"), std::string::npos);
  auto none = find_role_dumps(dir_.string(), "self");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(find_role_dumps((dir_ / "missing").string(), "self").ok());
}

TEST_F(ActivationDumps, IncompleteOrEmptyRoleFoldersAreRefusedNamingWhatIsMissing) {
  for (const char* op : {"q", "k", "v"}) write_f32(dir_ / "cross" / "step_00" / (std::string(op) + ".npy"), {1, 4, 2, 8});
  write_f32(dir_ / "cross" / "step_10" / "k.npy", {1, 4, 2, 8});
  auto incomplete = find_role_dumps(dir_.string(), "cross");
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.status().message().find("holds k.npy but no q.npy and v.npy"), std::string::npos)
      << incomplete.status().message();

  fs::create_directories(dir_ / "self");
  auto empty = find_role_dumps(dir_.string(), "self");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no q/k/v sample"), std::string::npos) << empty.status().message();
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

// q [1, 10, 4, 16], k and v [1, 7, 2, 16] of fresh random values in `dtype`.
std::vector<StoredTensor> qkv(DType dtype, std::mt19937& rng) {
  return {random_tensor("q", dtype, {1, 10, 4, 16}, rng), random_tensor("k", dtype, {1, 7, 2, 16}, rng),
          random_tensor("v", dtype, {1, 7, 2, 16}, rng)};
}

TEST_F(ActivationDumps, SafetensorsDumpsRoundTripExactlyInEveryDtype) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const fs::path root = dir_ / std::string(dtype_name(dtype));
    const auto tensors = qkv(dtype, rng_);
    write_bytes(root / "self" / "qkv.safetensors", safetensors_image(tensors));
    auto found = find_role_dumps(root.string(), "self");
    ASSERT_TRUE(found.ok()) << found.status().message();
    ASSERT_EQ(found->size(), 1u);
    auto same = load_qkv_dump(found->front(), role(4, 2, 16), dtype);
    ASSERT_TRUE(same.ok()) << same.status().message();
    const HostTensor* loaded[] = {&same->q, &same->k, &same->v};
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(loaded[i]->bytes(), tensors[i].bytes.size());
      EXPECT_EQ(std::memcmp(loaded[i]->data(), tensors[i].bytes.data(), loaded[i]->bytes()), 0) << tensors[i].name;
    }
    EXPECT_EQ(same->k.shape()[1], 7);
    auto f32 = load_qkv_dump(found->front(), role(4, 2, 16), DType::kFloat32);
    ASSERT_TRUE(f32.ok()) << f32.status().message();
    for (std::size_t i = 0; i < tensors[2].values.size(); ++i)
      ASSERT_EQ(f32->v.get(static_cast<std::int64_t>(i)), tensors[2].values[i]) << dtype_name(dtype) << " element " << i;
  }
}

TEST_F(ActivationDumps, SafetensorsSamplesAreFoundInOrderWithNpySamples) {
  write_bytes(dir_ / "cross" / "step_20" / "sample.safetensors", safetensors_image(qkv(DType::kBFloat16, rng_)));
  write_bytes(dir_ / "cross" / "step_00" / "qkv.safetensors", safetensors_image(qkv(DType::kFloat16, rng_)));
  for (const char* op : {"q", "k", "v"}) write_f32(dir_ / "cross" / "step_10" / (std::string(op) + ".npy"), {1, 4, 4, 16});
  write_bytes(dir_ / "cross" / "step_30" / "notes.txt", "no sample here");
  auto found = find_role_dumps(dir_.string(), "cross");
  ASSERT_TRUE(found.ok()) << found.status().message();
  ASSERT_EQ(found->size(), 3u);
  EXPECT_EQ(fs::path((*found)[0]).filename(), "step_00");
  EXPECT_EQ(fs::path((*found)[1]).filename(), "step_10");
  EXPECT_EQ(fs::path((*found)[2]).filename(), "step_20");
  for (int i : {0, 2}) {
    auto t = load_qkv_dump((*found)[i], role(4, 2, 16), DType::kBFloat16);
    EXPECT_TRUE(t.ok()) << t.status().message();
  }
  // qkv.safetensors is the sample when a folder holds other safetensors files too.
  write_bytes(dir_ / "cross" / "step_00" / "extra.safetensors", safetensors_image(qkv(DType::kFloat32, rng_)));
  auto with_extra = find_role_dumps(dir_.string(), "cross");
  ASSERT_TRUE(with_extra.ok()) << with_extra.status().message();
  auto chosen = load_qkv_dump((*with_extra)[0], role(4, 2, 16), DType::kFloat32);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
}

TEST_F(ActivationDumps, NpyAndSafetensorsForOneSampleAreRefused) {
  for (const char* op : {"q", "k", "v"}) write_f32(dir_ / "self" / (std::string(op) + ".npy"), {1, 10, 4, 16});
  write_bytes(dir_ / "self" / "qkv.safetensors", safetensors_image(qkv(DType::kFloat32, rng_)));
  auto found = find_role_dumps(dir_.string(), "self");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), ErrorCode::kInvalidInput);
  const std::string& m = found.status().message();
  EXPECT_NE(m.find("holds both q.npy, k.npy and v.npy and qkv.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("remove q.npy, k.npy and v.npy, or remove qkv.safetensors"), std::string::npos) << m;
  EXPECT_FALSE(load_qkv_dump((dir_ / "self").string(), role(4, 2, 16), DType::kFloat32).ok());
}

TEST_F(ActivationDumps, SeveralSafetensorsFilesWithoutQkvAreRefused) {
  write_bytes(dir_ / "self" / "s1" / "a.safetensors", safetensors_image(qkv(DType::kFloat32, rng_)));
  write_bytes(dir_ / "self" / "s1" / "b.safetensors", safetensors_image(qkv(DType::kFloat32, rng_)));
  auto found = find_role_dumps(dir_.string(), "self");
  ASSERT_FALSE(found.ok());
  const std::string& m = found.status().message();
  EXPECT_NE(m.find("several safetensors files (a.safetensors and b.safetensors) and no qkv.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("rename the one to load to qkv.safetensors"), std::string::npos) << m;
}

TEST_F(ActivationDumps, SafetensorsWithoutVIsRefusedBeforeAnyRun) {
  auto tensors = qkv(DType::kBFloat16, rng_);
  tensors[2].name = "out";
  write_bytes(dir_ / "self" / "qkv.safetensors", safetensors_image(tensors));
  auto found = find_role_dumps(dir_.string(), "self");
  ASSERT_FALSE(found.ok());
  const std::string& m = found.status().message();
  EXPECT_NE(m.find("qkv.safetensors has no tensor named \"v\"; it holds \"k\", \"out\", \"q\""), std::string::npos) << m;
  EXPECT_NE(m.find("needs tensors named q, k and v"), std::string::npos) << m;
  auto loaded = load_qkv_dump((dir_ / "self").string(), role(4, 2, 16), DType::kFloat32);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("no tensor named \"v\""), std::string::npos) << loaded.status().message();
}

TEST_F(ActivationDumps, BrokenSafetensorsFilesAreRefusedWithTheReaderMessage) {
  const std::string image = safetensors_image(qkv(DType::kFloat16, rng_));
  write_bytes(dir_ / "self" / "qkv.safetensors", image.substr(0, image.size() - 100));
  auto found = find_role_dumps(dir_.string(), "self");
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("truncated (copy it again)"), std::string::npos) << found.status().message();
}

TEST_F(ActivationDumps, SafetensorsThatDoNotFitTheRoleAreRefused) {
  auto tensors = qkv(DType::kFloat32, rng_);
  write_bytes(dir_ / "self" / "qkv.safetensors", safetensors_image(tensors));
  auto wrong_heads = load_qkv_dump((dir_ / "self").string(), role(8, 8, 16), DType::kFloat32);
  ASSERT_FALSE(wrong_heads.ok());
  EXPECT_NE(wrong_heads.status().message().find("qkv.safetensors does not fit role 'self' (8 heads"), std::string::npos)
      << wrong_heads.status().message();
  tensors[0] = random_tensor("q", DType::kFloat32, {10, 4, 16}, rng_);
  write_bytes(dir_ / "rank" / "qkv.safetensors", safetensors_image(tensors));
  auto rank = load_qkv_dump((dir_ / "rank").string(), role(4, 2, 16), DType::kFloat32);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("tensor \"q\" has shape [10, 4, 16]; activation dumps are [batch, tokens, heads, head_size]"),
            std::string::npos)
      << rank.status().message();
  tensors[0] = random_tensor("q", DType::kFloat32, {1, 10, 4, 16}, rng_);
  tensors[1] = random_tensor("k", DType::kFloat32, {1, 0, 2, 16}, rng_);
  write_bytes(dir_ / "empty" / "qkv.safetensors", safetensors_image(tensors));
  auto empty = load_qkv_dump((dir_ / "empty").string(), role(4, 2, 16), DType::kFloat32);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("tensor \"k\" has shape [1, 0, 2, 16], which holds no elements"), std::string::npos)
      << empty.status().message();
  tensors = qkv(DType::kFloat32, rng_);
  const float nan = std::nanf("");
  tensors[1].bytes.replace(12, 4, reinterpret_cast<const char*>(&nan), 4);
  write_bytes(dir_ / "nan" / "qkv.safetensors", safetensors_image(tensors));
  auto non_finite = load_qkv_dump((dir_ / "nan").string(), role(4, 2, 16), DType::kFloat32);
  ASSERT_FALSE(non_finite.ok());
  EXPECT_NE(non_finite.status().message().find("tensor \"k\" holds a non-finite value at flat index 3"), std::string::npos)
      << non_finite.status().message();
}

}  // namespace
}  // namespace diffattn::runner
