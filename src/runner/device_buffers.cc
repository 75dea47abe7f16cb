#include "runner/device_buffers.h"

#include <chrono>
#include <string>
#include <utility>

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace diffattn::runner {
namespace {

#if DIFFATTN_HAVE_CUDA
Status check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::Ok();
  return CudaError(std::string(call) + " failed: " + cudaGetErrorString(err) +
                   "; check that the GPU has free memory (nvidia-smi) or run with --platform cpu");
}
#else
Status no_cuda(const char* what) {
  return Unavailable(std::string(what) + " needs a CUDA build of diffattn; this build has none, run with --platform cpu");
}
#endif

}  // namespace

DeviceBuffer::~DeviceBuffer() {
#if DIFFATTN_HAVE_CUDA
  if (data_) cudaFree(data_);
#endif
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
#if DIFFATTN_HAVE_CUDA
  DeviceBuffer buffer;
  DIFFATTN_RETURN_IF_ERROR(check(cudaMalloc(&buffer.data_, bytes), "cudaMalloc"));
  buffer.bytes_ = bytes;
  return buffer;
#else
  (void)bytes;
  return no_cuda("allocating device memory");
#endif
}

Status DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) return Internal("upload of " + std::to_string(bytes) + " bytes into a smaller device buffer");
#if DIFFATTN_HAVE_CUDA
  return check(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
#else
  (void)host;
  return no_cuda("copying to the device");
#endif
}

Status DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) return Internal("download of " + std::to_string(bytes) + " bytes from a smaller device buffer");
#if DIFFATTN_HAVE_CUDA
  return check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
#else
  (void)host;
  return no_cuda("copying from the device");
#endif
}

Status DeviceBuffer::poison() {
#if DIFFATTN_HAVE_CUDA
  return check(cudaMemset(data_, 0xff, bytes_), "cudaMemset");
#else
  return no_cuda("writing device memory");
#endif
}

Result<double> time_call_ms(bool on_device, const std::function<Status()>& fn) {
  if (!on_device) {
    const auto start = std::chrono::steady_clock::now();
    DIFFATTN_RETURN_IF_ERROR(fn());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
#if DIFFATTN_HAVE_CUDA
  cudaEvent_t start, stop;
  DIFFATTN_RETURN_IF_ERROR(check(cudaEventCreate(&start), "cudaEventCreate"));
  DIFFATTN_RETURN_IF_ERROR(check(cudaEventCreate(&stop), "cudaEventCreate"));
  Status status = check(cudaEventRecord(start), "cudaEventRecord");
  if (status.ok()) status = fn();
  if (status.ok()) status = check(cudaEventRecord(stop), "cudaEventRecord");
  if (status.ok()) status = check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  if (status.ok()) status = check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  return static_cast<double>(ms);
#else
  return no_cuda("timing device work");
#endif
}

}  // namespace diffattn::runner
