// AttentionSpec rules: types and keys of a spec object, block values, block ownership, defaults.

#include <array>
#include <string>

#include "config/block_owners.h"
#include "config/json_values.h"
#include "config/typed_blocks.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using config_detail::field_error;
using nlohmann::json;

constexpr std::array<std::string_view, 6> kSpecKeys = {"backend",            "block_sparse", "extra",
                                                       "fastvideo_vsa_topk", "quant",        "skip_softmax"};

bool is_auto(std::string_view backend) { return ascii_lower(backend) == "auto"; }

Status check_owner(const config_detail::BlockOwners& owners, bool present, const AttentionSpec& spec,
                   std::string_view field) {
  if (!present) return Status::Ok();
  if (auto reason = config_detail::block_owner_violation(owners, spec.backend)) return field_error(field, *reason);
  return Status::Ok();
}

Result<std::string> read_backend(const json& object, std::string_view field) {
  if (!object.contains("backend")) {
    return field_error(field, "backend is required in a spec object; add \"backend\": \"<NAME>\" (or \"auto\" for "
                              "the platform default).");
  }
  const json& backend = object.at("backend");
  if (!backend.is_string()) {
    return field_error(field, "expected a string for backend, got " + std::string(config_detail::json_type_name(backend)) +
                                  " " + config_detail::brief_json(backend) + ". Give a backend name such as \"FLASH_ATTN\".");
  }
  return backend.get<std::string>();
}

Status read_blocks(const json& object, AttentionSpec& spec, std::string_view field) {
  if (object.contains("skip_softmax") && !object.at("skip_softmax").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(spec.skip_softmax, config_detail::skip_softmax_from_json(object.at("skip_softmax"), field));
  }
  if (object.contains("quant") && !object.at("quant").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(spec.quant, config_detail::quant_from_json(object.at("quant"), field));
  }
  if (object.contains("block_sparse") && !object.at("block_sparse").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(spec.block_sparse, config_detail::block_sparse_from_json(object.at("block_sparse"), field));
  }
  if (object.contains("fastvideo_vsa_topk") && !object.at("fastvideo_vsa_topk").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(spec.fastvideo_vsa_topk,
                              config_detail::read_integer(object.at("fastvideo_vsa_topk"), field, "fastvideo_vsa_topk"));
  }
  if (object.contains("extra") && !object.at("extra").is_null()) {
    const json& extra = object.at("extra");
    if (!extra.is_object()) return config_detail::check_block_is_object(extra, field, "extra");
    spec.extra = extra;
  }
  return Status::Ok();
}

Result<AttentionSpec> spec_from_object(const json& object, std::string_view field, const Registry& registry) {
  DIFFATTN_RETURN_IF_ERROR(config_detail::check_known_keys(object, kSpecKeys, field, "the spec"));
  AttentionSpec spec;
  DIFFATTN_ASSIGN_OR_RETURN(spec.backend, read_backend(object, field));
  DIFFATTN_RETURN_IF_ERROR(read_blocks(object, spec, field));
  DIFFATTN_RETURN_IF_ERROR(validate_spec(spec, field, registry));
  return spec;
}

}  // namespace

Status validate_spec(AttentionSpec& spec, std::string_view field, const Registry& registry) {
  if (spec.backend.empty()) {
    return field_error(field, "backend is empty; give a backend name such as \"FLASH_ATTN\" (or \"auto\").");
  }
  DIFFATTN_RETURN_IF_ERROR(config_detail::check_utf8(spec.backend, field, "backend"));
  if (spec.skip_softmax) DIFFATTN_RETURN_IF_ERROR(config_detail::validate_skip_softmax(*spec.skip_softmax, field));
  if (spec.quant) DIFFATTN_RETURN_IF_ERROR(config_detail::validate_quant(*spec.quant, field));
  if (spec.block_sparse) DIFFATTN_RETURN_IF_ERROR(config_detail::validate_block_sparse(*spec.block_sparse, field));
  DIFFATTN_RETURN_IF_ERROR(
      check_owner(config_detail::block_owners("skip_softmax", registry), spec.skip_softmax.has_value(), spec, field));
  DIFFATTN_RETURN_IF_ERROR(
      check_owner(config_detail::block_owners("quant", registry), spec.quant.has_value(), spec, field));
  DIFFATTN_RETURN_IF_ERROR(check_owner(config_detail::block_owners("fastvideo_vsa_topk", registry),
                                       spec.fastvideo_vsa_topk.has_value(), spec, field));
  if (spec.fastvideo_vsa_topk && *spec.fastvideo_vsa_topk <= 0) {
    return field_error(field, "fastvideo_vsa_topk must be positive; got " + std::to_string(*spec.fastvideo_vsa_topk) +
                                  ".");
  }
  const config_detail::BlockOwners block_sparse = config_detail::block_owners("block_sparse", registry);
  DIFFATTN_RETURN_IF_ERROR(check_owner(block_sparse, spec.block_sparse.has_value(), spec, field));
  if (!spec.block_sparse && config_detail::owns_block(block_sparse, spec.backend)) {
    spec.block_sparse = BlockSparseSpec{};
  }
  if (!spec.extra.is_object()) return config_detail::check_block_is_object(spec.extra, field, "extra");
  return config_detail::check_printable(spec.extra, field, "extra");
}

Result<std::optional<AttentionSpec>> spec_from_json(const json& value, std::string_view field,
                                                    const Registry& registry) {
  AttentionSpec spec;
  if (value.is_string()) {
    spec.backend = value.get<std::string>();
    // "auto" is no opinion: nothing else to check.
    if (is_auto(spec.backend)) return std::optional<AttentionSpec>();
    DIFFATTN_RETURN_IF_ERROR(validate_spec(spec, field, registry));
  } else if (value.is_object()) {
    DIFFATTN_ASSIGN_OR_RETURN(spec, spec_from_object(value, field, registry));
  } else {
    return field_error(field, "expected a backend name (string) or a spec object, got " +
                                  std::string(config_detail::json_type_name(value)) + " " +
                                  config_detail::brief_json(value) +
                                  ". Write it as \"FLASH_ATTN\" or {\"backend\": \"FLASH_ATTN\", ...}.");
  }
  if (is_auto(spec.backend)) return std::optional<AttentionSpec>();
  return std::optional<AttentionSpec>(std::move(spec));
}

}  // namespace diffattn
