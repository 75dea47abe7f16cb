// Device probe for the TORCH_SDPA CUDA kernels: checks tile variants of the tensor-core kernel
// against the SIMT kernel and a float64 host reference on random inputs, then times them.
// Build from the repository root (dev/README.md has the command) and run on the GPU machine.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/sdpa_mma_launch.cuh"

using namespace diffattn;
using namespace diffattn::cuda;

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("CUDA %s: %s\n", #x, cudaGetErrorString(e)); std::exit(1);} } while (0)
#define CHECK_OK(x) do { Status s = (x); if (!s.ok()) { std::printf("FAIL %s: %s\n", #x, s.message().c_str()); std::exit(1);} } while (0)

struct Buffers {
  int B, S, Skv, H, Hkv, D;
  __nv_bfloat16 *q, *k, *v, *o, *o_ref;
  float* lse;
  std::vector<__nv_bfloat16> hq, hk, hv;
};

static Buffers make(int B, int S, int Skv, int H, int Hkv, int D, unsigned seed) {
  Buffers b{B, S, Skv, H, Hkv, D};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<__nv_bfloat16>& h, size_t n) { h.resize(n); for (auto& x : h) x = __float2bfloat16(nd(rng)); };
  fill(b.hq, size_t(B) * S * H * D);
  fill(b.hk, size_t(B) * Skv * Hkv * D);
  fill(b.hv, size_t(B) * Skv * Hkv * D);
  CHECK_CUDA(cudaMalloc(&b.q, b.hq.size() * 2));
  CHECK_CUDA(cudaMalloc(&b.k, b.hk.size() * 2));
  CHECK_CUDA(cudaMalloc(&b.v, b.hv.size() * 2));
  CHECK_CUDA(cudaMalloc(&b.o, b.hq.size() * 2));
  CHECK_CUDA(cudaMalloc(&b.o_ref, b.hq.size() * 2));
  CHECK_CUDA(cudaMalloc(&b.lse, size_t(B) * H * S * 4));
  CHECK_CUDA(cudaMemcpy(b.q, b.hq.data(), b.hq.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b.k, b.hk.data(), b.hk.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b.v, b.hv.data(), b.hv.size() * 2, cudaMemcpyHostToDevice));
  return b;
}

static SdpaParams params(const Buffers& b, __nv_bfloat16* out, bool causal, const uint8_t* mask) {
  SdpaParams p;
  p.dtype = DType::kBFloat16;
  p.q = b.q; p.k = b.k; p.v = b.v; p.out = out; p.lse = b.lse;
  p.q_batch_stride = int64_t(b.S) * b.H * b.D; p.q_row_stride = int64_t(b.H) * b.D; p.q_head_stride = b.D;
  p.o_batch_stride = p.q_batch_stride; p.o_row_stride = p.q_row_stride; p.o_head_stride = b.D;
  p.k_batch_stride = int64_t(b.Skv) * b.Hkv * b.D; p.k_row_stride = int64_t(b.Hkv) * b.D; p.k_head_stride = b.D;
  p.v_batch_stride = p.k_batch_stride; p.v_row_stride = p.k_row_stride; p.v_head_stride = b.D;
  p.lse_batch_stride = int64_t(b.H) * b.S; p.lse_head_stride = b.S; p.lse_row_stride = 1;
  p.batch = b.B; p.heads_q = b.H; p.heads_kv = b.Hkv; p.seqlen_q = b.S; p.seqlen_kv = b.Skv;
  p.head_dim = b.D; p.head_dim_v = b.D;
  p.scale = 1.f / std::sqrt(float(b.D)); p.scale_log2 = p.scale * 1.4426950408889634f;
  p.causal = causal;
  if (mask) { p.mask = mask; p.mask_batch_stride = b.Skv; p.mask_col_stride = 1; }
  return p;
}

