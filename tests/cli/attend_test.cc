// `diffattn attend` and the .npy files it reads and writes: results against the float64 oracle,
// and bad input refused with a message and no output file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/npy.h"
#include "kernels/cpu/half_convert.h"
#include "parity/oracle.h"

namespace diffattn {
namespace {

namespace fs = std::filesystem;

class AttendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("diffattn_attend_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A random float32 array (values also returned) written to `name`.
  std::vector<float> write_random(const std::string& name, std::vector<std::int64_t> shape) {
    npy::Array a;
    a.type = npy::ElementType::kFloat32;
    a.shape = std::move(shape);
    std::vector<float> values(static_cast<std::size_t>(a.numel()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : values) v = normal(rng_);
    const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
    a.data.assign(bytes, bytes + values.size() * sizeof(float));
    EXPECT_TRUE(npy::write_file(path(name), a).ok());
    return values;
  }

  int attend(std::vector<std::string> args) {
    args.insert(args.begin(), {"--platform", "cpu"});
    return cli::run_attend(std::move(args));
  }

  std::vector<std::string> base_args() const {
    return {"--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out", path("out.npy")};
  }

  void expect_refused(std::vector<std::string> args, const std::string& message_part) {
    ::testing::internal::CaptureStderr();
    const int code = attend(std::move(args));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(code, 0);
    EXPECT_NE(err.find(message_part), std::string::npos) << "stderr was: " << err;
    EXPECT_FALSE(fs::exists(path("out.npy"))) << "a refused call must not write its output";
    EXPECT_FALSE(fs::exists(path("lse.npy")));
    for (const auto& entry : fs::directory_iterator(dir_))
      EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << "left behind " << entry.path();
  }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(AttendTest, WritesOutAndLseMatchingTheOracle) {
  auto q = write_random("q.npy", {2, 9, 4, 32});
  auto k = write_random("k.npy", {2, 13, 2, 32});
  auto v = write_random("v.npy", {2, 13, 2, 16});
  auto args = base_args();
  args.insert(args.end(), {"--lse", path("lse.npy"), "--causal", "--scale", "0.2", "--backend", "TORCH_SDPA"});
  ASSERT_EQ(attend(args), 0);

  auto out = npy::read_file(path("out.npy"));
  auto lse = npy::read_file(path("lse.npy"));
  ASSERT_TRUE(out.ok() && lse.ok());
  EXPECT_EQ(out->shape, (std::vector<std::int64_t>{2, 9, 4, 16}));
  EXPECT_EQ(lse->shape, (std::vector<std::int64_t>{2, 4, 9}));
  EXPECT_EQ(out->type, npy::ElementType::kFloat32);

  AttentionProblem p;
  p.q = TensorView::Contiguous(q.data(), DType::kFloat32, {2, 9, 4, 32});
  p.k = TensorView::Contiguous(k.data(), DType::kFloat32, {2, 13, 2, 32});
  p.v = TensorView::Contiguous(v.data(), DType::kFloat32, {2, 13, 2, 16});
  p.out = TensorView::Contiguous(out->data.data(), DType::kFloat32, {2, 9, 4, 16});
  p.lse = TensorView::Contiguous(lse->data.data(), DType::kFloat32, {2, 4, 9});
  p.causal = true;
  p.scale = 0.2f;
  auto truth = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  const testing::Errors err = testing::max_errors(p, truth);
  EXPECT_LT(err.out, 1e-5);
  EXPECT_LT(err.lse, 1e-5);
}

// The sparse video backends take the call's latent video from --video: FASTVIDEO_VSA keeping every
// cube is dense attention; without --video it is refused and nothing is written.
TEST_F(AttendTest, VideoGeometryReachesTheSparseVideoBackends) {
  const std::int64_t tokens = 3 * 5 * 6;  // 1 x 2 x 2 cubes, partial
  auto q = write_random("q.npy", {1, tokens, 2, 64});
  auto k = write_random("k.npy", {1, tokens, 2, 64});
  auto v = write_random("v.npy", {1, tokens, 2, 64});
  auto args = base_args();
  args.insert(args.end(), {"--diffusion-attention-backend", "FASTVIDEO_VSA", "--fastvideo-vsa-topk", "4"});
  expect_refused(args, "video geometry");
  auto with_video = args;
  with_video.insert(with_video.end(), {"--video", "3,5,6", "--layer-index", "2"});
  ASSERT_EQ(attend(with_video), 0);
  auto out = npy::read_file(path("out.npy"));
  ASSERT_TRUE(out.ok());
  AttentionProblem p;
  p.q = TensorView::Contiguous(q.data(), DType::kFloat32, {1, tokens, 2, 64});
  p.k = TensorView::Contiguous(k.data(), DType::kFloat32, {1, tokens, 2, 64});
  p.v = TensorView::Contiguous(v.data(), DType::kFloat32, {1, tokens, 2, 64});
  p.out = TensorView::Contiguous(out->data.data(), DType::kFloat32, {1, tokens, 2, 64});
  auto truth = testing::reference_attention(p, testing::OraclePrecision::kFloat64);
  EXPECT_LT(testing::max_errors(p, truth).out, 1e-5);
  fs::remove(path("out.npy"));
  for (const char* bad : {"3,5", "3,0,6", "3,5,6,-1,0", "3,5,x"}) {
    auto bad_args = args;
    bad_args.insert(bad_args.end(), {"--video", bad});
    expect_refused(bad_args, "--video '");
  }
  auto larger = args;
  larger.insert(larger.end(), {"--video", "4,5,6"});  // 120 tokens for a call of 90
  ::testing::internal::CaptureStderr();
  EXPECT_NE(attend(larger), 0);
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(path("out.npy")));
}

TEST_F(AttendTest, Bfloat16ArraysStoredAsUint16) {
  std::vector<std::uint16_t> bits;
  npy::Array a;
  a.type = npy::ElementType::kUInt16;
  a.shape = {1, 5, 2, 8};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 80; ++i) bits.push_back(cpu::float_to_bf16(normal(rng_)));
  const auto* bytes = reinterpret_cast<const std::byte*>(bits.data());
  a.data.assign(bytes, bytes + bits.size() * 2);
  for (const char* name : {"q.npy", "k.npy", "v.npy"}) ASSERT_TRUE(npy::write_file(path(name), a).ok());

  expect_refused(base_args(), "--dtype bfloat16");  // uint16 alone is ambiguous

  auto args = base_args();
  args.insert(args.end(), {"--dtype", "bfloat16"});
  ASSERT_EQ(attend(args), 0);
  auto out = npy::read_file(path("out.npy"));
  ASSERT_TRUE(out.ok());
  // bfloat16 output is written as float32 (NumPy has no bfloat16), each value a bfloat16 one.
  EXPECT_EQ(out->type, npy::ElementType::kFloat32);
  EXPECT_EQ(out->shape, (std::vector<std::int64_t>{1, 5, 2, 8}));
  // q == k == v: every output is a convex combination of the value rows, so it stays within their range.
  float lo = 1e9f, hi = -1e9f;
  for (auto b : bits) lo = std::min(lo, cpu::bf16_to_float(b)), hi = std::max(hi, cpu::bf16_to_float(b));
  const auto* o = reinterpret_cast<const float*>(out->data.data());
  for (int i = 0; i < 80; ++i) {
    EXPECT_EQ(cpu::bf16_to_float(cpu::float_to_bf16(o[i])), o[i]);
    EXPECT_GE(o[i], lo - 1e-2f);
    EXPECT_LE(o[i], hi + 1e-2f);
  }
}

TEST_F(AttendTest, NanInInputsIsRefused) {
  auto q = write_random("q.npy", {1, 4, 2, 8});
  write_random("k.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 4, 2, 8});
  q[5] = std::numeric_limits<float>::quiet_NaN();
  npy::Array a;
  a.shape = {1, 4, 2, 8};
  const auto* bytes = reinterpret_cast<const std::byte*>(q.data());
  a.data.assign(bytes, bytes + q.size() * 4);
  ASSERT_TRUE(npy::write_file(path("q.npy"), a).ok());
  auto args = base_args();
  args.insert(args.end(), {"--lse", path("lse.npy")});
  expect_refused(args, "NaN");
}

TEST_F(AttendTest, HeadsNotAMultipleOfKvHeadsAreRefused) {
  write_random("q.npy", {1, 4, 3, 8});
  write_random("k.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 4, 2, 8});
  expect_refused(base_args(), "GQA requires query heads to be a multiple of KV heads, got q_heads=3 and kv_heads=2");
}

TEST_F(AttendTest, WrongRankAndShapeMismatchAreRefused) {
  write_random("q.npy", {4, 2, 8});
  write_random("k.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 4, 2, 8});
  expect_refused(base_args(), "q must have rank 4");
  write_random("q.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 5, 2, 8});
  expect_refused(base_args(), "v must have shape");
}

TEST_F(AttendTest, NonFloatingOrBf16BitsInAFloatCallAreRefused) {
  write_random("q.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 4, 2, 8});
  npy::Array bits;
  bits.type = npy::ElementType::kUInt16;
  bits.shape = {1, 4, 2, 8};
  bits.data.assign(64 * 2, std::byte{0x3c});
  ASSERT_TRUE(npy::write_file(path("k.npy"), bits).ok());
  expect_refused(base_args(), "k.npy holds uint16");
  npy::Array ints;
  ints.type = npy::ElementType::kInt32;
  ints.shape = {1, 4, 2, 8};
  ints.data.assign(64 * 4, std::byte{1});
  ASSERT_TRUE(npy::write_file(path("k.npy"), ints).ok());
  expect_refused(base_args(), "k.npy holds int32");
}

TEST_F(AttendTest, UnreadableFilesAndBadMasksAreRefused) {
  write_random("q.npy", {1, 4, 2, 8});
  write_random("v.npy", {1, 4, 2, 8});
  expect_refused(base_args(), "cannot open");
  write_random("k.npy", {1, 4, 2, 8});
  write_random("mask.npy", {1, 4});
  auto args = base_args();
  args.insert(args.end(), {"--mask", path("mask.npy")});
  expect_refused(args, "bool keep-mask");
  std::ofstream(path("garbage.npy")) << "not an array";
  args = base_args();
  args[1] = path("garbage.npy");
  expect_refused(args, "not a .npy file");
}

TEST_F(AttendTest, KeyPaddingMaskFromBoolArray) {
  write_random("q.npy", {1, 3, 1, 8});
  write_random("k.npy", {1, 4, 1, 8});
  auto v = write_random("v.npy", {1, 4, 1, 8});
  npy::Array mask;
  mask.type = npy::ElementType::kBool;
  mask.shape = {1, 4};
  mask.data = {std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0}};  // only key 2 is kept
  ASSERT_TRUE(npy::write_file(path("mask.npy"), mask).ok());
  auto args = base_args();
  args.insert(args.end(), {"--mask", path("mask.npy")});
  ASSERT_EQ(attend(args), 0);
  auto out = npy::read_file(path("out.npy"));
  ASSERT_TRUE(out.ok());
  const auto* o = reinterpret_cast<const float*>(out->data.data());
  for (int i = 0; i < 3; ++i)
    for (int e = 0; e < 8; ++e) EXPECT_NEAR(o[i * 8 + e], v[2 * 8 + e], 1e-6);
}

TEST(Npy, RoundTripsEveryElementType) {
  const auto dir = fs::temp_directory_path() / ("diffattn_npy_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  for (auto type : {npy::ElementType::kFloat32, npy::ElementType::kFloat16, npy::ElementType::kUInt16,
                    npy::ElementType::kFloat64, npy::ElementType::kBool, npy::ElementType::kInt32}) {
    npy::Array a;
    a.type = type;
    a.shape = {3, 5};
    std::mt19937 rng(std::random_device{}());
    for (std::size_t i = 0; i < 15 * npy::element_size(type); ++i) a.data.push_back(std::byte(rng() & 0x01));
    const std::string file = (dir / "a.npy").string();
    ASSERT_TRUE(npy::write_file(file, a).ok());
    auto back = npy::read_file(file);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->type, type);
    EXPECT_EQ(back->shape, a.shape);
    EXPECT_EQ(back->data, a.data);
    // Version-1 headers are padded so that the data starts on a 64-byte boundary.
    EXPECT_EQ((fs::file_size(file) - a.data.size()) % 64, 0u);
  }
  fs::remove_all(dir);
}

std::vector<std::byte> npy_image(const std::string& header, std::size_t data_bytes) {
  std::string text = std::string("\x93NUMPY\x01\x00", 8);
  text += static_cast<char>(header.size() & 0xff);
  text += static_cast<char>(header.size() >> 8);
  text += header;
  std::vector<std::byte> bytes(text.size() + data_bytes);
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

TEST(Npy, RefusesWhatItCannotRead) {
  auto parse = [](const std::string& header, std::size_t data) {
    auto image = npy_image(header, data);
    return npy::parse(image.data(), image.size(), "x.npy");
  };
  EXPECT_TRUE(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24).ok());
  EXPECT_TRUE(parse("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 4).ok());
  EXPECT_NE(parse("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24).status().message().find("big-endian"),
            std::string::npos);
  EXPECT_NE(parse("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24).status().message().find("Fortran"),
            std::string::npos);
  EXPECT_NE(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16).status().message().find("not supported"),
            std::string::npos);
  EXPECT_NE(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20).status().message().find("truncated"),
            std::string::npos);
  const std::byte junk[4] = {};
  EXPECT_EQ(npy::parse(junk, 4, "j.npy").status().code(), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace diffattn
