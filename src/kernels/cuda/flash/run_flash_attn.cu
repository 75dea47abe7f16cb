// FLASH_ATTN for CUDA views: picks the kernel for the device's architecture, turns the views into
// kernel arguments and launches. Every check runs before the launch.

#include "common/reason.h"
#include "kernels/cuda/flash/run_flash_attn.h"

#include <cuda_runtime.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash/flash_checks.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/dense/sdpa_launch.h"

namespace diffattn::flash {
namespace {

struct DeviceFacts {
  int cc_major = 0, cc_minor = 0, sm_count = 0;
};

// Attributes are read once per device: they cannot change while the process runs.
Result<DeviceFacts> device_facts(int device) {
  static std::mutex mu;
  static std::vector<std::optional<DeviceFacts>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
  if (!cache[device]) {
    DeviceFacts f;
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.cc_major, cudaDevAttrComputeCapabilityMajor, device));
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
    DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, device));
    cache[device] = f;
  }
  return *cache[device];
}

Status check_contiguous_last_dim(const TensorView& t, const char* name) {
  if (t.stride(3) == 1 || t.size(3) <= 1) return Status::Ok();
  return InvalidInput(std::string("FLASH_ATTN needs ") + name + "'s head dimension to be contiguous (stride 1), got " +
                      "stride " + std::to_string(t.stride(3)) + "; pass a contiguous copy of " + name);
}

Status check_on_device(const std::optional<TensorView>& t, const char* name) {
  if (!t || t->device.kind == DeviceKind::kCuda) return Status::Ok();
  return InvalidInput(std::string("FLASH_ATTN reads ") + name + " on the GPU, but it lives on the CPU; copy " + name +
                      " to the device of q");
}

Status status_from(const LaunchStatus& s) {
  switch (s.code) {
    case LaunchStatus::kOk: return Status::Ok();
    case LaunchStatus::kUnsupported: return Unsupported(s.message);
    case LaunchStatus::kInvalidInput: return InvalidInput(s.message);
    case LaunchStatus::kCudaError: return CudaError(s.message);
  }
  return Internal("FLASH_ATTN: unknown launch status");
}

Result<HopperArgs> hopper_args(const AttentionProblem& pr, int sm_count) {
  for (const auto& [t, name] : {std::pair{&pr.q, "q"}, {&pr.k, "k"}, {&pr.v, "v"}, {&pr.out, "out"}})
    DIFFATTN_RETURN_IF_ERROR(check_contiguous_last_dim(*t, name));
  DIFFATTN_RETURN_IF_ERROR(check_on_device(pr.cu_seqlens_q, "cu_seqlens_q"));
  DIFFATTN_RETURN_IF_ERROR(check_on_device(pr.cu_seqlens_k, "cu_seqlens_k"));
  const float scale = pr.softmax_scale();
  if (!(scale > 0.f))
    return Unsupported("FLASH_ATTN needs a positive softmax scale, got " + std::to_string(scale) +
                       "; select TORCH_SDPA for other scales");
  HopperArgs a;
  a.q = pr.q.data;
  a.k = pr.k.data;
  a.v = pr.v.data;
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = pr.q.stride(i);
    a.k_stride[i] = pr.k.stride(i);
    a.v_stride[i] = pr.v.stride(i);
  }
  a.q_rows = pr.q.size(1);
  a.kv_rows = pr.k.size(1);
  a.tma_batch = pr.q.size(0);
  a.bf16 = pr.q.dtype == DType::kBFloat16;
  a.sm_count = sm_count;
  FlashParams& p = a.params;
  p.out = pr.out.data;
  p.out_stride_b = pr.out.stride(0);
  p.out_stride_s = pr.out.stride(1);
  p.out_stride_h = pr.out.stride(2);
  if (pr.lse) {
    p.lse = static_cast<float*>(pr.lse->data);
    p.lse_stride_b = pr.lse->stride(0);
    p.lse_stride_h = pr.lse->stride(1);
    p.lse_stride_s = pr.lse->stride(2);
  }
  if (pr.mask) {
    p.kv_mask = static_cast<const std::uint8_t*>(pr.mask->data);
    p.mask_stride_b = pr.mask->stride(0);
    p.mask_stride_s = pr.mask->stride(1);
  }
  p.heads_q = static_cast<int>(pr.q.size(2));
  p.heads_kv = static_cast<int>(pr.k.size(2));
  p.head_size = static_cast<int>(pr.q.size(3));
  p.scale_log2 = scale * 1.4426950408889634f;
  p.causal = pr.causal;
  if (pr.is_varlen()) {
    p.cu_seqlens_q = static_cast<const int*>(pr.cu_seqlens_q->data);
    p.cu_seqlens_k = static_cast<const int*>(pr.cu_seqlens_k->data);
    p.batch = static_cast<int>(pr.cu_seqlens_q->size(0) - 1);
    // Without the maxima every packed row bounds a sequence; tiles past a sequence's end are skipped.
    p.seqlen_q = static_cast<int>(pr.max_seqlen_q > 0 ? pr.max_seqlen_q : pr.q.size(1));
    p.seqlen_k = static_cast<int>(pr.max_seqlen_k > 0 ? pr.max_seqlen_k : pr.k.size(1));
    a.tma_batch = 1;
  } else {
    p.batch = static_cast<int>(pr.q.size(0));
    p.seqlen_q = static_cast<int>(pr.q.size(1));
    p.seqlen_k = static_cast<int>(pr.k.size(1));
  }
  return a;
}

