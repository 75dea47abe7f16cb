#include "runner/activation_generator.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace diffattn::runner {
namespace {

constexpr double kTwoPi = 6.283185307179586;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t hash_string(std::uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = splitmix64(h ^ c);
  return splitmix64(h ^ s.size());
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return splitmix64(h ^ splitmix64(v)); }

// Uniform in (0, 1) from the top 53 bits: never 0, so log() below is finite.
double uniform(std::uint64_t bits) { return ((bits >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// One standard normal per counter (Box-Muller on two hashed uniforms): order-free, so threads agree.
double normal(std::uint64_t stream, std::uint64_t counter) {
  const std::uint64_t a = splitmix64(stream ^ (counter * 2 + 0x632be59bd9b4e019ull));
  const std::uint64_t b = splitmix64(stream ^ (counter * 2 + 1));
  return std::sqrt(-2.0 * std::log(uniform(a))) * std::cos(kTwoPi * uniform(b));
}

// Student t with 4 degrees of freedom scaled to unit variance, per counter: z / sqrt(chi2_4 / 4),
// chi2_4 being twice the sum of two standard exponentials; its tails fall as x^-4, not exp(-x^2/2).
// Draws beyond kHeavyTailClip standard deviations (7 in 10^5) are clipped to it: a real layer's
// projections are bounded, and an unbounded draw (one in 10^7 lies beyond 40) in a key's outlier
// channel, times the large constant every query holds there, made that one key the best of every
// query of a head (one generated video head in a few hundred).
constexpr double kHeavyTailClip = 12.0;
double heavy_tailed(std::uint64_t stream, std::uint64_t counter) {
  const double z = normal(stream, counter);
  const double u1 = uniform(splitmix64(stream ^ (counter * 2 + 0x3c6ef372fe94f82bull)));
  const double u2 = uniform(splitmix64(stream ^ (counter * 2 + 0x3c6ef372fe94f82cull)));
  const double chi2_over_dof = -(std::log(u1) + std::log(u2)) / 2.0;
  return std::clamp(z / std::sqrt(chi2_over_dof) * std::sqrt(0.5), -kHeavyTailClip, kHeavyTailClip);
}

// Per-(head, channel) parameters of one layer, shared by Q, K and V where the statistics say so.
struct LayerParams {
  int heads = 0, dim = 0;
  std::vector<double> head_scale;   // [H]
  std::vector<double> k_bias;       // [H * D]
  std::vector<double> q_bias;       // [H * D]
  std::vector<double> gain_qk;      // [H * D]: 1, or outlier_gain on the outlier channels
  std::vector<double> frequency;    // [H * D]: radians per token of the positional component
  std::vector<double> video_frequency;  // [H * D * 3]: radians per latent step along frames, rows, columns
  std::vector<double> phase;        // [H * D]
};

LayerParams layer_params(std::uint64_t stream, int heads, int dim, const ActivationStats& stats, double sharpen) {
  LayerParams p;
  p.heads = heads;
  p.dim = dim;
  p.head_scale.resize(heads);
  p.k_bias.resize(static_cast<std::size_t>(heads) * dim);
  p.q_bias.resize(p.k_bias.size());
  p.gain_qk.assign(static_cast<std::size_t>(heads) * dim, 1.0);
  p.frequency.resize(p.k_bias.size());
  p.video_frequency.resize(p.k_bias.size() * 3);
  p.phase.resize(p.k_bias.size());
  std::uint64_t c = 0;
  for (int h = 0; h < heads; ++h) {
    p.head_scale[h] = sharpen * std::exp(stats.head_scale_sigma * normal(stream, c++));
    for (int o = 0; o < stats.outlier_channels && o < dim; ++o) {
      const auto channel = static_cast<int>(splitmix64(stream ^ mix(h, o + 1000)) % dim);
      p.gain_qk[static_cast<std::size_t>(h) * dim + channel] = stats.outlier_gain;
    }
    for (int d = 0; d < dim; ++d) {
      const std::size_t i = static_cast<std::size_t>(h) * dim + d;
      p.k_bias[i] = stats.k_bias_sigma * normal(stream, c++);
      // Log-uniform wavelengths from about 6 to 6000 tokens, as rotary position codes span.
      p.frequency[i] = std::pow(10.0, -3.0 + 3.0 * uniform(splitmix64(stream ^ mix(i, 77))));
      for (int axis = 0; axis < 3; ++axis) {
        // The head's correlation length along this axis, then this channel's frequency along it.
        const double span = std::log(stats.video_max_length / stats.video_min_length);
        const double length =
            stats.video_min_length * std::exp(span * uniform(splitmix64(stream ^ mix(h, 81 + static_cast<std::uint64_t>(axis)))));
        p.video_frequency[i * 3 + axis] = normal(mix(stream, 84 + static_cast<std::uint64_t>(axis)), i) / length;
      }
      p.phase[i] = kTwoPi * uniform(splitmix64(stream ^ mix(i, 78)));
      p.q_bias[i] = stats.q_bias_sigma * normal(mix(stream, 79), i);
    }
  }
  return p;
}

enum class Operand { kQ = 1, kK = 2, kV = 3 };

// Where token `position` of a sequence lies in the video of `video` (absent: not a video token).
struct VideoCoord {
  bool in_video = false;
  double axis[3] = {0.0, 0.0, 0.0};  // frame, row, column
};

VideoCoord video_coord(const std::optional<VideoGeometry>& video, std::int64_t position) {
  VideoCoord c;
  if (!video) return c;
  const std::int64_t i = position - video->text_before;
  if (i < 0 || i >= video->tokens()) return c;
  c.in_video = true;
  c.axis[0] = static_cast<double>(i / (video->height * video->width));
  c.axis[1] = static_cast<double>(i / video->width % video->height);
  c.axis[2] = static_cast<double>(i % video->width);
  return c;
}

void fill(HostTensor& t, Operand op, std::uint64_t stream, const LayerParams& p, const ActivationStats& stats,
          const std::optional<VideoGeometry>& video) {
  const auto& s = t.shape();
  const std::int64_t tokens = s[0] * s[1];
  const int heads = static_cast<int>(s[2]);
  const int dim = static_cast<int>(s[3]);
  const int head_ratio = p.heads / heads;  // K/V of GQA layers take every ratio-th head's parameters
  // A video that does not tile the sequence (cross-attention's keys, say) is not applied.
  const std::optional<VideoGeometry> geometry =
      video && video->sequence_length() == s[1] ? video : std::nullopt;
  const std::uint64_t op_stream = mix(stream, static_cast<std::uint64_t>(op));
#pragma omp parallel for schedule(static)
  for (std::int64_t token = 0; token < tokens; ++token) {
    const double position = static_cast<double>(token % s[1]);
    const VideoCoord where = video_coord(geometry, token % s[1]);
    const double w_pos = where.in_video ? stats.video_positional_weight : stats.positional_weight;
    const double w_noise = std::sqrt(1.0 - w_pos * w_pos);
    for (int h = 0; h < heads; ++h) {
      const int ph = h * head_ratio;
      for (int d = 0; d < dim; ++d) {
        const std::size_t pi = static_cast<std::size_t>(ph) * dim + d;
        const std::int64_t i = (token * heads + h) * dim + d;
        const double noise = stats.heavy_tails ? heavy_tailed(op_stream, static_cast<std::uint64_t>(i))
                                               : normal(op_stream, static_cast<std::uint64_t>(i));
        double x;
        if (op == Operand::kV) {
          x = noise;
        } else {
          const double gain = p.gain_qk[pi];
          if (!where.in_video) {
            const double smooth = std::sqrt(2.0) * std::sin(p.frequency[pi] * position + p.phase[pi]);
            x = p.head_scale[ph] * gain * (w_pos * smooth + w_noise * noise);
          } else if (gain == 1.0) {
            const double* w = &p.video_frequency[pi * 3];
            const double smooth =
                std::sqrt(2.0) * std::sin(w[0] * where.axis[0] + w[1] * where.axis[1] + w[2] * where.axis[2] + p.phase[pi]);
            x = p.head_scale[ph] * (w_pos * smooth + w_noise * noise);
          } else {
            // A video token's outlier channel is a constant offset of unit power times the gain, the
            // same in Q and K (a massive activation), plus the ordinary noise: its product is then
            // the same for every key of a query, which softmax ignores. An outlier that varied with
            // position, or noise times the gain, would hand a query's attention to scattered far
            // keys whose outlier channels happen to align (docs/validation.md).
            const double offset = std::sin(p.phase[pi]) >= 0.0 ? 1.0 : -1.0;
            x = p.head_scale[ph] * (gain * w_pos * offset + w_noise * noise);
          }
          if (op == Operand::kK) x += p.head_scale[ph] * p.k_bias[pi];
          if (op == Operand::kQ) x += p.head_scale[ph] * p.q_bias[pi];
        }
        t.set(i, static_cast<float>(x));
      }
    }
  }
}

}  // namespace

void generate_activations(const ActivationKey& key, const ActivationStats& stats, HostTensor& q,
                          HostTensor& k, HostTensor& v) {
  std::uint64_t layer_stream = hash_string(hash_string(splitmix64(key.seed), key.model), key.role);
  layer_stream = mix(layer_stream, static_cast<std::uint64_t>(key.layer));
  const double progress = key.num_steps > 1 ? static_cast<double>(key.step) / (key.num_steps - 1) : 0.0;
  const double sharpen = 0.8 + 0.4 * progress;
  const LayerParams params =
      layer_params(layer_stream, static_cast<int>(q.shape()[2]), static_cast<int>(q.shape()[3]), stats, sharpen);
  const std::uint64_t step_stream = mix(layer_stream, 0x5eed0000ull + static_cast<std::uint64_t>(key.step));
  fill(q, Operand::kQ, step_stream, params, stats, key.video);
  fill(k, Operand::kK, step_stream, params, stats, key.video);
  fill(v, Operand::kV, step_stream, params, stats, key.video);
}

}  // namespace diffattn::runner
