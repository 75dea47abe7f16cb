// validate_problem: one test per rule, each checking that the message names the tensor and what
// was expected, and that a valid problem passes.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "diffattn/problem.h"

namespace diffattn {
namespace {

// Buffers large enough for every view below; contents are random and never read by validation.
class ValidateProblemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(std::random_device{}());
    for (auto* buf : {&q_, &k_, &v_, &out_}) {
      buf->resize(4096);
      for (auto& x : *buf) x = static_cast<float>(rng() % 1000) / 500.0f - 1.0f;
    }
    lse_.resize(256);
    mask_.assign(256, 1);
    p_.q = TensorView::Contiguous(q_.data(), DType::kFloat32, {2, 5, 4, 16});
    p_.k = TensorView::Contiguous(k_.data(), DType::kFloat32, {2, 7, 2, 16});
    p_.v = TensorView::Contiguous(v_.data(), DType::kFloat32, {2, 7, 2, 8});
    p_.out = TensorView::Contiguous(out_.data(), DType::kFloat32, {2, 5, 4, 8});
  }

  std::string error() const {
    const Status s = validate_problem(p_);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kInvalidInput);
    return s.message();
  }

  std::vector<float> q_, k_, v_, out_, lse_;
  std::vector<std::uint8_t> mask_;
  AttentionProblem p_;
};

#define EXPECT_MESSAGE_HAS(part) EXPECT_NE(error().find(part), std::string::npos) << error()

TEST_F(ValidateProblemTest, AcceptsAValidProblemAndDescribesIt) {
  ASSERT_TRUE(validate_problem(p_).ok()) << validate_problem(p_).message();
  const ProblemShape s = p_.shape();
  EXPECT_EQ(s.batch, 2);
  EXPECT_EQ(s.seqlen_q, 5);
  EXPECT_EQ(s.seqlen_kv, 7);
  EXPECT_EQ(s.heads_q, 4);
  EXPECT_EQ(s.heads_kv, 2);
  EXPECT_EQ(s.head_size, 16);
  EXPECT_EQ(s.head_size_v, 8);
  EXPECT_EQ(s.mask, MaskKind::kNone);
  EXPECT_FLOAT_EQ(p_.softmax_scale(), 0.25f);
  p_.scale = 0.5f;
  EXPECT_FLOAT_EQ(p_.softmax_scale(), 0.5f);
}

TEST_F(ValidateProblemTest, RanksAndShapes) {
  p_.q.ndim = 3;
  EXPECT_MESSAGE_HAS("q must have rank 4 [B, Sq, Hq, D]");
  p_.q.ndim = 4;
  p_.v.shape[1] = 6;
  EXPECT_MESSAGE_HAS("v must have shape [B, Skv, Hkv, Dv] = [2, 7, 2, 8], got [2, 6, 2, 8]");
  p_.v.shape[1] = 7;
  p_.out.shape[3] = 16;
  EXPECT_MESSAGE_HAS("out must have shape [B, Sq, Hq, Dv] = [2, 5, 4, 8]");
}

TEST_F(ValidateProblemTest, GqaNeedsAMultipleOfKvHeads) {
  p_.q.shape[2] = 3;
  p_.out.shape[2] = 3;
  EXPECT_MESSAGE_HAS("GQA requires query heads to be a multiple of KV heads, got q_heads=3 and kv_heads=2");
}

TEST_F(ValidateProblemTest, ZeroHeadsAreNamedAsHeadCountsNotGqa) {
  p_.k.shape[2] = 0;
  p_.v.shape[2] = 0;
  EXPECT_MESSAGE_HAS("head counts must be >= 1, got q_heads=4 and kv_heads=0");
  EXPECT_EQ(error().find("GQA"), std::string::npos) << error();
  p_.q.shape[2] = 0;
  p_.out.shape[2] = 0;
  EXPECT_MESSAGE_HAS("head counts must be >= 1, got q_heads=0 and kv_heads=0");
}

