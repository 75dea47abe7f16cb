#include <algorithm>
#include <array>
#include <string>

#include "config/index_selector.h"
#include "config/json_values.h"
#include "config/typed_blocks.h"

namespace diffattn::config_detail {
namespace {

constexpr std::array<std::string_view, 5> kBlockSparseKeys = {"end_step", "precision", "skip_layers", "sparsity",
                                                              "start_step"};
constexpr std::array<std::string_view, 3> kPrecisions = {"bf16", "fp8", "mix"};

Result<std::int64_t> read_layer_index(const nlohmann::json& value, std::string_view field) {
  DIFFATTN_ASSIGN_OR_RETURN(std::int64_t index, read_integer(value, field, "block_sparse.skip_layers[]"));
  if (index < 0 || index > kMaxLayerIndex) {
    return field_error(field, "block_sparse.skip_layers holds " + std::to_string(index) +
                                  "; layer indices must be in [0, " + std::to_string(kMaxLayerIndex) + "].");
  }
  return index;
}

// A selector string is kept as written; a list (or a single index) is kept in canonical form.
Result<std::optional<std::string>> read_skip_layers(const nlohmann::json& value, std::string_view field) {
  if (value.is_null()) return std::optional<std::string>();
  if (value.is_string()) return std::optional<std::string>(value.get<std::string>());
  if (value.is_number()) {
    DIFFATTN_ASSIGN_OR_RETURN(std::int64_t index, read_layer_index(value, field));
    return std::optional<std::string>(std::to_string(index));
  }
  if (value.is_array()) {
    std::set<std::int64_t> indices;
    for (const auto& element : value) {
      DIFFATTN_ASSIGN_OR_RETURN(std::int64_t index, read_layer_index(element, field));
      indices.insert(index);
    }
    if (indices.empty()) return std::optional<std::string>();
    return std::optional<std::string>(format_index_selector(indices));
  }
  return field_error(field, "block_sparse.skip_layers must be an index selector such as '0-3,38' or a list of "
                            "integers; got " + std::string(json_type_name(value)) + " " + brief_json(value) + ".");
}

}  // namespace

Result<BlockSparseSpec> block_sparse_from_json(const nlohmann::json& value, std::string_view field) {
  DIFFATTN_RETURN_IF_ERROR(check_block_is_object(value, field, "block_sparse"));
  DIFFATTN_RETURN_IF_ERROR(check_known_keys(value, kBlockSparseKeys, field, "block_sparse"));
  BlockSparseSpec block;
  if (value.contains("sparsity")) {
    DIFFATTN_ASSIGN_OR_RETURN(block.sparsity, read_number(value.at("sparsity"), field, "block_sparse.sparsity"));
  }
  if (value.contains("start_step")) {
    DIFFATTN_ASSIGN_OR_RETURN(block.start_step,
                              read_integer(value.at("start_step"), field, "block_sparse.start_step"));
  }
  if (value.contains("end_step")) {
    DIFFATTN_ASSIGN_OR_RETURN(block.end_step, read_integer(value.at("end_step"), field, "block_sparse.end_step"));
  }
  if (value.contains("precision")) {
    const auto& precision = value.at("precision");
    if (!precision.is_string()) {
      return field_error(field, "block_sparse.precision must be one of ['bf16', 'fp8', 'mix']; got " +
                                    brief_json(precision) + ".");
    }
    block.precision = precision.get<std::string>();
  }
  if (value.contains("skip_layers")) {
    DIFFATTN_ASSIGN_OR_RETURN(block.skip_layers, read_skip_layers(value.at("skip_layers"), field));
  }
  DIFFATTN_RETURN_IF_ERROR(validate_block_sparse(block, field));
  return block;
}

Status validate_block_sparse(BlockSparseSpec& block, std::string_view field) {
  DIFFATTN_RETURN_IF_ERROR(check_in_range(block.sparsity, field, "block_sparse.sparsity", 0.0, 1.0));
  if (block.start_step < 0) {
    return field_error(field, "block_sparse.start_step must be >= 0; got " + std::to_string(block.start_step) + ".");
  }
  if (block.end_step < 0) {
    return field_error(field, "block_sparse.end_step must be >= 0; got " + std::to_string(block.end_step) +
                                  " (it counts the final dense steps).");
  }
  if (std::find(kPrecisions.begin(), kPrecisions.end(), block.precision) == kPrecisions.end()) {
    return field_error(field, "block_sparse.precision must be one of ['bf16', 'fp8', 'mix']; got " +
                                  repr(block.precision) + ".");
  }
  if (block.skip_layers) {
    DIFFATTN_RETURN_IF_ERROR(check_utf8(*block.skip_layers, field, "block_sparse.skip_layers"));
    DIFFATTN_ASSIGN_OR_RETURN(block.skip_layer_indices,
                              parse_index_selector(*block.skip_layers, std::string(field) + ": block_sparse.skip_layers"));
  } else if (!block.skip_layer_indices.empty()) {
    // Indices set in code: check them and give them a selector so the spec prints back.
    for (std::int64_t index : block.skip_layer_indices) {
      DIFFATTN_RETURN_IF_ERROR(read_layer_index(nlohmann::json(index), field).status());
    }
    block.skip_layers = format_index_selector(block.skip_layer_indices);
  }
  return Status::Ok();
}

nlohmann::json block_sparse_to_json(const BlockSparseSpec& block) {
  nlohmann::json out = nlohmann::json::object();
  out["sparsity"] = block.sparsity;
  out["start_step"] = block.start_step;
  out["end_step"] = block.end_step;
  out["precision"] = block.precision;
  if (block.skip_layers) out["skip_layers"] = *block.skip_layers;
  return out;
}

}  // namespace diffattn::config_detail