Status run_ampere(const AttentionProblem& pr, void* stream) {
  DIFFATTN_ASSIGN_OR_RETURN(cuda::SdpaParams params, cuda::make_sdpa_params(pr));
  if (auto reasons = cuda::mma_path_reasons(params); !reasons.empty())
    return Unsupported("FLASH_ATTN's Ampere/Ada kernel cannot run this problem: " + reasons_text(reasons) +
                       "; select TORCH_SDPA");
  return cuda::launch_sdpa_mma(params, stream);
}

// The checks both entry points make before anything runs; `device` stays entered for the launch.
Result<DeviceFacts> enter_device(const AttentionProblem& problem, cuda::ScopedDevice& device) {
  if (problem.q.device.kind != DeviceKind::kCuda)
    return InvalidInput("FLASH_ATTN runs on CUDA tensors, but q lives on the CPU; move q/k/v/out to a GPU or "
                        "select TORCH_SDPA");
  if (auto reasons = flash_shape_reasons(problem.shape()); !reasons.empty()) return Unsupported(reasons_text(reasons));
  DIFFATTN_RETURN_IF_ERROR(device.enter(problem.q.device.index));
  return device_facts(problem.q.device.index);
}

std::string sm_name(const DeviceFacts& facts) { return "sm_" + std::to_string(facts.cc_major * 10 + facts.cc_minor); }

}  // namespace

Status run_flash_attn_cuda(const AttentionProblem& problem, void* stream) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  const auto kernel = flash_kernel_for_capability(facts.cc_major, facts.cc_minor);
  if (!kernel)
    return Unsupported("FLASH_ATTN has kernels for " + architectures_text() + ", but this device is " + sm_name(facts) +
                       "; select CUDNN_ATTN or TORCH_SDPA");
  if (*kernel == FlashKernel::kAmpere) return run_ampere(problem, stream);
  DIFFATTN_ASSIGN_OR_RETURN(HopperArgs args, hopper_args(problem, facts.sm_count));
  return status_from(launch_flash_hopper(args, stream));
}

Status run_flash_attn_ampere_cuda(const AttentionProblem& problem, void* stream) {
  cuda::ScopedDevice device;
  DIFFATTN_ASSIGN_OR_RETURN(DeviceFacts facts, enter_device(problem, device));
  if (facts.cc_major < 8)
    return Unsupported("FLASH_ATTN's Ampere/Ada kernel needs sm_80 or newer, but this device is " + sm_name(facts) +
                       "; select TORCH_SDPA");
  return run_ampere(problem, stream);
}

}  // namespace diffattn::flash
