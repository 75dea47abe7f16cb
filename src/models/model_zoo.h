#pragma once
// The model zoo: DiT models' attention layouts as data (models/zoo.json, embedded in the binary).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

// One attention role of a model: e.g. Wan's "self" (video tokens with themselves) and "cross"
// (video tokens against text tokens).
struct ModelRole {
  std::string role;                     // "self", "cross", "ltx2.audio_to_video", ...
  std::optional<std::string> category;  // "self" | "cross" | "joint", when broader than the role
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int layers = 0;                       // how many layers carry this role
  // Where the query and key sequences come from: "video", "audio", "text", "joint" (video+text).
  std::string query_tokens = "video";
  std::string key_tokens = "video";
  bool causal = false;
};

struct ModelSpec {
  std::string name;          // "wan2.1-14b"
  std::string display_name;  // "Wan2.1-T2V-14B"
  std::string source;        // where the numbers come from (model card / config URL)
  bool attention_mask_free = false;  // TRTLLM may be chosen automatically
  std::vector<ModelRole> roles;
  int text_tokens = 0;
  // Where the text sits in a "joint" (video + text) sequence: "first" ([text; video]) or "last"
  // ([video; text]); empty when the zoo entry does not say (needed only to mask padded text).
  std::string joint_text;
  // Token count of a video/image latent: frames -> 1 + (F-1)/temporal_compression (or F/.. for
  // image models with num_frames 1), then divided by the spatial compression and patch sizes.
  int vae_temporal_compression = 1;
  int vae_spatial_compression = 8;
  int patch_t = 1, patch_h = 2, patch_w = 2;
  int default_height = 0, default_width = 0, default_frames = 1;
  int audio_tokens = 0;  // models with an audio stream (LTX-2): tokens at the default frames
  int default_steps = 50;
  int hidden_size = 0;
  std::string notes;  // which numbers are estimates rather than published values
  // Audio latents follow the clip's duration: frames / frame_rate seconds.
  double frame_rate = 0.0;
  double audio_tokens_per_second = 0.0;
};

// The sequence lengths one role sees at a given resolution.
struct RoleShape {
  std::int64_t query_tokens = 0;
  std::int64_t key_tokens = 0;
};

const std::vector<ModelSpec>& model_zoo();
Result<const ModelSpec*> find_model(std::string_view name);  // unknown: error listing the names
// Video/image tokens for a resolution, e.g. Wan 480x832x81 -> 32760.
Result<std::int64_t> video_tokens(const ModelSpec& model, int height, int width, int frames);
// The latent video of a resolution in tokens (frames x height x width after patchifying), e.g.
// Wan 480x832x81 -> 21 x 30 x 52; no text tokens.
Result<VideoGeometry> latent_video(const ModelSpec& model, int height, int width, int frames);
// Audio tokens of a clip of `frames` video frames (0 for models without an audio stream).
std::int64_t audio_tokens(const ModelSpec& model, int frames);
// Query and key lengths of `role` ("video", "text", "audio" or "joint" = video + text).
Result<RoleShape> role_shape(const ModelSpec& model, const ModelRole& role, int height, int width,
                             int frames);
// Parses a zoo document in the models/zoo.json format (exposed for tests and custom zoos).
Result<std::vector<ModelSpec>> parse_model_zoo(std::string_view json_text);

}  // namespace diffattn
