#pragma once
// A non-owning strided view: the library's own small tensor type. It converts to and from
// DLPack so that PyTorch, JAX and CuPy tensors pass in without copies.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include <dlpack/dlpack.h>

#include "diffattn/dtype.h"
#include "diffattn/status.h"

namespace diffattn {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline constexpr int kMaxDims = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Device device;
  int ndim = 0;
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> strides{};  // in elements, not bytes

  std::int64_t size(int dim) const { return shape[dim]; }
  std::int64_t stride(int dim) const { return strides[dim]; }
  std::int64_t numel() const;
  bool is_contiguous() const;
  // Bytes from the first to one past the last addressable element (the span a kernel may touch).
  std::int64_t span_bytes() const;
  std::string shape_string() const;  // "[1, 4096, 24, 128]"

  // A row-major contiguous view over `data`.
  static TensorView Contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               Device device = {});
};

// DLPack interop. from_dlpack rejects byte offsets that break alignment, unsupported dtypes and
// more than kMaxDims dimensions with an error that says so.
Result<TensorView> from_dlpack(const DLTensor& tensor);
// The returned DLTensor points into `view`'s shape/stride arrays: keep `view` alive while it is used.
DLTensor to_dlpack(TensorView& view);

}  // namespace diffattn
