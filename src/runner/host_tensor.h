#pragma once
// A contiguous [B, S, H, D] array in host memory, in the run's dtype (fp32, fp16 or bf16), with
// float access for the generator and the quality metrics.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "diffattn/dtype.h"
#include "diffattn/tensor.h"

namespace diffattn::runner {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::array<std::int64_t, 4> shape);

  DType dtype() const { return dtype_; }
  const std::array<std::int64_t, 4>& shape() const { return shape_; }
  std::int64_t numel() const { return numel_; }
  std::size_t bytes() const { return data_.size(); }
  void* data() { return data_.data(); }
  const void* data() const { return data_.data(); }

  float get(std::int64_t i) const;
  void set(std::int64_t i, float value);  // rounds to the dtype (nearest even)
  TensorView view();  // a CPU view over this memory
  std::string shape_string() const;  // "[1, 4096, 24, 128]"

 private:
  DType dtype_ = DType::kFloat32;
  std::array<std::int64_t, 4> shape_{};
  std::int64_t numel_ = 0;
  std::vector<std::byte> data_;
};

// Element `i` of a C-order array of `dtype` (fp64, fp32, fp16 or bf16) as a float.
float read_as_float(DType dtype, const std::byte* data, std::int64_t i);

// Whether the run can hold activations of this dtype (fp32, fp16, bf16).
bool is_activation_dtype(DType dtype);

}  // namespace diffattn::runner
