#pragma once
// The typed option blocks of a spec: reading each from JSON, checking its values, printing it back.
// Ownership (which backend may carry which block) lives in block_owners.h.

#include <string_view>

#include <nlohmann/json.hpp>

#include "diffattn/config.h"
#include "diffattn/status.h"

namespace diffattn::config_detail {

Result<SkipSoftmaxSpec> skip_softmax_from_json(const nlohmann::json& value, std::string_view field);
Status validate_skip_softmax(const SkipSoftmaxSpec& block, std::string_view field);
nlohmann::json skip_softmax_to_json(const SkipSoftmaxSpec& block);

Result<AttnQuantSpec> quant_from_json(const nlohmann::json& value, std::string_view field);
Status validate_quant(const AttnQuantSpec& block, std::string_view field);
nlohmann::json quant_to_json(const AttnQuantSpec& block);

Result<BlockSparseSpec> block_sparse_from_json(const nlohmann::json& value, std::string_view field);
// Also derives skip_layer_indices from skip_layers (or skip_layers from indices set in code).
Status validate_block_sparse(BlockSparseSpec& block, std::string_view field);
nlohmann::json block_sparse_to_json(const BlockSparseSpec& block);

// "name must be finite and in [lo, hi]; got v." (hi < lo means unbounded above).
Status check_in_range(double value, std::string_view field, std::string_view name, double lo, double hi);
inline constexpr double kUnbounded = -1.0;

// A block must be a JSON object (null means "not given" and is handled by the caller).
Status check_block_is_object(const nlohmann::json& value, std::string_view field, std::string_view block);

}  // namespace diffattn::config_detail
