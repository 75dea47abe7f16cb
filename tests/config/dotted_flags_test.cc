// --diffusion-attention-config.<path> VALUE flags build the same configuration as one JSON object.

#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "config/dotted_flags.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using nlohmann::json;
using testing_config::dotted;
using testing_config::expect_config_error;

AttentionConfig from_json_text(std::string_view text) {
  auto config = parse_attention_config_json(text, global_registry());
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? config.value() : AttentionConfig{};
}

AttentionConfig from_flags(std::vector<std::pair<std::string, std::string>> flags) {
  auto config = parse_attention_config(dotted(std::move(flags)), global_registry());
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? config.value() : AttentionConfig{};
}

TEST(DottedFlagsTest, DefaultAndPerRoleMatchTheJsonForm) {
  EXPECT_EQ(from_flags({{"default.backend", "FLASH_ATTN"}, {"per_role.cross.backend", "TORCH_SDPA"}}),
            from_json_text(R"({"default":{"backend":"FLASH_ATTN"},"per_role":{"cross":{"backend":"TORCH_SDPA"}}})"));
}

TEST(DottedFlagsTest, TypedBlocksMatchTheJsonForm) {
  const AttentionConfig flags = from_flags({{"default.backend", "RAINFUSION_ATTN"},
                                            {"default.block_sparse.sparsity", "0.7"},
                                            {"default.block_sparse.skip_layers", "[0,1,2]"},
                                            {"default.block_sparse.end_step", "4"},
                                            {"default.block_sparse.precision", "fp8"},
                                            {"per_role.cross.backend", "TRTLLM_ATTN"},
                                            {"per_role.cross.skip_softmax.target_sparsity", "0.5"},
                                            {"per_role.cross.quant.dtype_qk", "int8"},
                                            {"per_role.cross.quant.k_block_size", "4"},
                                            {"per_role.self.backend", "SPARSE_BLOCK"},
                                            {"per_role.self.extra.block_size", "128"},
                                            {"per_role.self.extra.causal", "true"},
                                            {"per_role.self.extra.name", "blocky"}});
  const AttentionConfig json_form = from_json_text(R"({
      "default": {"backend": "RAINFUSION_ATTN",
                  "block_sparse": {"sparsity": 0.7, "skip_layers": [0, 1, 2], "end_step": 4, "precision": "fp8"}},
      "per_role": {
        "cross": {"backend": "TRTLLM_ATTN", "skip_softmax": {"target_sparsity": 0.5},
                  "quant": {"dtype_qk": "int8", "k_block_size": 4}},
        "self": {"backend": "SPARSE_BLOCK", "extra": {"block_size": 128, "causal": true, "name": "blocky"}}}})");
  EXPECT_EQ(flags, json_form);
  ASSERT_TRUE(flags.default_spec && flags.default_spec->block_sparse);
  EXPECT_DOUBLE_EQ(flags.default_spec->block_sparse->sparsity, 0.7);
  EXPECT_EQ(flags.default_spec->block_sparse->skip_layer_indices, (std::set<std::int64_t>{0, 1, 2}));
  EXPECT_TRUE(flags.per_role.at("self").extra.at("block_size").is_number_integer());
  EXPECT_TRUE(flags.per_role.at("self").extra.at("causal").is_boolean());
  EXPECT_TRUE(flags.per_role.at("self").extra.at("name").is_string());
}

TEST(DottedFlagsTest, DottedRolesFlattenLikeNestedJson) {
  const AttentionConfig config = from_flags({{"per_role.ltx2.audio_to_video.backend", "TORCH_SDPA"},
                                             {"per_role.ltx2.audio_self", "FLASH_ATTN"}});
  ASSERT_EQ(config.per_role.size(), 2u);
  EXPECT_EQ(config.per_role.at("ltx2.audio_to_video").backend, "TORCH_SDPA");
  EXPECT_EQ(config.per_role.at("ltx2.audio_self").backend, "FLASH_ATTN");
}

TEST(DottedFlagsTest, FlagsMergeOnTopOfTheJsonObject) {
  ConfigSources sources = dotted({{"per_role.cross.backend", "TORCH_SDPA"}, {"default.backend", "CUDNN_ATTN"}});
  sources.config_json = R"({"default": {"backend": "FLASH_ATTN"}, "per_role": {"self": "SAGE_ATTN"}})";
  auto config = parse_attention_config(sources, global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->backend, "CUDNN_ATTN");
  EXPECT_EQ(config->per_role.at("self").backend, "SAGE_ATTN");
  EXPECT_EQ(config->per_role.at("cross").backend, "TORCH_SDPA");
}

TEST(DottedFlagsTest, ObjectValuesMergeKeyByKey) {
  ConfigSources sources = dotted({{"default.quant", R"({"dtype_vo": "fp8_e4m3"})"}});
  sources.config_json = R"({"default": {"backend": "TRTLLM_ATTN", "quant": {"dtype_qk": "int8"}}})";
  auto config = parse_attention_config(sources, global_registry());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->default_spec->quant->dtype_qk, "int8");
  EXPECT_EQ(config->default_spec->quant->dtype_vo, "fp8_e4m3");
}

TEST(DottedFlagsTest, LaterFlagForTheSamePathWins) {
  EXPECT_EQ(from_flags({{"default.backend", "FLASH_ATTN"}, {"default.backend", "TORCH_SDPA"}}).default_spec->backend,
            "TORCH_SDPA");
}

