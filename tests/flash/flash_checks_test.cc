#include "kernels/cuda/flash/flash_checks.h"

#include <gtest/gtest.h>

namespace diffattn::flash {
namespace {

ProblemShape dit_shape() {
  ProblemShape s;
  s.dtype = DType::kBFloat16;
  s.device = DeviceKind::kCuda;
  s.batch = 1;
  s.seqlen_q = s.seqlen_kv = 4608;
  s.heads_q = s.heads_kv = 24;
  s.head_size = s.head_size_v = 128;
  return s;
}

TEST(FlashChecks, DitShapeHasNoReasons) { EXPECT_TRUE(flash_shape_reasons(dit_shape()).empty()); }

TEST(FlashChecks, OtherHeadSizesAreRejectedWithTheList) {
  ProblemShape s = dit_shape();
  s.head_size = s.head_size_v = 80;
  const auto reasons = flash_shape_reasons(s);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("head size 80"), std::string::npos);
  EXPECT_NE(reasons[0].find("64, 96, 128, 192, 256"), std::string::npos);
  EXPECT_NE(reasons[0].find("TORCH_SDPA"), std::string::npos);
}

TEST(FlashChecks, Float32AndDenseMasksAndMismatchedValueHeadsAreRejected) {
  ProblemShape s = dit_shape();
  s.dtype = DType::kFloat32;
  s.mask = MaskKind::kDense;
  s.head_size_v = 64;
  const auto reasons = flash_shape_reasons(s);
  EXPECT_EQ(reasons.size(), 3u);
  EXPECT_TRUE(check_half_precision(s).has_value());
  EXPECT_TRUE(check_no_dense_mask(s).has_value());
  EXPECT_TRUE(check_value_head_size_matches(s).has_value());
}

TEST(FlashChecks, KeyPaddingCausalGqaCrossAndLseAreAccepted) {
  ProblemShape s = dit_shape();
  s.mask = MaskKind::kKeyPadding;
  s.causal = true;
  s.heads_kv = 8;
  s.seqlen_kv = 512;
  s.wants_lse = true;
  s.dtype = DType::kFloat16;
  EXPECT_TRUE(flash_shape_reasons(s).empty());
}

TEST(FlashChecks, EmptyKeySetIsRejected) {
  ProblemShape s = dit_shape();
  s.seqlen_kv = 0;
  EXPECT_TRUE(check_has_keys(s).has_value());
}

TEST(FlashChecks, KernelPerArchitecture) {
  EXPECT_EQ(flash_kernel_for_capability(9, 0), FlashKernel::kHopper);
  EXPECT_EQ(flash_kernel_for_capability(8, 0), FlashKernel::kAmpere);
  EXPECT_EQ(flash_kernel_for_capability(8, 9), FlashKernel::kAmpere);
  EXPECT_FALSE(flash_kernel_for_capability(7, 5).has_value());
  EXPECT_FALSE(flash_kernel_for_capability(10, 0).has_value());
  EXPECT_FALSE(flash_kernel_for_capability(12, 0).has_value());
  EXPECT_EQ(kernel_name(FlashKernel::kHopper), "hopper");
  EXPECT_EQ(kernels_text(), "sm_80 mma.sync and sm_90a wgmma + TMA");
  EXPECT_EQ(architectures_text(), "sm_80..sm_89 and sm_90");
}

}  // namespace
}  // namespace diffattn::flash
