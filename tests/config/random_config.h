#pragma once
// Random valid configurations for round-trip and equivalence tests: every backend kind, every
// block its backend owns, values across their ranges, nested extra parameters, dotted roles.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "diffattn/builtin_backends.h"
#include "diffattn/config.h"

namespace diffattn::testing_config {

struct RandomConfigOptions {
  // Dots in extra keys are fine in JSON but would read as nesting in a dotted flag path.
  bool dots_in_extra_keys = true;
};

class RandomConfigGenerator {
 public:
  RandomConfigGenerator(std::uint64_t seed, RandomConfigOptions options) : rng_(seed), options_(options) {}

  AttentionConfig config() {
    AttentionConfig out;
    if (coin()) out.default_spec = spec();
    const int roles = pick(0, 5);
    for (int i = 0; i < roles; ++i) out.per_role[role()] = spec();
    return out;
  }

  AttentionSpec spec() {
    static const std::vector<std::string> kBackends = {
        "TRTLLM_ATTN", "trtllm_attn", "FLASHINFER_ATTN", "RAINFUSION_ATTN", "Rainfusion_Attn", "FASTVIDEO_VSA",
        "FLASH_ATTN",  "TORCH_SDPA",  "CUDNN_ATTN",      "SAGE_ATTN",       "my-plugin:v2",    "ünïcode_backend"};
    AttentionSpec s;
    s.backend = kBackends[pick(0, static_cast<int>(kBackends.size()) - 1)];
    const std::string upper = upper_case(s.backend);
    if (upper == "TRTLLM_ATTN" && coin()) s.skip_softmax = skip_softmax();
    if ((upper == "TRTLLM_ATTN" || upper == "FLASHINFER_ATTN") && coin()) s.quant = quant();
    if (upper == "RAINFUSION_ATTN" && coin()) s.block_sparse = block_sparse();
    if (upper == "FASTVIDEO_VSA" && coin()) s.fastvideo_vsa_topk = pick(1, 1 << 20);
    if (coin()) s.extra = extra_object(0);
    // Fills RainFusion defaults and derives skip-layer indices, as parsing does.
    Status status = validate_spec(s, "random", global_registry());
    if (!status.ok()) ADD_FAILURE() << "generator made an invalid spec: " << status.message();
    return s;
  }

 private:
  bool coin() { return std::bernoulli_distribution(0.5)(rng_); }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

  static std::string upper_case(std::string s) {
    for (char& c : s) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    return s;
  }

  std::string role() {
    static const std::vector<std::string> kSingle = {"self", "cross", "joint", "it's"};
    static const std::vector<std::string> kPrefix = {"ltx2", "wan", "hv15"};
    static const std::vector<std::string> kLeaf = {"audio_self", "audio_to_video", "video_to_audio", "text"};
    if (coin()) return kSingle[pick(0, 3)];
    return kPrefix[pick(0, 2)] + "." + kLeaf[pick(0, 3)];
  }

  SkipSoftmaxSpec skip_softmax() {
    SkipSoftmaxSpec b;
    switch (pick(0, 2)) {
      case 0: b.target_sparsity = unit(); break;
      case 1: b.threshold = unit() * 1000.0; break;
      default: break;
    }
    if (coin()) b.disabled_until_timestep = unit();
    return b;
  }

  AttnQuantSpec quant() {
    static const std::vector<std::string> kDtypes = {"float16", "bfloat16", "int8", "fp8_e4m3"};
    static const int kSizes[] = {1, 4, 16};
    AttnQuantSpec b;
    if (coin()) b.dtype_qk = kDtypes[pick(0, 3)];
    if (coin()) b.dtype_vo = kDtypes[pick(0, 3)];
    b.q_block_size = kSizes[pick(0, 2)];
    b.k_block_size = kSizes[pick(0, 2)];
    if (coin()) b.flashinfer_backend = coin() ? "fa3" : "cute-dsl";
    return b;
  }

  BlockSparseSpec block_sparse() {
    static const std::vector<std::string> kPrecisions = {"bf16", "fp8", "mix"};
    BlockSparseSpec b;
    b.sparsity = unit();
    b.start_step = pick(0, 50);
    b.end_step = pick(0, 50);
    b.precision = kPrecisions[pick(0, 2)];
    switch (pick(0, 2)) {
      case 0: b.skip_layers = std::to_string(pick(0, 3)) + "-" + std::to_string(pick(4, 9)) + ", " +
                              std::to_string(pick(10, 60)); break;
      case 1: b.skip_layer_indices = {pick(0, 5), pick(6, 40)}; break;
      default: break;
    }
    return b;
  }

  std::string key() {
    static const std::vector<std::string> kKeys = {"block_size", "params", "k", "mode", "ü", "with space"};
    std::string k = kKeys[pick(0, static_cast<int>(kKeys.size()) - 1)];
    if (options_.dots_in_extra_keys && coin()) k += ".v" + std::to_string(pick(0, 9));
    return k;
  }

  nlohmann::json extra_value(int depth) {
    switch (pick(0, depth >= 3 ? 4 : 6)) {
      case 0: return pick(-1000000, 1000000);
      case 1: return unit() * 1e6 - 5e5;
      case 2: return coin();
      case 3: return std::string("v\"\\\n") + std::to_string(pick(0, 99));
      case 4: return nullptr;
      case 5: {
        nlohmann::json array = nlohmann::json::array();
        for (int i = pick(0, 3); i > 0; --i) array.push_back(extra_value(depth + 1));
        return array;
      }
      default: return extra_object(depth + 1);
    }
  }

  nlohmann::json extra_object(int depth) {
    nlohmann::json object = nlohmann::json::object();
    for (int i = pick(0, 3); i > 0; --i) object[key()] = extra_value(depth);
    return object;
  }

  std::mt19937_64 rng_;
  RandomConfigOptions options_;
};

}  // namespace diffattn::testing_config
