#pragma once
// Programmatic dependent launch (sm_90 and newer): a kernel launched with `dependent` set may start
// while the kernel before it on the stream is still running, once every block of that kernel has
// called allow_dependents_to_start() or exited. It must call wait_for_prior_kernel() before it reads
// anything the kernel before it writes, and before it writes anything that kernel (or any earlier
// one) still reads; what it does before (its prologue, loads of the caller's inputs that no earlier
// kernel of the same call writes) overlaps the earlier kernel's last wave and the launch latency.
// wait_for_prior_kernel() returns at once in a kernel launched without the attribute, and both are
// no-ops below sm_90, where the attribute is never set (launch_maybe_dependent).
//
// Only a kernel that calls allow_dependents_to_start() (or a caller's kernel that does the same)
// lets the next one start early; diffattn's kernels call it only where the next kernel is their own
// call's. A dependent kernel that may be its call's first (FLASH_ATTN's) waits before it touches
// memory as every dependent kernel does, so no call reads what the caller's earlier work has not
// finished writing, nor writes what it still reads. The environment
// variable DIFFATTN_DEPENDENT_LAUNCH=0 turns the attribute off (every launch then waits for the
// kernel before it, as a plain launch does), for A/B runs or a driver that mishandles it.

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/dependent_launch.h"

namespace diffattn::cuda {

__device__ __forceinline__ void wait_for_prior_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents_to_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the dependent-launch attribute where
// `dependent` is set (the caller sets it on sm_90 and newer only).
template <class... Params, class... Args>
cudaError_t launch_maybe_dependent(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                                   cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent && dependent_launch_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace diffattn::cuda
