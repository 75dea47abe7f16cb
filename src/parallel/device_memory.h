#pragma once
// Buffers and copies on the host or a CUDA device: the parallel layer moves whole rows of heads
// between layouts with strided 2-D copies (cudaMemcpy2DAsync on a device), so it needs no kernels.

#include <cstddef>
#include <cstdint>

#include "diffattn/status.h"
#include "diffattn/tensor.h"

namespace diffattn::parallel {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  // Zero-filled, so that rows nothing writes (padding) hold finite values.
  static Result<DeviceBuffer> Zeros(Device device, std::size_t bytes);

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

// `rows` rows of `width` bytes: row i from src + i * src_pitch to dst + i * dst_pitch.
Status copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
                 std::size_t rows, DeviceKind device, void* stream);
Status fill_bytes(void* dst, int value, std::size_t bytes, DeviceKind device, void* stream);
// Host copies of device bytes and back (masks and small tables), synchronous on `stream`.
Status copy_to_device(void* dst, const void* host, std::size_t bytes, DeviceKind device, void* stream);
Status copy_to_host(void* host, const void* src, std::size_t bytes, DeviceKind device, void* stream);
Status synchronize(DeviceKind device, void* stream);

}  // namespace diffattn::parallel
