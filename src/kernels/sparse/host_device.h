#pragma once
// DIFFATTN_HOST_DEVICE marks the plain arithmetic that host code and CUDA kernels share (the sparse
// backends' tilings), so that both evaluate one definition.

#if defined(__CUDACC__)
#define DIFFATTN_HOST_DEVICE __host__ __device__
#else
#define DIFFATTN_HOST_DEVICE
#endif
