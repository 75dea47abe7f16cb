// AttentionSpec rules: spec forms, block ownership, typed values and backend_kwargs.

#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using nlohmann::json;
using testing_config::expect_config_error;

// Parsed against the built-in backends, whose descriptors own the typed blocks these tests name.
Result<std::optional<AttentionSpec>> spec_from_text(std::string_view text, std::string_view field = "default") {
  return spec_from_json(nlohmann::json::parse(text), field, global_registry());
}

// A spec that must parse and must not be "auto".
AttentionSpec valid_spec(std::string_view text) {
  auto spec = spec_from_text(text);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok() || !spec.value()) return AttentionSpec{};
  return *spec.value();
}

TEST(AttentionSpecTest, StringIsABackendNameWithCasePreserved) {
  const AttentionSpec spec = valid_spec(R"("flash_attn")");
  EXPECT_EQ(spec.backend, "flash_attn");
  EXPECT_FALSE(spec.skip_softmax);
  EXPECT_FALSE(spec.quant);
  EXPECT_FALSE(spec.block_sparse);
  EXPECT_TRUE(spec.extra.is_object());
  EXPECT_TRUE(spec.extra.empty());
}

TEST(AttentionSpecTest, AutoInAnyCaseMeansNoSpec) {
  for (const char* text : {R"("auto")", R"("AUTO")", R"("Auto")", R"({"backend": "aUtO"})"}) {
    auto spec = spec_from_text(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status().message();
    EXPECT_FALSE(spec.value().has_value()) << text;
  }
}

TEST(AttentionSpecTest, NonStringBackendNamesTheField) {
  expect_config_error(spec_from_text(R"({"backend": 3})", "per_role['cross']").status(),
                      {"per_role['cross']", "expected a string for backend", "number"});
  expect_config_error(spec_from_text(R"({"backend": null})").status(), {"default", "backend"});
}

TEST(AttentionSpecTest, MissingOrEmptyBackendIsAnError) {
  expect_config_error(spec_from_text(R"({"quant": {}})").status(), {"backend is required"});
  expect_config_error(spec_from_text(R"("")").status(), {"backend is empty"});
}

TEST(AttentionSpecTest, SpecMustBeAStringOrAnObject) {
  for (const char* text : {"3", "[\"FLASH_ATTN\"]", "true", "null"}) {
    expect_config_error(spec_from_text(text, "per_role['self']").status(),
                        {"per_role['self']", "expected a backend name (string) or a spec object"});
  }
}

TEST(AttentionSpecTest, UnknownSpecKeyListsTheValidKeys) {
  expect_config_error(spec_from_text(R"({"backend": "FLASH_ATTN", "bakend": "x"})").status(),
                      {"'bakend'", "backend, block_sparse, extra, fastvideo_vsa_topk, quant, skip_softmax"});
}

TEST(AttentionSpecTest, SubBlocksMustBeObjects) {
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": "int8"})").status(),
                      {"quant must be an object", "string"});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": 0.5})").status(),
                      {"skip_softmax must be an object"});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": [1]})").status(),
                      {"block_sparse must be an object"});
  expect_config_error(spec_from_text(R"({"backend": "X", "extra": [1, 2]})").status(),
                      {"extra must be an object"});
}

TEST(AttentionSpecTest, UnknownBlockKeysListTheValidKeys) {
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"dtype": "int8"}})").status(),
                      {"'dtype'", "in quant", "dtype_qk, dtype_vo, flashinfer_backend, k_block_size, q_block_size"});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"sparsity": 0.5}})").status(),
                      {"'sparsity'", "disabled_until_timestep, target_sparsity, threshold"});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"layers": "0"}})").status(),
                      {"'layers'", "end_step, precision, skip_layers, sparsity, start_step"});
}

TEST(AttentionSpecTest, SkipSoftmaxObjectIsCoercedToTheTypedBlock) {
  const AttentionSpec spec = valid_spec(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"target_sparsity": 0.5}})");
  ASSERT_TRUE(spec.skip_softmax);
  EXPECT_EQ(spec.skip_softmax->target_sparsity, 0.5);
  EXPECT_FALSE(spec.skip_softmax->threshold);
  EXPECT_EQ(spec.skip_softmax->disabled_until_timestep, 0.0);
  EXPECT_TRUE(spec.skip_softmax->enabled());
}

TEST(AttentionSpecTest, SkipSoftmaxOnlyOnTrtllm) {
  expect_config_error(
      spec_from_text(R"({"backend": "TORCH_SDPA", "skip_softmax": {"threshold": 1.0}})", "per_role['cross']").status(),
      {"per_role['cross']", "skip_softmax is only supported by the TRTLLM_ATTN backend", "backend='TORCH_SDPA'",
       "Remove skip_softmax or set backend to TRTLLM_ATTN."});
  // Ownership compares names case-insensitively, as the platform does.
  EXPECT_TRUE(spec_from_text(R"({"backend": "trtllm_attn", "skip_softmax": {"threshold": 1.0}})").ok());
}

