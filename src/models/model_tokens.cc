// Token counts that follow from a model's VAE strides, patch sizes and the requested resolution.
#include <cmath>
#include <string>

#include "models/model_zoo.h"

namespace diffattn {
namespace {

std::string dim_advice(const std::string& what, int value, int stride) {
  const int lower = value / stride * stride;
  const int upper = lower + stride;
  return what + " " + std::to_string(value) + " is not a multiple of " + std::to_string(stride) +
         " (VAE stride x patch size); use " + (lower > 0 ? std::to_string(lower) + " or " : "") +
         std::to_string(upper);
}

Result<std::int64_t> latent_frames(const ModelSpec& m, int frames) {
  const int tc = m.vae_temporal_compression;
  if (m.default_frames == 1 && tc == 1) {
    if (frames != 1)
      return InvalidInput(m.name + " generates images: --num-frames must be 1, got " + std::to_string(frames));
    return 1;
  }
  if (frames < 1 || (frames - 1) % tc != 0)
    return InvalidInput(m.name + ": --num-frames " + std::to_string(frames) + " must be " +
                        std::to_string(tc) + "k+1 (VAE temporal stride " + std::to_string(tc) +
                        "), e.g. " + std::to_string(m.default_frames));
  const std::int64_t lf = 1 + (frames - 1) / tc;
  if (lf % m.patch_t != 0)
    return InvalidInput(m.name + ": " + std::to_string(lf) + " latent frames are not a multiple of the temporal patch " +
                        std::to_string(m.patch_t) + "; choose another --num-frames");
  return lf / m.patch_t;
}

}  // namespace

Result<VideoGeometry> latent_video(const ModelSpec& m, int height, int width, int frames) {
  const int sh = m.vae_spatial_compression * m.patch_h;
  const int sw = m.vae_spatial_compression * m.patch_w;
  if (height <= 0 || height % sh != 0)
    return InvalidInput(m.name + ": " + dim_advice("--height", height, sh));
  if (width <= 0 || width % sw != 0)
    return InvalidInput(m.name + ": " + dim_advice("--width", width, sw));
  DIFFATTN_ASSIGN_OR_RETURN(std::int64_t lf, latent_frames(m, frames));
  VideoGeometry g;
  g.frames = lf;
  g.height = height / sh;
  g.width = width / sw;
  return g;
}

Result<std::int64_t> video_tokens(const ModelSpec& m, int height, int width, int frames) {
  DIFFATTN_ASSIGN_OR_RETURN(VideoGeometry g, latent_video(m, height, width, frames));
  return g.tokens();
}

std::int64_t audio_tokens(const ModelSpec& m, int frames) {
  if (m.audio_tokens_per_second <= 0 || m.frame_rate <= 0) return 0;
  return static_cast<std::int64_t>(std::ceil(frames / m.frame_rate * m.audio_tokens_per_second));
}

Result<RoleShape> role_shape(const ModelSpec& m, const ModelRole& role, int height, int width, int frames) {
  DIFFATTN_ASSIGN_OR_RETURN(std::int64_t video, video_tokens(m, height, width, frames));
  auto length = [&](const std::string& source) -> std::int64_t {
    if (source == "text") return m.text_tokens;
    if (source == "audio") return audio_tokens(m, frames);
    if (source == "joint") return video + m.text_tokens;
    return video;
  };
  RoleShape shape{length(role.query_tokens), length(role.key_tokens)};
  if (shape.query_tokens <= 0 || shape.key_tokens <= 0)
    return Internal("model zoo: role '" + role.role + "' of " + m.name +
                    " has an empty sequence; its zoo entry lacks text_tokens or audio rates");
  return shape;
}

}  // namespace diffattn
