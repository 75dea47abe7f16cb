#include <algorithm>
#include <array>
#include <string>

#include "config/json_values.h"
#include "config/typed_blocks.h"

namespace diffattn::config_detail {
namespace {

constexpr std::array<std::string_view, 5> kQuantKeys = {"dtype_qk", "dtype_vo", "flashinfer_backend", "k_block_size",
                                                        "q_block_size"};
constexpr std::array<std::string_view, 4> kQuantDtypes = {"bfloat16", "float16", "fp8_e4m3", "int8"};
constexpr std::array<std::int64_t, 3> kQuantBlockSizes = {1, 4, 16};

Status check_quant_dtype(const std::optional<std::string>& dtype, std::string_view field, std::string_view name) {
  if (!dtype || std::find(kQuantDtypes.begin(), kQuantDtypes.end(), *dtype) != kQuantDtypes.end()) {
    return Status::Ok();
  }
  return field_error(field, "quant." + std::string(name) + "=" + repr(*dtype) +
                                " unsupported; use one of ['bfloat16', 'float16', 'fp8_e4m3', 'int8'].");
}

Status check_quant_block_size(std::int64_t size, std::string_view field, std::string_view name) {
  if (std::find(kQuantBlockSizes.begin(), kQuantBlockSizes.end(), size) != kQuantBlockSizes.end()) {
    return Status::Ok();
  }
  return field_error(field, "quant." + std::string(name) + "=" + std::to_string(size) +
                                " unsupported; kernels exist only for [1, 4, 16].");
}

Result<int> read_block_size(const nlohmann::json& object, std::string_view key, int fallback,
                            std::string_view field) {
  if (!object.contains(key)) return fallback;
  DIFFATTN_ASSIGN_OR_RETURN(std::int64_t v, read_integer(object.at(key), field, "quant." + std::string(key)));
  DIFFATTN_RETURN_IF_ERROR(check_quant_block_size(v, field, key));
  return static_cast<int>(v);
}

Result<std::optional<std::string>> read_quant_string(const nlohmann::json& object, std::string_view key,
                                                     std::string_view field) {
  if (!object.contains(key)) return std::optional<std::string>();
  return read_optional_string(object.at(key), field, "quant." + std::string(key));
}

}  // namespace

Result<AttnQuantSpec> quant_from_json(const nlohmann::json& value, std::string_view field) {
  DIFFATTN_RETURN_IF_ERROR(check_block_is_object(value, field, "quant"));
  DIFFATTN_RETURN_IF_ERROR(check_known_keys(value, kQuantKeys, field, "quant"));
  AttnQuantSpec block;
  DIFFATTN_ASSIGN_OR_RETURN(block.dtype_qk, read_quant_string(value, "dtype_qk", field));
  DIFFATTN_ASSIGN_OR_RETURN(block.dtype_vo, read_quant_string(value, "dtype_vo", field));
  DIFFATTN_ASSIGN_OR_RETURN(block.flashinfer_backend, read_quant_string(value, "flashinfer_backend", field));
  DIFFATTN_ASSIGN_OR_RETURN(block.q_block_size, read_block_size(value, "q_block_size", 1, field));
  DIFFATTN_ASSIGN_OR_RETURN(block.k_block_size, read_block_size(value, "k_block_size", 16, field));
  DIFFATTN_RETURN_IF_ERROR(validate_quant(block, field));
  return block;
}

Status validate_quant(const AttnQuantSpec& block, std::string_view field) {
  DIFFATTN_RETURN_IF_ERROR(check_quant_dtype(block.dtype_qk, field, "dtype_qk"));
  DIFFATTN_RETURN_IF_ERROR(check_quant_dtype(block.dtype_vo, field, "dtype_vo"));
  DIFFATTN_RETURN_IF_ERROR(check_quant_block_size(block.q_block_size, field, "q_block_size"));
  DIFFATTN_RETURN_IF_ERROR(check_quant_block_size(block.k_block_size, field, "k_block_size"));
  if (block.flashinfer_backend) {
    DIFFATTN_RETURN_IF_ERROR(check_utf8(*block.flashinfer_backend, field, "quant.flashinfer_backend"));
  }
  return Status::Ok();
}

nlohmann::json quant_to_json(const AttnQuantSpec& block) {
  nlohmann::json out = nlohmann::json::object();
  if (block.dtype_qk) out["dtype_qk"] = *block.dtype_qk;
  if (block.dtype_vo) out["dtype_vo"] = *block.dtype_vo;
  out["q_block_size"] = block.q_block_size;
  out["k_block_size"] = block.k_block_size;
  if (block.flashinfer_backend) out["flashinfer_backend"] = *block.flashinfer_backend;
  return out;
}

}  // namespace diffattn::config_detail