TEST(AttentionSpecTest, SkipSoftmaxRangesAndExclusion) {
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"target_sparsity": 1.5}})").status(),
                      {"skip_softmax.target_sparsity must be finite and in [0, 1]; got 1.5."});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": -0.1}})").status(),
                      {"skip_softmax.threshold must be finite and >= 0; got -0.1."});
  expect_config_error(
      spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"disabled_until_timestep": 2}})").status(),
      {"skip_softmax.disabled_until_timestep must be finite and in [0, 1]; got 2."});
  expect_config_error(
      spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": 1, "target_sparsity": 0.5}})")
          .status(),
      {"set either target_sparsity or threshold, not both"});
  expect_config_error(
      spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": "1"}})").status(),
      {"skip_softmax.threshold must be a number; got string"});
  expect_config_error(
      spec_from_text(R"({"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": true}})").status(),
      {"skip_softmax.threshold must be a number; got boolean"});
}

TEST(AttentionSpecTest, NonFiniteValuesSetInCodeAreRejected) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    AttentionSpec spec;
    spec.backend = "TRTLLM_ATTN";
    spec.skip_softmax = SkipSoftmaxSpec{};
    spec.skip_softmax->threshold = bad;
    expect_config_error(validate_spec(spec, "default", global_registry()), {"skip_softmax.threshold must be finite"});

    AttentionSpec sparse;
    sparse.backend = "RAINFUSION_ATTN";
    sparse.block_sparse = BlockSparseSpec{};
    sparse.block_sparse->sparsity = bad;
    expect_config_error(validate_spec(sparse, "default", global_registry()),
                        {"block_sparse.sparsity must be finite and in [0, 1]"});

    AttentionSpec with_extra;
    with_extra.backend = "X";
    with_extra.extra = json::object({{"scale", bad}});
    expect_config_error(validate_spec(with_extra, "default", global_registry()), {"extra holds a non-finite number"});
  }
}

TEST(AttentionSpecTest, TextThatIsNotUtf8IsRejectedWithAPrintableMessage) {
  const std::string bad = "FLASH\xff_ATTN";
  AttentionSpec spec;
  spec.backend = bad;
  Status status = validate_spec(spec, "per_role[" + bad + "]", global_registry());
  expect_config_error(status, {"backend holds text that is not valid UTF-8"});

  AttentionSpec with_extra;
  with_extra.backend = "X";
  with_extra.extra = json::object({{"k", json::array({bad})}});
  expect_config_error(validate_spec(with_extra, "default", global_registry()),
                      {"extra holds text that is not valid UTF-8"});
  with_extra.extra = json::object({{bad, 1}});
  expect_config_error(validate_spec(with_extra, "default", global_registry()),
                      {"extra holds text that is not valid UTF-8"});

  json roles = json::object();
  roles[bad] = "FLASH_ATTN";
  expect_config_error(config_from_json(json::object({{"per_role", roles}}), global_registry()).status(),
                      {"a role name holds text"});
  // An unknown key that is not UTF-8 is quoted with escapes, so the message itself stays printable.
  json unknown = json::object();
  unknown[bad] = 1;
  auto result = config_from_json(unknown, global_registry());
  expect_config_error(result.status(), {"unknown key 'FLASH\\xff_ATTN'"});
  EXPECT_NO_THROW((void)json(result.status().message()).dump());
}

TEST(AttentionSpecTest, QuantDefaultsAndSerialisation) {
  const AttentionSpec spec = valid_spec(R"({"backend": "TRTLLM_ATTN", "quant": {"dtype_qk": "int8"}})");
  ASSERT_TRUE(spec.quant);
  EXPECT_EQ(spec.quant->q_block_size, 1);
  EXPECT_EQ(spec.quant->k_block_size, 16);
  EXPECT_TRUE(spec.quant->enabled());
  EXPECT_EQ(backend_kwargs(spec),
            json::parse(R"({"quant": {"dtype_qk": "int8", "q_block_size": 1, "k_block_size": 16}})"));
}

TEST(AttentionSpecTest, FlashInferQuantSupersetRoundTrips) {
  const AttentionSpec spec = valid_spec(
      R"({"backend": "FLASHINFER_ATTN", "quant": {"dtype_qk": "bfloat16", "dtype_vo": "fp8_e4m3",
          "q_block_size": 4, "k_block_size": 1, "flashinfer_backend": "fa3"}})");
  EXPECT_EQ(backend_kwargs(spec), json::parse(R"({"quant": {"dtype_qk": "bfloat16", "dtype_vo": "fp8_e4m3",
      "q_block_size": 4, "k_block_size": 1, "flashinfer_backend": "fa3"}})"));
  auto again = spec_from_json(spec_to_json(spec), "default", global_registry());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again.value(), spec);
}