TEST_F(ValidateProblemTest, HeadSizeLimits) {
  p_.q = TensorView::Contiguous(q_.data(), DType::kFloat32, {1, 1, 1, 4});
  p_.k = TensorView::Contiguous(k_.data(), DType::kFloat32, {1, 1, 1, 4});
  p_.v = TensorView::Contiguous(v_.data(), DType::kFloat32, {1, 1, 1, 8});
  p_.out = TensorView::Contiguous(out_.data(), DType::kFloat32, {1, 1, 1, 8});
  EXPECT_MESSAGE_HAS("head size D of q and k 4 is outside 8..512");
}

TEST_F(ValidateProblemTest, DtypesAndDevices) {
  p_.k.dtype = DType::kFloat16;
  EXPECT_MESSAGE_HAS("k has dtype float16 but q has float32");
  p_.k.dtype = DType::kFloat32;
  p_.out.dtype = DType::kBFloat16;
  EXPECT_MESSAGE_HAS("out has dtype bfloat16");
  p_.out.dtype = DType::kFloat32;
  p_.v.device = {DeviceKind::kCuda, 0};
  EXPECT_MESSAGE_HAS("v lives on cuda:0 but q lives on cpu:0");
  p_.v.device = {};
  for (auto* t : {&p_.q, &p_.k, &p_.v, &p_.out}) t->dtype = DType::kInt8;
  EXPECT_MESSAGE_HAS("attention takes float32, float16 or bfloat16");
}

TEST_F(ValidateProblemTest, MasksKeyPaddingAndDenseBroadcast) {
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 7});
  EXPECT_TRUE(validate_problem(p_).ok());
  EXPECT_EQ(p_.mask_kind(), MaskKind::kKeyPadding);
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {1, 1, 5, 7});
  EXPECT_TRUE(validate_problem(p_).ok());
  EXPECT_EQ(p_.mask_kind(), MaskKind::kDense);
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 4, 5, 7});
  EXPECT_TRUE(validate_problem(p_).ok());
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 3, 5, 7});
  EXPECT_MESSAGE_HAS("[2|1, 4|1, 5, 7], got [2, 3, 5, 7]");
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 6});
  EXPECT_MESSAGE_HAS("key-padding mask must have shape [B, Skv] = [2, 7], got [2, 6]");
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kFloat32, {2, 7});
  EXPECT_MESSAGE_HAS("pass a bool keep-mask");
}

TEST_F(ValidateProblemTest, LseShapeAndDtype) {
  p_.lse = TensorView::Contiguous(lse_.data(), DType::kFloat32, {2, 4, 5});
  EXPECT_TRUE(validate_problem(p_).ok());
  p_.lse = TensorView::Contiguous(lse_.data(), DType::kFloat32, {2, 5, 4});
  EXPECT_MESSAGE_HAS("lse must have shape [B, Hq, Sq] = [2, 4, 5], got [2, 5, 4]");
  p_.lse = TensorView::Contiguous(lse_.data(), DType::kFloat16, {2, 4, 5});
  EXPECT_MESSAGE_HAS("pass a float32 lse buffer");
}

TEST_F(ValidateProblemTest, OutMustNotAliasInputsOrRepeatElements) {
  p_.out = TensorView::Contiguous(q_.data() + 8, DType::kFloat32, {2, 5, 4, 8});
  EXPECT_MESSAGE_HAS("out overlaps q in memory");
  p_.out = TensorView::Contiguous(out_.data(), DType::kFloat32, {2, 5, 4, 8});
  p_.out.strides[1] = 0;
  EXPECT_MESSAGE_HAS("out has stride 0 in dimension 1");
  p_.out.strides[1] = -32;
  EXPECT_MESSAGE_HAS("negative stride");
}

TEST_F(ValidateProblemTest, EmptyBatchAndEmptyKeysAreValid) {
  p_.q.shape[0] = p_.k.shape[0] = p_.v.shape[0] = p_.out.shape[0] = 0;
  EXPECT_TRUE(validate_problem(p_).ok());
  p_.q.shape[0] = p_.k.shape[0] = p_.v.shape[0] = p_.out.shape[0] = 2;
  p_.k.shape[1] = p_.v.shape[1] = 0;
  EXPECT_TRUE(validate_problem(p_).ok());
}

