#include "runner/host_tensor.h"

#include <cstring>

#include "kernels/cpu/half_convert.h"

namespace diffattn::runner {

HostTensor::HostTensor(DType dtype, std::array<std::int64_t, 4> shape)
    : dtype_(dtype), shape_(shape), numel_(shape[0] * shape[1] * shape[2] * shape[3]),
      data_(static_cast<std::size_t>(numel_) * dtype_size(dtype)) {}

float read_as_float(DType dtype, const std::byte* data, std::int64_t i) {
  switch (dtype) {
    case DType::kFloat16: {
      std::uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return cpu::half_to_float(h);
    }
    case DType::kBFloat16: {
      std::uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return cpu::bf16_to_float(h);
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, data + i * 8, 8);
      return static_cast<float>(d);
    }
    default: {
      float f;
      std::memcpy(&f, data + i * 4, 4);
      return f;
    }
  }
}

float HostTensor::get(std::int64_t i) const { return read_as_float(dtype_, data_.data(), i); }

void HostTensor::set(std::int64_t i, float value) {
  std::byte* p = data_.data();
  switch (dtype_) {
    case DType::kFloat16: {
      const std::uint16_t h = cpu::float_to_half(value);
      std::memcpy(p + i * 2, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      const std::uint16_t h = cpu::float_to_bf16(value);
      std::memcpy(p + i * 2, &h, 2);
      break;
    }
    default:
      std::memcpy(p + i * 4, &value, 4);
  }
}

TensorView HostTensor::view() {
  return TensorView::Contiguous(data_.data(), dtype_, {shape_[0], shape_[1], shape_[2], shape_[3]});
}

std::string HostTensor::shape_string() const {
  return "[" + std::to_string(shape_[0]) + ", " + std::to_string(shape_[1]) + ", " + std::to_string(shape_[2]) + ", " +
         std::to_string(shape_[3]) + "]";
}

bool is_activation_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

}  // namespace diffattn::runner
