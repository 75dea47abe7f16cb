#pragma once
// Device memory for the runner's activations and outputs, and the clock that times one call.
// In a build without CUDA every device operation returns kUnavailable.

#include <cstddef>
#include <functional>

#include "diffattn/status.h"

namespace diffattn::runner {

// Owns one cudaMalloc allocation; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static Result<DeviceBuffer> allocate(std::size_t bytes);
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Status upload(const void* host, std::size_t bytes);
  Status download(void* host, std::size_t bytes) const;
  // Fills with 0xff bytes (NaN in every float dtype) so elements a backend never writes show.
  Status poison();

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Milliseconds one call of `fn` takes: CUDA events around it on the default stream for device
// work, a steady clock for host work. The call's own status is returned when it fails.
Result<double> time_call_ms(bool on_device, const std::function<Status()>& fn);

}  // namespace diffattn::runner