TEST(AttentionSpecTest, FlashinferBackendAloneIsSerialisedAndEnabled) {
  const AttentionSpec spec = valid_spec(R"({"backend": "FLASHINFER_ATTN", "quant": {"flashinfer_backend": "fa2"}})");
  ASSERT_TRUE(spec.quant);
  EXPECT_TRUE(spec.quant->enabled());
  EXPECT_EQ(backend_kwargs(spec), json::parse(R"({"quant": {"flashinfer_backend": "fa2"}})"));
}

TEST(AttentionSpecTest, EmptyQuantBlockGivesNoKwargs) {
  const AttentionSpec spec = valid_spec(R"({"backend": "TRTLLM_ATTN", "quant": {}})");
  ASSERT_TRUE(spec.quant);
  EXPECT_FALSE(spec.quant->enabled());
  EXPECT_TRUE(backend_kwargs(spec).empty());
}

TEST(AttentionSpecTest, QuantAndSkipSoftmaxCoexistOnTrtllm) {
  const AttentionSpec spec = valid_spec(
      R"({"backend": "TRTLLM_ATTN", "quant": {"dtype_qk": "fp8_e4m3", "dtype_vo": "fp8_e4m3"},
          "skip_softmax": {"threshold": 2.5, "disabled_until_timestep": 0.25}})");
  EXPECT_EQ(backend_kwargs(spec), json::parse(R"({"skip_softmax_threshold": 2.5, "disabled_until_timestep": 0.25,
      "quant": {"dtype_qk": "fp8_e4m3", "dtype_vo": "fp8_e4m3", "q_block_size": 1, "k_block_size": 16}})"));
}

TEST(AttentionSpecTest, QuantRejections) {
  expect_config_error(spec_from_text(R"({"backend": "TORCH_SDPA", "quant": {"dtype_qk": "int8"}})").status(),
                      {"quant is only supported by the FLASHINFER_ATTN and TRTLLM_ATTN backends",
                       "backend='TORCH_SDPA'", "Remove quant or set backend to FLASHINFER_ATTN or TRTLLM_ATTN."});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"dtype_qk": "int4"}})").status(),
                      {"quant.dtype_qk='int4' unsupported; use one of ['bfloat16', 'float16', 'fp8_e4m3', 'int8']."});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"dtype_vo": "fp4"}})").status(),
                      {"quant.dtype_vo='fp4' unsupported"});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"k_block_size": 8}})").status(),
                      {"quant.k_block_size=8 unsupported; kernels exist only for [1, 4, 16]."});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"q_block_size": 1.5}})").status(),
                      {"quant.q_block_size must be an integer; got 1.5."});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"q_block_size": "4"}})").status(),
                      {"quant.q_block_size must be an integer; got string"});
  expect_config_error(spec_from_text(R"({"backend": "TRTLLM_ATTN", "quant": {"dtype_qk": 8}})").status(),
                      {"quant.dtype_qk must be a string"});
}

TEST(AttentionSpecTest, IntegralNumbersAreIntegers) {
  const AttentionSpec spec = valid_spec(R"({"backend": "TRTLLM_ATTN", "quant": {"q_block_size": 4.0}})");
  ASSERT_TRUE(spec.quant);
  EXPECT_EQ(spec.quant->q_block_size, 4);
}

TEST(AttentionSpecTest, FastVideoTopk) {
  const AttentionSpec spec = valid_spec(R"({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 96})");
  EXPECT_EQ(backend_kwargs(spec), json::parse(R"({"topk": 96})"));
  expect_config_error(spec_from_text(R"({"backend": "FLASH_ATTN", "fastvideo_vsa_topk": 96})").status(),
                      {"fastvideo_vsa_topk is only supported by the FASTVIDEO_VSA backend", "backend='FLASH_ATTN'",
                       "set backend to FASTVIDEO_VSA"});
  expect_config_error(spec_from_text(R"({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 0})").status(),
                      {"fastvideo_vsa_topk must be positive; got 0."});
  expect_config_error(spec_from_text(R"({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": -3})").status(),
                      {"fastvideo_vsa_topk must be positive"});
  expect_config_error(spec_from_text(R"({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 2.5})").status(),
                      {"fastvideo_vsa_topk must be an integer; got 2.5."});
}