TEST_F(ValidateProblemTest, PackedBatches) {
  std::vector<std::int32_t> cu_q = {0, 3, 5}, cu_k = {0, 4, 7};
  p_.q = TensorView::Contiguous(q_.data(), DType::kFloat32, {1, 5, 4, 16});
  p_.k = TensorView::Contiguous(k_.data(), DType::kFloat32, {1, 7, 2, 16});
  p_.v = TensorView::Contiguous(v_.data(), DType::kFloat32, {1, 7, 2, 8});
  p_.out = TensorView::Contiguous(out_.data(), DType::kFloat32, {1, 5, 4, 8});
  p_.cu_seqlens_q = TensorView::Contiguous(cu_q.data(), DType::kInt32, {3});
  p_.cu_seqlens_k = TensorView::Contiguous(cu_k.data(), DType::kInt32, {3});
  ASSERT_TRUE(validate_problem(p_).ok()) << validate_problem(p_).message();
  EXPECT_EQ(p_.shape().batch, 2);
  EXPECT_TRUE(p_.shape().varlen);
  cu_k[1] = 8;
  EXPECT_MESSAGE_HAS("cu_seqlens_k[1] = 8 is invalid");
  cu_k[1] = 4;
  p_.cu_seqlens_k.reset();
  EXPECT_MESSAGE_HAS("cu_seqlens_k is missing");
  p_.cu_seqlens_k = TensorView::Contiguous(cu_k.data(), DType::kInt32, {3});
  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {1, 7});
  EXPECT_MESSAGE_HAS("mask cannot be combined with cu_seqlens");
}

// repeated_row_as_key_padding: a dense mask whose queries and heads all read one row of keys is
// the key-padding view [B, Skv] of that memory (batch stride kept); any other mask is not.
TEST_F(ValidateProblemTest, ADenseMaskThatRepeatsOneRowIsAKeyPaddingView) {
  TensorView m = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 4, 5, 7});
  m.strides = {7, 0, 0, 1};
  p_.mask = m;
  ASSERT_TRUE(validate_problem(p_).ok());
  std::optional<TensorView> keys = repeated_row_as_key_padding(p_);
  ASSERT_TRUE(keys.has_value());
  EXPECT_EQ(keys->shape_string(), "[2, 7]");
  EXPECT_EQ(keys->stride(0), 7);
  EXPECT_EQ(keys->stride(1), 1);
  EXPECT_EQ(keys->data, mask_.data());
  p_.mask = *keys;
  EXPECT_TRUE(validate_problem(p_).ok()) << "the view is a valid key-padding mask";

  m.shape[1] = 1;  // [B, 1, Sq, Skv] with stride 0 over the queries
  p_.mask = m;
  EXPECT_TRUE(repeated_row_as_key_padding(p_).has_value());

  TensorView rows_in_memory = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 1, 5, 7});
  p_.mask = rows_in_memory;
  EXPECT_FALSE(repeated_row_as_key_padding(p_).has_value()) << "rows held in memory may differ";

  TensorView per_head = m;
  per_head.shape[1] = 4;
  per_head.strides = {28, 7, 0, 1};
  p_.mask = per_head;
  EXPECT_FALSE(repeated_row_as_key_padding(p_).has_value()) << "each head has its own row";

  TensorView one_batch = m;
  one_batch.shape[0] = 1;
  p_.mask = one_batch;
  ASSERT_TRUE(validate_problem(p_).ok());
  EXPECT_FALSE(repeated_row_as_key_padding(p_).has_value()) << "a key-padding mask has a row per batch";

  p_.mask = TensorView::Contiguous(mask_.data(), DType::kBool, {2, 7});
  EXPECT_FALSE(repeated_row_as_key_padding(p_).has_value()) << "already key padding";
  p_.mask.reset();
  EXPECT_FALSE(repeated_row_as_key_padding(p_).has_value());
}

TEST(MaskKindName, NamesEveryKind) {
  EXPECT_EQ(mask_kind_name(MaskKind::kNone), "none");
  EXPECT_EQ(mask_kind_name(MaskKind::kKeyPadding), "key_padding");
  EXPECT_EQ(mask_kind_name(MaskKind::kDense), "dense");
}

}  // namespace
}  // namespace diffattn
