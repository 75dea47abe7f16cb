#pragma once
// Element access to strided [B, S, H, D] views of any float dtype, and their copy into a padded
// float32 token order, for the CPU paths of the sparse video backends that reorder tokens into tiles.

#include <cstdint>
#include <vector>

#include "diffattn/tensor.h"
#include "kernels/cpu/half_convert.h"

namespace diffattn::cpu {

inline float load_float(const TensorView& t, std::int64_t offset) {
  switch (t.dtype) {
    case DType::kFloat16: return half_to_float(static_cast<const std::uint16_t*>(t.data)[offset]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const std::uint16_t*>(t.data)[offset]);
    default: return static_cast<const float*>(t.data)[offset];
  }
}

inline void store_float(const TensorView& t, std::int64_t offset, float value) {
  switch (t.dtype) {
    case DType::kFloat16: static_cast<std::uint16_t*>(t.data)[offset] = float_to_half(value); return;
    case DType::kBFloat16: static_cast<std::uint16_t*>(t.data)[offset] = float_to_bf16(value); return;
    default: static_cast<float*>(t.data)[offset] = value; return;
  }
}

inline std::int64_t offset_of(const TensorView& t, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t e) {
  return b * t.stride(0) + s * t.stride(1) + h * t.stride(2) + e * t.stride(3);
}

// A [B, S, H, D] view copied as float32 into [B, padded, H, D], token i of each sequence at row
// slot[i]; the other rows are zero.
inline std::vector<float> gather_into_slots(const TensorView& t, const std::vector<std::int64_t>& slot,
                                            std::int64_t padded) {
  const std::int64_t batch = t.size(0), tokens = t.size(1), heads = t.size(2), dim = t.size(3);
  std::vector<float> out(static_cast<std::size_t>(batch * padded * heads * dim), 0.0f);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < tokens; ++i) {
      float* row = out.data() + (b * padded + slot[static_cast<std::size_t>(i)]) * heads * dim;
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t e = 0; e < dim; ++e) row[h * dim + e] = load_float(t, offset_of(t, b, i, h, e));
    }
  return out;
}

// Means over the valid rows of the first `pooled` tiles of a padded [B, tiles * tile_rows, H, D]
// array whose tile t holds valid[t] rows first: [B, pooled, H, D] in float64. Both sparse video
// backends pool their tiles (VSA's cubes, RainFusion's frame patches) with it.
inline std::vector<double> tile_means(const std::vector<float>& x, const std::vector<std::int32_t>& valid,
                                      std::int64_t tiles, std::int64_t tile_rows, std::int64_t pooled,
                                      std::int64_t batch, std::int64_t width) {
  std::vector<double> means(static_cast<std::size_t>(batch * pooled * width), 0.0);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < pooled; ++t) {
      double* dst = means.data() + (b * pooled + t) * width;
      const std::int32_t rows = valid[static_cast<std::size_t>(t)];
      for (std::int32_t r = 0; r < rows; ++r) {
        const float* src = x.data() + ((b * tiles + t) * tile_rows + r) * width;
        for (std::int64_t e = 0; e < width; ++e) dst[e] += src[e];
      }
      for (std::int64_t e = 0; e < width; ++e) dst[e] /= rows;
    }
  return means;
}

}  // namespace diffattn::cpu
