#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "registry/option_checks.h"

namespace diffattn {
namespace {

using ::testing::HasSubstr;

class OptionValidationTest : public ::testing::Test {
 protected:
  void SetUp() override { register_builtin_backends(registry_); }
  Status validate(const char* backend, const AttentionSpec& spec) {
    return (*registry_.find(backend))->validate_options(spec);
  }
  Registry registry_;
};

AttentionSpec with_quant(const char* backend, std::optional<std::string> qk, std::optional<std::string> vo) {
  AttentionSpec spec;
  spec.backend = backend;
  spec.quant = AttnQuantSpec{};
  spec.quant->dtype_qk = std::move(qk);
  spec.quant->dtype_vo = std::move(vo);
  return spec;
}

TEST_F(OptionValidationTest, TrtllmQuantAcceptsOnlySageDtypes) {
  EXPECT_TRUE(validate("TRTLLM_ATTN", with_quant("TRTLLM_ATTN", "int8", std::nullopt)).ok());
  EXPECT_TRUE(validate("TRTLLM_ATTN", with_quant("TRTLLM_ATTN", "fp8_e4m3", std::nullopt)).ok());
  Status bf16 = validate("TRTLLM_ATTN", with_quant("TRTLLM_ATTN", "bfloat16", std::nullopt));
  EXPECT_EQ(bf16.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(bf16.message(), HasSubstr("quant.dtype_qk in [int8, fp8_e4m3], got 'bfloat16'"));
  EXPECT_THAT(validate("TRTLLM_ATTN", with_quant("TRTLLM_ATTN", std::nullopt, "fp8_e4m3")).message(),
              HasSubstr("needs quant.dtype_qk"));
  AttentionSpec fi_backend = with_quant("TRTLLM_ATTN", "int8", std::nullopt);
  fi_backend.quant->flashinfer_backend = "fa3";
  EXPECT_THAT(validate("TRTLLM_ATTN", fi_backend).message(), HasSubstr("FLASHINFER_ATTN only"));
}

TEST_F(OptionValidationTest, FlashinferQuantValueSets) {
  EXPECT_TRUE(validate("FLASHINFER_ATTN", with_quant("FLASHINFER_ATTN", "bfloat16", "fp8_e4m3")).ok());
  EXPECT_TRUE(validate("FLASHINFER_ATTN", with_quant("FLASHINFER_ATTN", "float16", "float16")).ok());
  EXPECT_THAT(validate("FLASHINFER_ATTN", with_quant("FLASHINFER_ATTN", "int8", std::nullopt)).message(),
              HasSubstr("quant.dtype_qk in [float16, bfloat16], got 'int8'"));
  EXPECT_THAT(validate("FLASHINFER_ATTN", with_quant("FLASHINFER_ATTN", "bfloat16", "int8")).message(),
              HasSubstr("quant.dtype_vo in [float16, bfloat16, fp8_e4m3], got 'int8'"));
}

TEST_F(OptionValidationTest, ExtraKeysAreRejectedWithTheAcceptedList) {
  for (const std::string& name : registry_.names()) {
    SCOPED_TRACE(name);
    AttentionSpec spec;
    spec.backend = name;
    EXPECT_TRUE(validate(name.c_str(), spec).ok());
    spec.extra = {{"block_size", 128}};
    Status status = validate(name.c_str(), spec);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig);
    EXPECT_THAT(status.message(), HasSubstr(name + " does not read extra.block_size"));
    // SAGE_ATTN reads one extra key (its P*V mode); every other built-in reads none.
    EXPECT_THAT(status.message(), HasSubstr(name == "SAGE_ATTN" ? "extra keys it reads: pv" : "(none)"));
  }
}

TEST_F(OptionValidationTest, DeclaredExtraKeysAreAccepted) {
  AttentionSpec spec;
  spec.backend = "MY_SPARSE";
  spec.extra = {{"block_size", 64}, {"topk", 3}};
  EXPECT_TRUE(check_extra_keys(spec, "MY_SPARSE", {"block_size", "topk"}).ok());
  spec.extra["window"] = 5;
  EXPECT_THAT(check_extra_keys(spec, "MY_SPARSE", {"block_size", "topk"}).message(),
              HasSubstr("extra keys it reads: block_size, topk"));
}

TEST_F(OptionValidationTest, BlocksMustBeOwnedByTheBackend) {
  AttentionSpec spec = with_quant("TORCH_SDPA", "int8", std::nullopt);
  Status status = check_option_blocks(**registry_.find("TORCH_SDPA"), spec);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(status.message(), HasSubstr("'quant' block is not read by TORCH_SDPA"));
  EXPECT_TRUE(check_option_blocks(**registry_.find("TRTLLM_ATTN"), spec).ok());
  AttentionSpec topk;
  topk.fastvideo_vsa_topk = 96;
  EXPECT_TRUE(check_option_blocks(**registry_.find("FASTVIDEO_VSA"), topk).ok());
  EXPECT_FALSE(check_option_blocks(**registry_.find("FLASH_ATTN"), topk).ok());
}

}  // namespace
}  // namespace diffattn
