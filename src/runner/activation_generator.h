#pragma once
// Deterministic Q/K/V activations with the statistics DiT attention inputs have (docs/validation.md
// describes the generator): per-head scale, channel-wise K and Q offsets, a few outlier channels,
// heavy-tailed values, and a positional component that makes nearby tokens attend to each other.

#include <cstdint>
#include <optional>
#include <string>

#include "diffattn/problem.h"
#include "runner/host_tensor.h"

namespace diffattn::runner {

struct ActivationKey {
  std::uint64_t seed = 0;
  std::string model;
  std::string role;
  int layer = 0;
  int step = 0;
  int num_steps = 1;  // the step's progress (step / num_steps) sharpens attention, as denoising does
  // Self-attention over a latent video (text before and after it, for joint sequences): the video
  // tokens' positional component follows their frame, row and column instead of the token index.
  std::optional<VideoGeometry> video;
};

struct ActivationStats {
  double head_scale_sigma = 0.3;     // log-normal spread of per-head magnitudes
  double k_bias_sigma = 1.0;         // channel-wise K bias, shared by every token of a head
  double q_bias_sigma = 0.25;        // channel-wise Q bias, smaller than K's as in DiTs
  bool heavy_tails = true;           // noise is Student t (4 dof, unit variance) instead of normal
  int outlier_channels = 2;          // per head, shared by Q and K
  double outlier_gain = 6.0;         // magnitude of the outlier channels relative to the rest
  double positional_weight = 0.5;    // share of the positional (smooth in token index) component
  // Video tokens (ActivationKey::video): the positional part is a random Fourier feature of the
  // token's (frame, row, column), sin(w . x + phase) with w drawn per channel from a normal of
  // per-axis widths 1 / length, Q and K sharing w and phase. Their product then falls off with the
  // 3D distance between a query and a key (a Gaussian kernel of those lengths), so nearby tokens in
  // space and time attend to each other; each head draws its three lengths log-uniformly from
  // [video_min_length, video_max_length] latent steps, so some heads look along time, some within a
  // frame, some broadly. video_positional_weight is its share of the values, as positional_weight.
  double video_positional_weight = 0.95;
  double video_min_length = 1.0;
  double video_max_length = 6.0;
};

// Fills q, k, v (already shaped [B, Sq, H, D] and [B, Skv, Hkv, D]) from `key`. The same key gives
// the same bytes on every machine and thread count; any change of the key changes them.
void generate_activations(const ActivationKey& key, const ActivationStats& stats, HostTensor& q,
                          HostTensor& k, HostTensor& v);

}  // namespace diffattn::runner
