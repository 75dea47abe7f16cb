#pragma once
// Host buffers for attention tests: owned storage, strided views over it (contiguous, head-major
// transposed, or slices of one packed qkv buffer), fresh random fill, NaN poisoning, and element
// access as double for any attention dtype.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "diffattn/tensor.h"
#include "kernels/cpu/half_convert.h"

namespace diffattn::testing {

inline std::int64_t element_offset(const TensorView& t, std::initializer_list<std::int64_t> index) {
  std::int64_t off = 0;
  int d = 0;
  for (auto i : index) off += i * t.strides[d++];
  return off;
}

inline double read_element(const TensorView& t, std::int64_t off) {
  switch (t.dtype) {
    case DType::kFloat32: return static_cast<const float*>(t.data)[off];
    case DType::kFloat64: return static_cast<const double*>(t.data)[off];
    case DType::kFloat16: return cpu::half_to_float(static_cast<const std::uint16_t*>(t.data)[off]);
    case DType::kBFloat16: return cpu::bf16_to_float(static_cast<const std::uint16_t*>(t.data)[off]);
    case DType::kBool: return static_cast<const std::uint8_t*>(t.data)[off] ? 1.0 : 0.0;
    case DType::kInt32: return static_cast<const std::int32_t*>(t.data)[off];
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

inline void write_element(const TensorView& t, std::int64_t off, double value) {
  switch (t.dtype) {
    case DType::kFloat32: static_cast<float*>(t.data)[off] = static_cast<float>(value); return;
    case DType::kFloat64: static_cast<double*>(t.data)[off] = value; return;
    case DType::kFloat16:
      static_cast<std::uint16_t*>(t.data)[off] = cpu::float_to_half(static_cast<float>(value));
      return;
    case DType::kBFloat16:
      static_cast<std::uint16_t*>(t.data)[off] = cpu::float_to_bf16(static_cast<float>(value));
      return;
    case DType::kBool: static_cast<std::uint8_t*>(t.data)[off] = value != 0.0; return;
    case DType::kInt32: static_cast<std::int32_t*>(t.data)[off] = static_cast<std::int32_t>(value); return;
    default: return;
  }
}

// Rounds a value to what `dtype` can hold (the "same precision" of a plain computation).
inline double round_to(DType dtype, double value) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<float>(value);
    case DType::kFloat16: return cpu::half_to_float(cpu::float_to_half(static_cast<float>(value)));
    case DType::kBFloat16: return cpu::bf16_to_float(cpu::float_to_bf16(static_cast<float>(value)));
    default: return value;
  }
}

// Calls fn(offset) for every element of a rank <= 4 view.
template <class Fn>
void for_each_offset(const TensorView& t, Fn&& fn) {
  std::int64_t shape[4] = {1, 1, 1, 1}, strides[4] = {0, 0, 0, 0};
  for (int i = 0; i < t.ndim; ++i) {
    shape[4 - t.ndim + i] = t.shape[i];
    strides[4 - t.ndim + i] = t.strides[i];
  }
  for (std::int64_t a = 0; a < shape[0]; ++a)
    for (std::int64_t b = 0; b < shape[1]; ++b)
      for (std::int64_t c = 0; c < shape[2]; ++c)
        for (std::int64_t d = 0; d < shape[3]; ++d) fn(a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]);
}

// Owned storage; views point into it.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(DType dtype, std::int64_t elements)
      : dtype_(dtype), bytes_(static_cast<std::size_t>(elements) * dtype_size(dtype) + 64) {}
  void* data() { return bytes_.data(); }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return bytes_.size(); }

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<std::byte> bytes_;
};

// A [B, S, H, D] view whose storage order is given by `order` (the storage dimension of each
// logical dimension, outermost first), e.g. {0, 2, 1, 3} for head-major [B, H, S, D] storage.
inline TensorView permuted_view(void* data, DType dtype, std::array<std::int64_t, 4> shape,
                                std::array<int, 4> order) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = 4;
  v.shape = shape;
  std::int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    v.strides[order[i]] = stride;
    stride *= shape[order[i]];
  }
  return v;
}

inline void fill_normal(const TensorView& t, std::mt19937_64& rng, double stddev = 1.0, double mean = 0.0) {
  std::normal_distribution<double> dist(mean, stddev);
  for_each_offset(t, [&](std::int64_t off) { write_element(t, off, dist(rng)); });
}

inline void poison(const TensorView& t) {
  for_each_offset(t, [&](std::int64_t off) { write_element(t, off, std::numeric_limits<double>::quiet_NaN()); });
}

}  // namespace diffattn::testing
