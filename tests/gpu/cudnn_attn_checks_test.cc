// CUDNN_ATTN's named checks, on the CPU: each rule fails with its reason and only then.
#include <gtest/gtest.h>

#include "backends/cudnn_attn/cudnn_attn_checks.h"

namespace diffattn::cudnn_attn {
namespace {

ProblemShape dit_shape() {
  ProblemShape s;
  s.dtype = DType::kBFloat16;
  s.device = DeviceKind::kCuda;
  s.seqlen_q = s.seqlen_kv = 4096;
  s.heads_q = s.heads_kv = 24;
  s.head_size = s.head_size_v = 128;
  return s;
}

TEST(CudnnAttnChecks, DiTShapesPass) { EXPECT_TRUE(problem_reasons(dit_shape()).empty()); }

TEST(CudnnAttnChecks, HeadSizesMustBeMultiplesOf8UpTo256) {
  for (int ok : {8, 64, 72, 128, 256}) EXPECT_FALSE(check_head_size_multiple_of_8(ok)) << ok;
  for (int bad : {12, 260, 512, 0}) {
    auto reason = check_head_size_multiple_of_8(bad);
    ASSERT_TRUE(reason) << bad;
    EXPECT_NE(reason->find("head_size=" + std::to_string(bad) + " is unsupported"), std::string::npos) << *reason;
    EXPECT_NE(reason->find("TORCH_SDPA"), std::string::npos);
  }
}

TEST(CudnnAttnChecks, KvLengthOfOneOrLessUsesTheInventoryMessage) {
  EXPECT_FALSE(check_kv_length_above_one(2));
  auto reason = check_kv_length_above_one(1);
  ASSERT_TRUE(reason);
  EXPECT_EQ(*reason,
            "CUDNN_ATTN was explicitly selected but cuDNN FMHA does not support key/value sequence length 1. "
            "Select TORCH_SDPA or another backend for this shape.");
}

TEST(CudnnAttnChecks, EachRuleIsReportedOnItsOwn) {
  struct Case {
    const char* expect;
    void (*edit)(ProblemShape&);
  };
  const Case cases[] = {
      {"float32", [](ProblemShape& s) { s.dtype = DType::kFloat32; }},
      {"CPU tensors", [](ProblemShape& s) { s.device = DeviceKind::kCpu; }},
      {"head_size=100", [](ProblemShape& s) { s.head_size_v = 100; }},
      {"sequence length 0", [](ProblemShape& s) { s.seqlen_kv = 0; }},
  };
  for (const Case& c : cases) {
    ProblemShape s = dit_shape();
    c.edit(s);
    const auto reasons = problem_reasons(s);
    ASSERT_EQ(reasons.size(), 1u) << c.expect;
    EXPECT_NE(reasons[0].find(c.expect), std::string::npos) << reasons[0];
  }
}

TEST(CudnnAttnChecks, PackedBatchesAndEveryMaskShapeAreInside) {
  ProblemShape s = dit_shape();
  s.varlen = true;
  EXPECT_TRUE(problem_reasons(s).empty());
  s.varlen = false;
  for (MaskKind kind : {MaskKind::kKeyPadding, MaskKind::kDense}) {
    s.mask = kind;
    EXPECT_TRUE(problem_reasons(s).empty()) << mask_kind_name(kind);
  }
}

TEST(CudnnAttnChecks, OnlyMasksThatBroadcastOverQueriesAndHeadsAreKeyPadding) {
  static std::uint8_t storage[8];
  AttentionProblem p;
  EXPECT_FALSE(mask_is_key_padding(p));
  p.mask = TensorView::Contiguous(storage, DType::kBool, {2, 16});
  EXPECT_TRUE(mask_is_key_padding(p));
  p.mask = TensorView::Contiguous(storage, DType::kBool, {2, 1, 1, 16});
  EXPECT_TRUE(mask_is_key_padding(p));
  p.mask = TensorView::Contiguous(storage, DType::kBool, {2, 1, 8, 16});
  EXPECT_FALSE(mask_is_key_padding(p));
  p.mask = TensorView::Contiguous(storage, DType::kBool, {2, 4, 1, 16});
  EXPECT_FALSE(mask_is_key_padding(p));
}

TEST(CudnnAttnChecks, PackedBatchesBeyond32BitOffsetsAreRefusedNamingFlashAttn) {
  static std::uint16_t storage[8];
  AttentionProblem p;
  p.q = TensorView::Contiguous(storage, DType::kBFloat16, {1, 1 << 20, 16, 128});
  p.k = p.v = p.out = p.q;
  EXPECT_FALSE(check_packed_offsets_fit_int32(p));  // not packed
  p.cu_seqlens_q = p.cu_seqlens_k = TensorView::Contiguous(storage, DType::kInt32, {3});
  auto reason = check_packed_offsets_fit_int32(p);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("q [1, 1048576, 16, 128] spans 2147483648 elements"), std::string::npos) << *reason;
  EXPECT_NE(reason->find("FLASH_ATTN"), std::string::npos);
  p.q = p.k = p.v = p.out = TensorView::Contiguous(storage, DType::kBFloat16, {1, (1 << 20) - 1, 16, 128});
  EXPECT_FALSE(check_packed_offsets_fit_int32(p));
}

}  // namespace
}  // namespace diffattn::cudnn_attn
