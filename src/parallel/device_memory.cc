#include "parallel/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace diffattn::parallel {
namespace {

#if DIFFATTN_HAVE_CUDA
Status cuda_ok(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::Ok();
  return CudaError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}
#else
Status no_cuda() {
  return Unavailable("this diffattn build has no CUDA (nvcc was not found when it was built); run sequence "
                     "parallelism on CPU tensors or rebuild with the CUDA toolkit");
}
#endif

}  // namespace

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  std::swap(device_, other.device_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  if (device_.kind == DeviceKind::kCpu) {
    std::free(data_);
    return;
  }
#if DIFFATTN_HAVE_CUDA
  cudaFree(data_);
#endif
}

Result<DeviceBuffer> DeviceBuffer::Zeros(Device device, std::size_t bytes) {
  DeviceBuffer b;
  b.device_ = device;
  b.bytes_ = bytes;
  const std::size_t alloc = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (device.kind == DeviceKind::kCpu) {
    b.data_ = std::aligned_alloc(64, alloc);
    if (!b.data_) return Internal("could not allocate " + std::to_string(bytes) + " bytes of host memory");
    std::memset(b.data_, 0, alloc);
    return b;
  }
#if DIFFATTN_HAVE_CUDA
  // On the buffer's device, whichever device the calling thread had current (restored after).
  int current = 0;
  DIFFATTN_RETURN_IF_ERROR(cuda_ok(cudaGetDevice(&current), "cudaGetDevice"));
  if (current != device.index) DIFFATTN_RETURN_IF_ERROR(cuda_ok(cudaSetDevice(device.index), "cudaSetDevice"));
  Status made = cuda_ok(cudaMalloc(&b.data_, alloc), "cudaMalloc");
  if (made.ok()) made = cuda_ok(cudaMemset(b.data_, 0, alloc), "cudaMemset");
  if (current != device.index) cudaSetDevice(current);
  DIFFATTN_RETURN_IF_ERROR(made);
  return b;
#else
  return no_cuda();
#endif
}

Status copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
                 std::size_t rows, DeviceKind device, void* stream) {
  if (width == 0 || rows == 0) return Status::Ok();
  if (device == DeviceKind::kCpu) {
    if (dst_pitch == width && src_pitch == width) {
      std::memcpy(dst, src, width * rows);
      return Status::Ok();
    }
    for (std::size_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<char*>(dst) + i * dst_pitch, static_cast<const char*>(src) + i * src_pitch, width);
    return Status::Ok();
  }
#if DIFFATTN_HAVE_CUDA
  return cuda_ok(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice,
                                   static_cast<cudaStream_t>(stream)),
                 "cudaMemcpy2DAsync");
#else
  (void)stream;
  return no_cuda();
#endif
}

Status fill_bytes(void* dst, int value, std::size_t bytes, DeviceKind device, void* stream) {
  if (bytes == 0) return Status::Ok();
  if (device == DeviceKind::kCpu) {
    std::memset(dst, value, bytes);
    return Status::Ok();
  }
#if DIFFATTN_HAVE_CUDA
  return cuda_ok(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
#else
  (void)stream;
  return no_cuda();
#endif
}

Status copy_to_device(void* dst, const void* host, std::size_t bytes, DeviceKind device, void* stream) {
  if (bytes == 0) return Status::Ok();
  if (device == DeviceKind::kCpu) {
    std::memcpy(dst, host, bytes);
    return Status::Ok();
  }
#if DIFFATTN_HAVE_CUDA
  auto s = static_cast<cudaStream_t>(stream);
  DIFFATTN_RETURN_IF_ERROR(cuda_ok(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync"));
  return cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
#else
  (void)stream;
  return no_cuda();
#endif
}

Status copy_to_host(void* host, const void* src, std::size_t bytes, DeviceKind device, void* stream) {
  if (bytes == 0) return Status::Ok();
  if (device == DeviceKind::kCpu) {
    std::memcpy(host, src, bytes);
    return Status::Ok();
  }
#if DIFFATTN_HAVE_CUDA
  auto s = static_cast<cudaStream_t>(stream);
  DIFFATTN_RETURN_IF_ERROR(cuda_ok(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync"));
  return cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
#else
  (void)stream;
  return no_cuda();
#endif
}

Status synchronize(DeviceKind device, void* stream) {
  if (device == DeviceKind::kCpu) return Status::Ok();
#if DIFFATTN_HAVE_CUDA
  return cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
#else
  (void)stream;
  return no_cuda();
#endif
}

}  // namespace diffattn::parallel
