#include <array>
#include <string>

#include "config/json_values.h"
#include "config/typed_blocks.h"

namespace diffattn::config_detail {
namespace {

constexpr std::array<std::string_view, 3> kSkipSoftmaxKeys = {"disabled_until_timestep", "target_sparsity",
                                                               "threshold"};

Result<std::optional<double>> read_optional_number(const nlohmann::json& object, std::string_view key,
                                                   std::string_view field) {
  if (!object.contains(key) || object.at(key).is_null()) return std::optional<double>();
  DIFFATTN_ASSIGN_OR_RETURN(double v, read_number(object.at(key), field, "skip_softmax." + std::string(key)));
  return std::optional<double>(v);
}

}  // namespace

Result<SkipSoftmaxSpec> skip_softmax_from_json(const nlohmann::json& value, std::string_view field) {
  DIFFATTN_RETURN_IF_ERROR(check_block_is_object(value, field, "skip_softmax"));
  DIFFATTN_RETURN_IF_ERROR(check_known_keys(value, kSkipSoftmaxKeys, field, "skip_softmax"));
  SkipSoftmaxSpec block;
  DIFFATTN_ASSIGN_OR_RETURN(block.target_sparsity, read_optional_number(value, "target_sparsity", field));
  DIFFATTN_ASSIGN_OR_RETURN(block.threshold, read_optional_number(value, "threshold", field));
  if (value.contains("disabled_until_timestep")) {
    DIFFATTN_ASSIGN_OR_RETURN(block.disabled_until_timestep,
                              read_number(value.at("disabled_until_timestep"), field,
                                          "skip_softmax.disabled_until_timestep"));
  }
  DIFFATTN_RETURN_IF_ERROR(validate_skip_softmax(block, field));
  return block;
}

Status validate_skip_softmax(const SkipSoftmaxSpec& block, std::string_view field) {
  if (block.target_sparsity) {
    DIFFATTN_RETURN_IF_ERROR(check_in_range(*block.target_sparsity, field, "skip_softmax.target_sparsity", 0.0, 1.0));
  }
  if (block.threshold) {
    DIFFATTN_RETURN_IF_ERROR(check_in_range(*block.threshold, field, "skip_softmax.threshold", 0.0, kUnbounded));
  }
  DIFFATTN_RETURN_IF_ERROR(
      check_in_range(block.disabled_until_timestep, field, "skip_softmax.disabled_until_timestep", 0.0, 1.0));
  if (block.target_sparsity && block.threshold) {
    return field_error(field,
                       "skip_softmax: set either target_sparsity or threshold, not both. Use threshold for a "
                       "calibration-free gate, target_sparsity with a calibrated checkpoint.");
  }
  return Status::Ok();
}

nlohmann::json skip_softmax_to_json(const SkipSoftmaxSpec& block) {
  nlohmann::json out = nlohmann::json::object();
  if (block.target_sparsity) out["target_sparsity"] = *block.target_sparsity;
  if (block.threshold) out["threshold"] = *block.threshold;
  out["disabled_until_timestep"] = block.disabled_until_timestep;
  return out;
}

}  // namespace diffattn::config_detail
