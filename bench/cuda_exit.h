#pragma once
// The GPU benchmark programs' check of a CUDA runtime call: a failure names the call and where it
// was made, and ends the program (a benchmark has nothing to fall back to).

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(call)                                                                            \
  do {                                                                                              \
    const cudaError_t check_cuda_error_ = (call);                                                   \
    if (check_cuda_error_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                    \
                   cudaGetErrorString(check_cuda_error_));                                          \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)
