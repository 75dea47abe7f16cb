#pragma once
// Typed attention configuration: AttentionConfig{default, per_role} of AttentionSpec values, the
// typed option blocks backends own, and the parsers for every configuration surface.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/status.h"

namespace diffattn {

class Registry;

// TRTLLM_ATTN only. target_sparsity and threshold are mutually exclusive.
struct SkipSoftmaxSpec {
  std::optional<double> target_sparsity;  // [0, 1]; needs a checkpoint calibration curve
  std::optional<double> threshold;        // >= 0, calibration-free
  double disabled_until_timestep = 0.0;   // [0, 1]; 0 = gate off
  bool enabled() const { return target_sparsity.has_value() || threshold.has_value(); }
  bool operator==(const SkipSoftmaxSpec&) const = default;
};

// Shared by TRTLLM_ATTN and FLASHINFER_ATTN (each re-validates its own value set).
struct AttnQuantSpec {
  std::optional<std::string> dtype_qk;  // float16 | bfloat16 | int8 | fp8_e4m3
  std::optional<std::string> dtype_vo;  // same set
  int q_block_size = 1;                 // 1 | 4 | 16
  int k_block_size = 16;                // 1 | 4 | 16
  std::optional<std::string> flashinfer_backend;  // free string: fa2, fa3, cute-dsl, trtllm-gen, auto
  bool enabled() const { return dtype_qk || dtype_vo || flashinfer_backend; }
  bool operator==(const AttnQuantSpec&) const = default;
};

// Block-sparse backends (RAINFUSION_ATTN). Filled with defaults when such a backend has none.
struct BlockSparseSpec {
  double sparsity = 0.8;                 // [0, 1]
  std::int64_t start_step = 0;           // >= 0
  std::int64_t end_step = 0;             // >= 0: a count of final dense steps, not an index
  std::string precision = "bf16";        // bf16 | fp8 | mix
  std::optional<std::string> skip_layers;  // index selector "0-3,38" as given (or list, normalised)
  std::set<std::int64_t> skip_layer_indices;  // parsed from skip_layers
  bool operator==(const BlockSparseSpec&) const = default;
};

struct AttentionSpec {
  std::string backend;  // case preserved; validated against the registry at resolution
  std::optional<AttnQuantSpec> quant;
  std::optional<SkipSoftmaxSpec> skip_softmax;
  std::optional<BlockSparseSpec> block_sparse;
  std::optional<std::int64_t> fastvideo_vsa_topk;  // FASTVIDEO_VSA only, > 0
  nlohmann::json extra = nlohmann::json::object();  // untyped backend parameters; each backend checks its keys

  bool operator==(const AttentionSpec&) const = default;
};

// Where AttentionConfig::default_spec came from: explicit configuration, the
// --diffusion-attention-backend shorthand, or the DIFFUSION_ATTENTION_BACKEND variable.
enum class DefaultOrigin { kConfig, kShorthand, kEnv };

struct AttentionConfig {
  std::optional<AttentionSpec> default_spec;
  DefaultOrigin default_origin = DefaultOrigin::kConfig;
  std::map<std::string, AttentionSpec> per_role;  // flattened dotted role keys

  bool empty() const { return !default_spec && per_role.empty(); }
  bool operator==(const AttentionConfig&) const = default;
};

// Where a spec was found by resolve_spec_for_role.
enum class SpecSource { kPerRole, kCategory, kDefault, kEnv };

struct SpecLookup {
  const AttentionSpec* spec = nullptr;  // nullptr: nothing configured, use the platform default
  std::optional<SpecSource> source;
  std::string source_detail;  // e.g. "per_role['cross']" or "per_role['cross'] (role_category fallback)"
};

// 1 exact per_role[role]  2 per_role[category]  3 default (source kDefault or kEnv)  4 nothing.
SpecLookup resolve_spec_for_role(const AttentionConfig& config, std::string_view role,
                                 std::optional<std::string_view> category);

// Every parser below that builds specs takes the registry whose descriptors declare which backend
// owns which typed block (Capabilities::option_blocks): ownership and the RainFusion defaults are
// checked against it. It is a parameter, not a process-wide default, so the core links without the
// backends layer and never meets a registry it was not given: callers above the core pass
// global_registry() (builtin_backends.h) or a registry they filled.

// Builds a spec from a JSON value (a string backend name or an object of spec keys), applying
// every field rule: types, ranges, mutual exclusions, block ownership, RainFusion defaults.
// `field` names the location for messages, e.g. "default" or "per_role['cross']".
// Returns nullopt for "auto" (case-insensitive): no opinion.
Result<std::optional<AttentionSpec>> spec_from_json(const nlohmann::json& value, std::string_view field,
                                                    const Registry& registry);

// Re-runs the field rules on a spec built in code.
Status validate_spec(AttentionSpec& spec, std::string_view field, const Registry& registry);

// One JSON object {"default": ..., "per_role": {...}}; nested per_role maps flatten to dotted roles.
Result<AttentionConfig> config_from_json(const nlohmann::json& value, const Registry& registry);
Result<AttentionConfig> parse_attention_config_json(std::string_view text, const Registry& registry);
// One spec given as JSON text (a backend name string or an object), with spec_from_json's rules.
Result<std::optional<AttentionSpec>> parse_attention_spec_json(std::string_view text, std::string_view field,
                                                               const Registry& registry);

nlohmann::json spec_to_json(const AttentionSpec& spec);
// {"default": spec or null, "per_role": {flat dotted role: spec}}; config_from_json reads it back to
// an equal config (default_origin aside: the printed form is configuration, not its provenance).
nlohmann::json config_to_json(const AttentionConfig& config);

// What the kernel of the selected backend receives (mirrors the typed blocks; empty when none).
// `extra` is not part of it: a backend reads spec.extra itself and rejects keys it does not know.
nlohmann::json backend_kwargs(const AttentionSpec& spec);

// The command-line surfaces, gathered before they are combined.
struct ConfigSources {
  std::optional<std::string> config_json;  // --diffusion-attention-config '{...}'
  // --diffusion-attention-config.<dotted.path> VALUE, in the order given. VALUE is typed:
  // JSON literals (numbers, true/false, null, [..], {..}, "..") parse as JSON, anything else is a string.
  std::vector<std::pair<std::string, std::string>> dotted;
  std::optional<std::string> backend_shorthand;  // --diffusion-attention-backend NAME
  std::optional<std::int64_t> fastvideo_vsa_topk;  // --fastvideo-vsa-topk N
};

// Combines the surfaces without reading the environment: JSON, then dotted flags merged on top,
// then the shorthand (an error if default.backend is also set; "auto" leaves default unset).
Result<AttentionConfig> parse_attention_config(const ConfigSources& sources, const Registry& registry);

// parse_attention_config, then DIFFUSION_ATTENTION_BACKEND (`env_backend`) fills the default only
// while none is set and the shorthand was not given at all (an explicit "--diffusion-attention-backend
// auto" on the command line wins over the environment).
Result<AttentionConfig> build_attention_config(const ConfigSources& sources, std::optional<std::string> env_backend,
                                               const Registry& registry);

// Reads DIFFUSION_ATTENTION_BACKEND from the process environment.
std::optional<std::string> env_attention_backend();

// Parses an index selector such as "0-3,38" into indices.
Result<std::set<std::int64_t>> parse_index_selector(std::string_view text, std::string_view field);

}  // namespace diffattn
