#pragma once
// Mirrors a parity case's host buffers on a CUDA device: every view of the problem is re-pointed
// at the same offset of the device copy, outputs come back into the host buffers for comparison
// with the oracle. Only used where DIFFATTN_HAVE_CUDA is set.

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "parity/cases.h"
#include "parity/fresh_rng.h"
#include "parity/host_tensors.h"

namespace diffattn::testing {

inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Device 0 is an sm_90 GPU (the Hopper kernels' own tests skip elsewhere).
inline bool hopper_present() {
  if (!cuda_device_present()) return false;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

// A device from sm_80 on: the mma.sync kernels run there (compute_80 code JIT-compiled on newer GPUs).
inline bool sm80_or_newer_present() {
  if (!cuda_device_present()) return false;
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  return major >= 8;
}

class DeviceCase {
 public:
  explicit DeviceCase(CaseData& host) : host_(host) {
    for (auto& buffer : host.buffers) {
      void* device = nullptr;
      ok_ = ok_ && cudaMalloc(&device, buffer->size_bytes()) == cudaSuccess;
      ok_ = ok_ && cudaMemcpy(device, buffer->data(), buffer->size_bytes(), cudaMemcpyHostToDevice) == cudaSuccess;
      device_.push_back(device);
    }
    problem_ = host.problem;
    for (TensorView* view : views(problem_)) repoint(*view);
  }
  ~DeviceCase() {
    for (void* p : device_) cudaFree(p);
  }
  DeviceCase(const DeviceCase&) = delete;
  DeviceCase& operator=(const DeviceCase&) = delete;

  bool ok() const { return ok_; }
  const AttentionProblem& problem() const { return problem_; }

  // Copies every device buffer back over its host twin (outputs included), after a sync.
  bool copy_back() {
    if (cudaDeviceSynchronize() != cudaSuccess) return false;
    for (std::size_t i = 0; i < device_.size(); ++i) {
      auto& buffer = host_.buffers[i];
      if (cudaMemcpy(buffer->data(), device_[i], buffer->size_bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    }
    return true;
  }

 private:
  static std::vector<TensorView*> views(AttentionProblem& p) {
    std::vector<TensorView*> v = {&p.q, &p.k, &p.v, &p.out};
    for (auto* opt : {&p.mask, &p.lse, &p.cu_seqlens_q, &p.cu_seqlens_k, &p.gate})
      if (opt->has_value()) v.push_back(&**opt);
    return v;
  }

  void repoint(TensorView& view) {
    const auto* ptr = static_cast<const std::byte*>(view.data);
    for (std::size_t i = 0; i < host_.buffers.size(); ++i) {
      const auto* base = static_cast<const std::byte*>(host_.buffers[i]->data());
      if (ptr >= base && ptr < base + host_.buffers[i]->size_bytes()) {
        view.data = static_cast<std::byte*>(device_[i]) + (ptr - base);
        view.device = Device{DeviceKind::kCuda, 0};
        return;
      }
    }
    ok_ = false;
  }

  CaseData& host_;
  std::vector<void*> device_;
  AttentionProblem problem_;
  bool ok_ = true;
};

// A [B, S, H, D] output's elements, in (b, s, h, e) order.
inline std::vector<double> output_values(const TensorView& out) {
  std::vector<double> v;
  for (std::int64_t b = 0; b < out.size(0); ++b)
    for (std::int64_t i = 0; i < out.size(1); ++i)
      for (std::int64_t h = 0; h < out.size(2); ++h)
        for (std::int64_t e = 0; e < out.size(3); ++e) v.push_back(read_element(out, element_offset(out, {b, i, h, e})));
  return v;
}

// ||x - ref|| / ||ref|| (the absolute norm where ref is all zero).
inline double relative_l2(const std::vector<double>& x, const std::vector<double>& ref) {
  double d = 0, r = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d += (x[i] - ref[i]) * (x[i] - ref[i]), r += ref[i] * ref[i];
  return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}

}  // namespace diffattn::testing