static double rel_l2(const std::vector<__nv_bfloat16>& a, const std::vector<__nv_bfloat16>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = __bfloat162float(a[i]), y = __bfloat162float(ref[i]);
    if (!std::isfinite(x)) return INFINITY;
    num += (x - y) * (x - y); den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// float64 reference for a few rows of head 0 / batch 0.
static double host_check(const Buffers& b, const std::vector<__nv_bfloat16>& out, bool causal, const std::vector<uint8_t>& mask) {
  double worst = 0;
  for (int i : {0, 1, b.S / 3, b.S - 1}) {
    for (int h : {0, b.H - 1}) {
      int hk = h / (b.H / b.Hkv);
      std::vector<double> s(b.Skv);
      double mx = -INFINITY;
      for (int j = 0; j < b.Skv; ++j) {
        bool keep = !(causal && j > i) && (mask.empty() || mask[j]);
        double acc = 0;
        for (int d = 0; d < b.D; ++d) acc += double(__bfloat162float(b.hq[(size_t(i) * b.H + h) * b.D + d])) * __bfloat162float(b.hk[(size_t(j) * b.Hkv + hk) * b.D + d]);
        s[j] = keep ? acc / std::sqrt(double(b.D)) : -INFINITY;
        mx = std::max(mx, s[j]);
      }
      double l = 0;
      for (int j = 0; j < b.Skv; ++j) { s[j] = std::exp(s[j] - mx); l += s[j]; }
      double num = 0, den = 0;
      for (int d = 0; d < b.D; ++d) {
        double o = 0;
        for (int j = 0; j < b.Skv; ++j) o += s[j] * __bfloat162float(b.hv[(size_t(j) * b.Hkv + hk) * b.D + d]);
        o /= l;
        double got = __bfloat162float(out[(size_t(i) * b.H + h) * b.D + d]);
        num += (got - o) * (got - o); den += o * o;
      }
      worst = std::max(worst, std::sqrt(num / den));
    }
  }
  return worst;
}

template <int D, int BN, int W, int MT = 1>
static void check_and_time(const char* label, bool time_it) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool causal = variant == 1;
    const bool masked = variant == 2;
    Buffers b = make(1, 1000, masked ? 777 : 1000, 4, 2, D, 1234 + variant);
    std::vector<uint8_t> hmask;
    uint8_t* dmask = nullptr;
    if (masked) {
      hmask.resize(b.Skv);
      std::mt19937 rng(99);
      for (auto& m : hmask) m = (rng() % 4) != 0;
      CHECK_CUDA(cudaMalloc(&dmask, b.Skv));
      CHECK_CUDA(cudaMemcpy(dmask, hmask.data(), b.Skv, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaMemset(b.o, 0xff, b.hq.size() * 2));
    CHECK_OK((launch_mma_tile<__nv_bfloat16, D, BN, W, MT>(params(b, b.o, causal, dmask), nullptr)));
    CHECK_OK(launch_sdpa_generic(params(b, b.o_ref, causal, dmask), nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> o(b.hq.size()), r(b.hq.size());
    CHECK_CUDA(cudaMemcpy(o.data(), b.o, o.size() * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(r.data(), b.o_ref, r.size() * 2, cudaMemcpyDeviceToHost));
    std::printf("%-16s %-7s relL2 vs SIMT %.2e, vs f64 (rows) %.2e\n", label, causal ? "causal" : masked ? "mask" : "dense",
                rel_l2(o, r), host_check(b, o, causal, hmask));
    cudaFree(b.q); cudaFree(b.k); cudaFree(b.v); cudaFree(b.o); cudaFree(b.o_ref); cudaFree(b.lse);
    if (dmask) cudaFree(dmask);
  }
  if (!time_it) return;
  const int H = D == 64 ? 32 : D == 256 ? 8 : 24;
  const int S = 16384;
  Buffers b = make(1, S, S, H, H, D, 7);
  SdpaParams p = params(b, b.o, false, nullptr);
  p.lse = nullptr;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) CHECK_OK((launch_mma_tile<__nv_bfloat16, D, BN, W, MT>(p, nullptr)));
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    cudaEventRecord(e0);
    CHECK_OK((launch_mma_tile<__nv_bfloat16, D, BN, W, MT>(p, nullptr)));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t; cudaEventElapsedTime(&t, e0, e1); ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  double flops = 4.0 * H * double(S) * S * D;
  std::printf("TIME %-16s S=%d H=%d D=%d: %.3f ms  %.1f TFLOP/s\n", label, S, H, D, ms[5], flops / ms[5] * 1e-9);
  cudaFree(b.q); cudaFree(b.k); cudaFree(b.v); cudaFree(b.o); cudaFree(b.o_ref); cudaFree(b.lse);
}

int main() {
  check_and_time<128, 64, 4>("d128 n64 w4", true);
  check_and_time<128, 32, 4, 2>("d128 n32 w4 m2", true);
  check_and_time<128, 32, 8, 2>("d128 n32 w8 m2", true);
  check_and_time<64, 128, 4>("d64 n128 w4", true);
  check_and_time<64, 64, 4, 2>("d64 n64 w4 m2", true);
  check_and_time<64, 32, 4, 2>("d64 n32 w4 m2", true);
  check_and_time<256, 32, 4>("d256 n32 w4", true);
  check_and_time<256, 16, 4>("d256 n16 w4", true);
  check_and_time<96, 64, 4>("d96 n64 w4", false);
  return 0;
}