TEST(DottedFlagsTest, ValuesAreTyped) {
  using config_detail::typed_flag_value;
  EXPECT_EQ(typed_flag_value("0.7", "f").value(), json(0.7));
  EXPECT_TRUE(typed_flag_value("4", "f").value().is_number_integer());
  EXPECT_EQ(typed_flag_value("true", "f").value(), json(true));
  EXPECT_TRUE(typed_flag_value("null", "f").value().is_null());
  EXPECT_EQ(typed_flag_value("[0, 1]", "f").value(), json::parse("[0, 1]"));
  EXPECT_EQ(typed_flag_value(R"({"a": 1})", "f").value(), json::parse(R"({"a": 1})"));
  EXPECT_EQ(typed_flag_value(R"("123")", "f").value(), json("123"));
  EXPECT_EQ(typed_flag_value("FLASH_ATTN", "f").value(), json("FLASH_ATTN"));
  EXPECT_EQ(typed_flag_value("0-3,38", "f").value(), json("0-3,38"));
  EXPECT_EQ(typed_flag_value("", "f").value(), json(""));
  EXPECT_EQ(typed_flag_value("1e400", "f").value(), json("1e400"));
  expect_config_error(typed_flag_value("\xc3\x28", "f").status(), {"not valid UTF-8"});
  expect_config_error(typed_flag_value(std::string(40, '['), "f").status(), {"nested deeper than 16"});
}

TEST(DottedFlagsTest, SelectorStringForSkipLayers) {
  const AttentionConfig config =
      from_flags({{"default.backend", "RAINFUSION_ATTN"}, {"default.block_sparse.skip_layers", "0-3,38"}});
  EXPECT_EQ(config.default_spec->block_sparse->skip_layer_indices, (std::set<std::int64_t>{0, 1, 2, 3, 38}));
  const AttentionConfig single =
      from_flags({{"default.backend", "RAINFUSION_ATTN"}, {"default.block_sparse.skip_layers", "38"}});
  EXPECT_EQ(single.default_spec->block_sparse->skip_layer_indices, (std::set<std::int64_t>{38}));
}

TEST(DottedFlagsTest, LeafThenChildIsAConflict) {
  expect_config_error(
      parse_attention_config(dotted({{"default.backend", "FLASH_ATTN"}, {"default.backend.name", "X"}}),
                             global_registry())
          .status(),
      {"--diffusion-attention-config.default.backend.name", "default.backend is already \"FLASH_ATTN\"", "not both"});
  expect_config_error(
      parse_attention_config(dotted({{"per_role.cross", "TORCH_SDPA"}, {"per_role.cross.backend", "FLASH_ATTN"}}),
                             global_registry())
          .status(),
      {"per_role.cross is already \"TORCH_SDPA\""});
}

TEST(DottedFlagsTest, ChildThenLeafIsAConflict) {
  expect_config_error(
      parse_attention_config(dotted({{"default.quant.dtype_qk", "int8"}, {"default.quant", "7"}}), global_registry())
          .status(),
      {"--diffusion-attention-config.default.quant sets default.quant to 7", "is already {\"dtype_qk\":\"int8\"}"});
}

TEST(DottedFlagsTest, JsonLeafThenFlagChildIsAConflict) {
  ConfigSources sources = dotted({{"default.backend", "TORCH_SDPA"}});
  sources.config_json = R"({"default": "FLASH_ATTN"})";
  expect_config_error(parse_attention_config(sources, global_registry()).status(),
                      {"default is already \"FLASH_ATTN\""});
}

TEST(DottedFlagsTest, MalformedPathsAreErrors) {
  for (const char* path : {"", ".", "default.", ".default", "per_role..backend"}) {
    expect_config_error(parse_attention_config(dotted({{path, "X"}}), global_registry()).status(),
                        {"empty path segment"});
  }
  std::string deep = "per_role";
  for (int i = 0; i < 20; ++i) deep += ".r";
  expect_config_error(parse_attention_config(dotted({{deep, "X"}}), global_registry()).status(),
                      {"nests deeper than 16"});
  expect_config_error(parse_attention_config(dotted({{"defaults.backend", "X"}}), global_registry()).status(),
                      {"unknown key 'defaults'", "default, per_role"});
  expect_config_error(parse_attention_config(dotted({{"default.bakend", "X"}}), global_registry()).status(),
                      {"unknown key 'bakend'"});
  expect_config_error(parse_attention_config(dotted({{"default.\xff", "X"}}), global_registry()).status(),
                      {"not valid UTF-8"});
}

TEST(DottedFlagsTest, TypedValueErrorsNameTheField) {
  expect_config_error(parse_attention_config(
                          dotted({{"default.backend", "RAINFUSION_ATTN"}, {"default.block_sparse.sparsity", "high"}}),
                          global_registry())
                          .status(),
                      {"default: block_sparse.sparsity must be a number; got string \"high\""});
  expect_config_error(
      parse_attention_config(dotted({{"default.backend", "TRTLLM_ATTN"}, {"default.quant.q_block_size", "1.5"}}),
                             global_registry())
          .status(),
      {"quant.q_block_size must be an integer; got 1.5."});
}

}  // namespace
}  // namespace diffattn