TEST(AttentionSpecTest, RainFusionDefaultsAreFilledIn) {
  const AttentionSpec spec = valid_spec(R"("RAINFUSION_ATTN")");
  ASSERT_TRUE(spec.block_sparse);
  EXPECT_EQ(*spec.block_sparse, BlockSparseSpec{});
  EXPECT_EQ(backend_kwargs(spec),
            json::parse(R"({"sparsity": 0.8, "start_step": 0, "end_step": 0, "precision": "bf16"})"));
}

TEST(AttentionSpecTest, SkipLayersSelectorAndList) {
  const AttentionSpec from_text = valid_spec(
      R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": "0-2,38"}})");
  ASSERT_TRUE(from_text.block_sparse);
  EXPECT_EQ(from_text.block_sparse->skip_layer_indices, (std::set<std::int64_t>{0, 1, 2, 38}));
  EXPECT_EQ(from_text.block_sparse->skip_layers, "0-2,38");
  EXPECT_EQ(backend_kwargs(from_text)["skip_layers"], json::parse("[0, 1, 2, 38]"));

  const AttentionSpec from_list = valid_spec(
      R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": [38, 2, 0, 1, 2]}})");
  EXPECT_EQ(from_list.block_sparse->skip_layer_indices, (std::set<std::int64_t>{0, 1, 2, 38}));
  EXPECT_EQ(backend_kwargs(from_list)["skip_layers"], json::parse("[0, 1, 2, 38]"));

  expect_config_error(
      spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": [1, -2]}})").status(),
      {"block_sparse.skip_layers holds -2"});
  expect_config_error(
      spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": [1.5]}})").status(),
      {"must be an integer"});
  expect_config_error(
      spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": "3-1"}})").status(),
      {"block_sparse.skip_layers is not a valid index selector", "runs backwards"});
  expect_config_error(
      spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"skip_layers": {"a": 1}}})").status(),
      {"block_sparse.skip_layers must be an index selector"});
}

TEST(AttentionSpecTest, BlockSparseOnlyOnRainFusion) {
  expect_config_error(spec_from_text(R"({"backend": "FLASH_ATTN", "block_sparse": {"sparsity": 0.5}})").status(),
                      {"block_sparse is only supported by the RAINFUSION_ATTN backend", "backend='FLASH_ATTN'",
                       "Remove block_sparse or set backend to RAINFUSION_ATTN."});
}

TEST(AttentionSpecTest, BlockSparseValueRules) {
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 1.5}})").status(),
                      {"block_sparse.sparsity must be finite and in [0, 1]; got 1.5."});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"start_step": -1}})").status(),
                      {"block_sparse.start_step must be >= 0; got -1."});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"end_step": -1}})").status(),
                      {"block_sparse.end_step must be >= 0; got -1"});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"precision": "bogus"}})").status(),
                      {"block_sparse.precision must be one of ['bf16', 'fp8', 'mix']; got 'bogus'."});
  expect_config_error(spec_from_text(R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"start_step": 0.5}})").status(),
                      {"block_sparse.start_step must be an integer"});
}

TEST(AttentionSpecTest, EndStepAndPrecisionAreForwarded) {
  const AttentionSpec spec = valid_spec(
      R"({"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.6, "start_step": 3, "end_step": 5,
          "precision": "mix"}})");
  EXPECT_EQ(backend_kwargs(spec),
            json::parse(R"({"sparsity": 0.6, "start_step": 3, "end_step": 5, "precision": "mix"})"));
}

TEST(AttentionSpecTest, ExtraIsPassedThrough) {
  const AttentionSpec spec =
      valid_spec(R"({"backend": "SPARSE_BLOCK", "extra": {"block_size": 128, "params": {"k": [1, 2]}}})");
  EXPECT_EQ(spec.extra, json::parse(R"({"block_size": 128, "params": {"k": [1, 2]}})"));
  EXPECT_TRUE(backend_kwargs(spec).empty());
}

TEST(AttentionSpecTest, ValidateSpecDerivesIndicesAndSelectorsInCode) {
  AttentionSpec spec;
  spec.backend = "RAINFUSION_ATTN";
  spec.block_sparse = BlockSparseSpec{};
  spec.block_sparse->skip_layer_indices = {4, 7};
  ASSERT_TRUE(validate_spec(spec, "default", global_registry()).ok());
  EXPECT_EQ(spec.block_sparse->skip_layers, "4,7");

  AttentionSpec text_spec;
  text_spec.backend = "RAINFUSION_ATTN";
  text_spec.block_sparse = BlockSparseSpec{};
  text_spec.block_sparse->skip_layers = "1-3";
  ASSERT_TRUE(validate_spec(text_spec, "default", global_registry()).ok());
  EXPECT_EQ(text_spec.block_sparse->skip_layer_indices, (std::set<std::int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace diffattn
