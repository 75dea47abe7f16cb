// Does the H200 run tensor-core products and other math side by side? One warpgroup per SM issues
// back-to-back wgmma (a K loop on one accumulator, A from shared memory or from registers) while
// two other warpgroups run independent chains of MUFU ex2, FFMA or FMNMX. Each part is timed
// alone and together: if the parts overlap, together ≈ the longer one; if they exclude each other,
// together ≈ the sum.
//
// Build from the repository root: nvcc -std=c++20 -O3 -Isrc -gencode=arch=compute_90a,code=sm_90a
//        dev/overlap_probe.cu -o build/dev/overlap_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "kernels/cuda/flash/hopper_ptx.cuh"
#include "kernels/cuda/flash/wgmma_ops.cuh"

namespace ptx = diffattn::flash::ptx;
using diffattn::flash::Wgmma;

enum Alu { kNone = 0, kMufu = 1, kFfma = 2, kFmnmx = 3 };

template <bool kTensor, bool kRs, int kAlu>
__global__ void __launch_bounds__(384, 1) probe(float* out, int tensor_iters, int alu_iters) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  for (int i = threadIdx.x; i < 32768 / 4; i += blockDim.x)
    reinterpret_cast<float*>(smem)[i] = 0.f;  // bf16 zero pairs: finite products
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float acc = 0.f;
  if (wg == 0 && kTensor) {
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    const uint64_t da = ptx::make_smem_desc_sw128(ptx::smem_addr(smem), 16, 1024);
    const uint64_t db = ptx::make_smem_desc_sw128(ptx::smem_addr(smem + 8192), 16, 1024);
    const uint32_t a[4] = {threadIdx.x, threadIdx.x, threadIdx.x, threadIdx.x};
    for (int it = 0; it < tensor_iters; ++it) {
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (kRs) {
          float (&d64)[32] = *reinterpret_cast<float(*)[32]>(d);
          Wgmma<64>::rs<true>(d64, a, ptx::smem_desc_advance(db, kk * 2048), 1);
          float (&d64b)[32] = *reinterpret_cast<float(*)[32]>(d + 32);
          Wgmma<64>::rs<true>(d64b, a, ptx::smem_desc_advance(db, kk * 2048 + 1024), 1);
        } else {
          Wgmma<128>::ss<true>(d, ptx::smem_desc_advance(da, kk * 32), ptx::smem_desc_advance(db, kk * 32), 1);
        }
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();
    }
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) acc += d[i];
  } else if (wg > 0 && kAlu != kNone) {
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = 0.01f * (threadIdx.x + j);
    for (int it = 0; it < alu_iters; ++it) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        if constexpr (kAlu == kMufu) v[j] = ptx::exp2_approx(-v[j]);
        if constexpr (kAlu == kFfma) v[j] = fmaf(v[j], 0.999f, 0.001f);
        if constexpr (kAlu == kFmnmx) v[j] = fmaxf(v[j], v[(j + 1) % 16] - 0.f);
      }
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) acc += v[j];
  }
  if (acc == 123.456f) out[threadIdx.x] = acc;  // keeps the work; never true in practice
#endif
}

template <bool kTensor, bool kRs, int kAlu>
float run(const char* name, int tensor_iters, int alu_iters, float* out, int sms) {
  auto k = probe<kTensor, kRs, kAlu>;
  const int smem = 32768 + 1024;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  k<<<sms, 384, smem>>>(out, tensor_iters, alu_iters);
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(a);
    k<<<sms, 384, smem>>>(out, tensor_iters, alu_iters);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, a, b);
    best = ms < best ? ms : best;
  }
  const cudaError_t err = cudaGetLastError();
  std::printf("%-28s %8.3f ms%s\n", name, best, err == cudaSuccess ? "" : cudaGetErrorString(err));
  return best;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out = nullptr;
  cudaMalloc(&out, 4096);
  const int ti = 8000;  // 64x128x64 per iteration: 1 MFLOP per SM
  // Per SM sub-partition and iteration: two warps x 16 MUFU (8 cycles each), FFMA (1-2), FMNMX (2).
  const int mi = 8000, fi = 32000, xi = 32000;
  std::printf("SMs %d; tensor work %.1f TFLOP\n", sms, 2.0 * 64 * 128 * 64 * ti * sms / 1e12);
  const float t = run<true, false, kNone>("tensor (ss) alone", ti, 0, out, sms);
  const float tr = run<true, true, kNone>("tensor (rs) alone", ti, 0, out, sms);
  const float m = run<false, false, kMufu>("mufu alone", 0, mi, out, sms);
  const float f = run<false, false, kFfma>("ffma alone", 0, fi, out, sms);
  const float x = run<false, false, kFmnmx>("fmnmx alone", 0, xi, out, sms);
  const float tm = run<true, false, kMufu>("tensor (ss) + mufu", ti, mi, out, sms);
  const float trm = run<true, true, kMufu>("tensor (rs) + mufu", ti, mi, out, sms);
  const float tf = run<true, false, kFfma>("tensor (ss) + ffma", ti, fi, out, sms);
  const float tx = run<true, false, kFmnmx>("tensor (ss) + fmnmx", ti, xi, out, sms);
  std::printf("tensor rate alone: %.0f TFLOP/s (ss), %.0f (rs)\n", 2.0 * 64 * 128 * 64 * ti * sms / t / 1e9,
              2.0 * 64 * 128 * 64 * ti * sms / tr / 1e9);
  std::printf("mufu rate alone: %.2f Tex2/s\n", 256.0 * 16 * mi * sms / m / 1e9);
  auto verdict = [](const char* n, float both, float p, float q) {
    std::printf("%-20s together %.3f ms; max %.3f, sum %.3f -> overlap %.0f %%\n", n, both, p > q ? p : q, p + q,
                100.0 * (p + q - both) / (p < q ? p : q));
  };
  verdict("tensor(ss)+mufu", tm, t, m);
  verdict("tensor(rs)+mufu", trm, tr, m);
  verdict("tensor(ss)+ffma", tf, t, f);
  verdict("tensor(ss)+fmnmx", tx, t, x);
  return 0;
}
