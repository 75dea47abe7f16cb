// Standalone development harness for the Hopper flash kernel: a correctness suite against an
// fp32 reference kernel (fresh random inputs, poisoned outputs) and timings of DiT workloads,
// each timing checked against the reference on sampled rows (a wrong kernel's time is flagged and
// counted as a failure).
// Build and run from the repository root on the GPU machine (dev/README.md; dev/run_device.sh does both):
//   nvcc -std=c++20 -O3 --expt-relaxed-constexpr -Isrc -Iinclude -gencode=arch=compute_90a,code=sm_90a \
//        dev/flash_dev.cu src/kernels/cuda/flash/flash_hopper.cu -o build/dev/flash_dev
// Usage: flash_dev [check [--case TEXT]] [time] [quick] [variants [--only NAME,NAME]] [--work NAME,NAME] [--shape B,H,SQ,SKV[,D[,CAUSAL[,HKV]]]]... [--rounds N] [--sets N] [--unit-variance] [--csv FILE] [--workloads-file CSV]
// The timed workloads are bench/workloads.csv's (the benchmark's), then the extra cases below.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../bench/workloads.h"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"

using diffattn::flash::HopperArgs;
using diffattn::flash::LaunchStatus;
using diffattn::flash::HopperTraits;

using LaunchFn = LaunchStatus (*)(const HopperArgs&, void*);

LaunchStatus launch_default(const HopperArgs& a, void* s) { return diffattn::flash::launch_flash_hopper(a, s); }

// The configured kernels with whole tiles only (no split of the last partial wave).
LaunchStatus launch_no_split(const HopperArgs& a, void* s) {
  HopperArgs whole = a;
  whole.tail_split = false;
  return diffattn::flash::launch_flash_hopper(whole, s);
}

template <class T>
LaunchStatus launch_variant(const HopperArgs& a, void* s) {
  return diffattn::flash::hopper_detail::launch_with_traits<T>(a, static_cast<cudaStream_t>(s));
}

// Tile variants timed next to the configured one (flash_config.h); D = 0 matches every head size.
struct Variant {
  const char* name;
  int D;
  LaunchFn fn;
};
static const Variant kVariants[] = {
    {"config", 0, launch_default},
    {"config-nosplit", 0, launch_no_split},
    {"bn128-staged", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true>>},
    {"bn128-staged-turns", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true, true>>},
    {"bn128-staged-tma", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true, false, true>>},
    {"bn176-turns", 128, launch_variant<HopperTraits<128, 176, 2, true, 2, false, true>>},
    {"3wg-seq-tma", 128, launch_variant<HopperTraits<128, 128, 2, true, 3, true, false, true, false>>},
    {"wide192", 128, launch_variant<HopperTraits<128, 192, 2, true, 2>>},
    {"hd64-norowsum", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, false>>},
    {"hd64-early", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, true>>},
    {"hd64-seq-rowsum", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, false, true>>},
    {"hd64-seq-rowsum-early", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, false, true, true>>},
    {"3wg-seq-tma-early", 128, launch_variant<HopperTraits<128, 128, 2, true, 3, true, false, true, false, false, true>>},
    {"hd64-poly2", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, false, 2>>},
    {"hd64-poly3", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, false, 3>>},
    {"hd64-poly4", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, false, 4>>},
    {"hd64-poly6", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, false, 6>>},
    {"hd64-poly8", 64, launch_variant<HopperTraits<64, 128, 2, true, 3, true, false, true, true, true, false, 8>>},
    {"bn128-early-poly4", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true, false, true, true, false, true, 4>>},
    {"bn128-early-poly8", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true, false, true, true, false, true, 8>>},
    {"wide192-poly8", 128, launch_variant<HopperTraits<128, 192, 2, true, 2, false, false, false, true, false, false, 8>>},
    {"bn128-staged-tma-early", 128, launch_variant<HopperTraits<128, 128, 2, true, 2, true, false, true, true, false, true>>},
};
static LaunchFn g_launch = launch_default;
// --sets N: timed launches cycle over N input sets (as the benchmark's rotation does), so that
// inputs larger than L2 together are read from DRAM rather than from the previous launch's L2.
static int g_sets = 1;
static std::string g_only;  // --only a,b: the variants to run (besides the configured kernel)

static bool wanted(const Variant& v, bool variants) {
  if (v.fn == launch_default) return true;
  if (!variants) return false;
  return g_only.empty() || ("," + g_only + ",").find(std::string(",") + v.name + ",") != std::string::npos;
}

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

struct Case {
  std::string name;
  int B, Sq, Skv, H, Hkv, D;
  bool causal = false, fp16 = false, mask = false, lse = false, varlen = false, packed_qkv = false;
  // Key masks of padded prompts (with mask = true): 1 keeps the first `keep` of 512 text keys
  // placed first and every key after them (FLUX.1's joint attention), 2 keeps the first `keep`
  // keys (cross-attention to a padded prompt); 0 keeps each key with probability 0.8.
  int text_mask = 0, keep = 0;
  int text_keys = 512;  // text keys of a text-first mask (text_mask = 1)
};

// Exact attention in fp32 for one query row per warp; two passes over the keys.
struct RefArgs {
  const uint16_t *q, *k, *v;
  long long qs[3], ks[3], vs[3];  // b, s, h strides (elements)
  bool bf16;
  int B, H, Hkv, D, Sq, Skv;
  const int *cu_q, *cu_k;
  const uint8_t* mask;
  int mask_sb;
  float scale;
  bool causal;
  int row_step;
  float* out;  // [B, Sq, H, D] (packed: [1, total, H, D])
  float* lse;
};

__device__ float to_f(uint16_t x, bool bf16) {
  if (bf16) return __bfloat162float(__ushort_as_bfloat16(x));
  return __half2float(__ushort_as_half(x));
}

__global__ void reference_kernel(RefArgs a) {
  const int lane = threadIdx.x;
  const int row = blockIdx.x * a.row_step;
  const int h = blockIdx.y, b = blockIdx.z;
  int sq = a.Sq, sk = a.Skv, q0 = 0, k0 = 0, bb = b;
  if (a.cu_q) {
    q0 = a.cu_q[b];
    k0 = a.cu_k[b];
    sq = a.cu_q[b + 1] - q0;
    sk = a.cu_k[b + 1] - k0;
    bb = 0;
  }
  if (row >= sq) return;
  const int hk = h / (a.H / a.Hkv);
  float qv[8];
  for (int i = 0; i < 8; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < a.D ? to_f(a.q[bb * a.qs[0] + (q0 + row) * a.qs[1] + h * a.qs[2] + d], a.bf16) : 0.f;
  }
  auto score = [&](int j, bool& keep) {
    keep = true;
    if (a.causal && j > row) keep = false;
    if (a.mask && a.mask[b * a.mask_sb + j] == 0) keep = false;
    float acc = 0.f;
    for (int i = 0; i < 8; ++i) {
      const int d = lane + 32 * i;
      if (d < a.D) acc += qv[i] * to_f(a.k[bb * a.ks[0] + (k0 + j) * a.ks[1] + hk * a.ks[2] + d], a.bf16);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
    return acc * a.scale;
  };
  float mx = -INFINITY;
  for (int j = 0; j < sk; ++j) {
    bool keep;
    const float s = score(j, keep);
    if (keep) mx = fmaxf(mx, s);
  }
  float l = 0.f, o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (mx != -INFINITY) {
    for (int j = 0; j < sk; ++j) {
      bool keep;
      const float s = score(j, keep);
      if (!keep) continue;
      const float p = expf(s - mx);
      l += p;
      for (int i = 0; i < 8; ++i) {
        const int d = lane + 32 * i;
        if (d < a.D) o[i] += p * to_f(a.v[bb * a.vs[0] + (k0 + j) * a.vs[1] + hk * a.vs[2] + d], a.bf16);
      }
    }
  }
  const long long orow = ((long long)bb * (a.cu_q ? 0 : a.Sq) + q0 + row) * a.H + h;
  for (int i = 0; i < 8; ++i) {
    const int d = lane + 32 * i;
    if (d < a.D) a.out[orow * a.D + d] = l > 0.f ? o[i] / l : 0.f;
  }
  if (lane == 0) a.lse[orow] = l > 0.f ? mx + logf(l) : -INFINITY;
}

// --unit-variance: inputs uniform on [-sqrt(3), sqrt(3)) (variance 1, as the benchmark's
// generator makes them) instead of [-1, 1).
static float g_input_scale = 1.0f;

__global__ void fill_random(uint16_t* p, size_t n, unsigned long long seed, bool bf16, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float u = (x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float val = (u - 0.5f) * 2.0f * scale;
    p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(val)) : __half_as_ushort(__float2half(val));
  }
}

static float host_to_f(uint16_t x, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(x) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half h = __ushort_as_half(x);
  return __half2float(h);
}

struct Buffers {
  uint16_t *qkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  float* lse = nullptr;
  uint8_t* mask = nullptr;
  int *cu_q = nullptr, *cu_k = nullptr;
  long long qs[3], ks[3], vs[3];
  long long q_rows, kv_rows, tma_batch;
  size_t out_elems;
  std::vector<int> hcu_q, hcu_k;
  void free_all() {
    cudaFree(qkv);
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(out);
    cudaFree(lse);
    cudaFree(mask);
    cudaFree(cu_q);
    cudaFree(cu_k);
  }
};

static unsigned long long g_seed = 0x1234567ull;

static Buffers make_buffers(const Case& c, std::mt19937& rng) {
  Buffers bf;
  const bool bf16 = !c.fp16;
  if (c.varlen) {
    std::uniform_int_distribution<int> len_q(1, c.Sq), len_k(1, c.Skv);
    bf.hcu_q.assign(1, 0);
    bf.hcu_k.assign(1, 0);
    for (int b = 0; b < c.B; ++b) {
      bf.hcu_q.push_back(bf.hcu_q.back() + (b == 0 ? c.Sq : len_q(rng)));
      bf.hcu_k.push_back(bf.hcu_k.back() + (b == 0 ? c.Skv : len_k(rng)));
    }
    bf.q_rows = bf.hcu_q.back();
    bf.kv_rows = bf.hcu_k.back();
    bf.tma_batch = 1;
    CHECK_CUDA(cudaMalloc(&bf.cu_q, 4 * (c.B + 1)));
    CHECK_CUDA(cudaMalloc(&bf.cu_k, 4 * (c.B + 1)));
    CHECK_CUDA(cudaMemcpy(bf.cu_q, bf.hcu_q.data(), 4 * (c.B + 1), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(bf.cu_k, bf.hcu_k.data(), 4 * (c.B + 1), cudaMemcpyHostToDevice));
  } else {
    bf.q_rows = c.Sq;
    bf.kv_rows = c.Skv;
    bf.tma_batch = c.B;
  }
  const long long nb = c.varlen ? 1 : c.B;
  if (c.packed_qkv) {
    // One [B, S, 3, H, D] buffer, as a fused QKV projection produces it.
    const size_t n = (size_t)nb * bf.q_rows * 3 * c.H * c.D;
    CHECK_CUDA(cudaMalloc(&bf.qkv, n * 2));
    fill_random<<<1024, 256>>>(bf.qkv, n, g_seed++, bf16, g_input_scale);
    bf.q = bf.qkv;
    bf.k = bf.qkv + (size_t)c.H * c.D;
    bf.v = bf.qkv + (size_t)2 * c.H * c.D;
    const long long ss = 3LL * c.H * c.D;
    long long st[3] = {bf.q_rows * ss, ss, c.D};
    std::memcpy(bf.qs, st, sizeof st);
    std::memcpy(bf.ks, st, sizeof st);
    std::memcpy(bf.vs, st, sizeof st);
  } else {
    const size_t nq = (size_t)nb * bf.q_rows * c.H * c.D, nk = (size_t)nb * bf.kv_rows * c.Hkv * c.D;
    CHECK_CUDA(cudaMalloc(&bf.q, nq * 2));
    CHECK_CUDA(cudaMalloc(&bf.k, nk * 2));
    CHECK_CUDA(cudaMalloc(&bf.v, nk * 2));
    fill_random<<<1024, 256>>>(bf.q, nq, g_seed++, bf16, g_input_scale);
    fill_random<<<1024, 256>>>(bf.k, nk, g_seed++, bf16, g_input_scale);
    fill_random<<<1024, 256>>>(bf.v, nk, g_seed++, bf16, g_input_scale);
    long long qs[3] = {bf.q_rows * c.H * c.D, (long long)c.H * c.D, c.D};
    long long ks[3] = {bf.kv_rows * c.Hkv * c.D, (long long)c.Hkv * c.D, c.D};
    std::memcpy(bf.qs, qs, sizeof qs);
    std::memcpy(bf.ks, ks, sizeof ks);
    std::memcpy(bf.vs, ks, sizeof ks);
  }
  bf.out_elems = (size_t)nb * bf.q_rows * c.H * c.D;
  CHECK_CUDA(cudaMalloc(&bf.out, bf.out_elems * 2));
  CHECK_CUDA(cudaMalloc(&bf.lse, (size_t)nb * c.H * bf.q_rows * 4));
  if (c.mask) {
    std::vector<uint8_t> m((size_t)c.B * c.Skv);
    std::bernoulli_distribution keep(0.8);
    for (auto& x : m) x = keep(rng);
    if (c.text_mask != 0)
      for (int b = 0; b < c.B; ++b)
        for (int j = 0; j < c.Skv; ++j)
          m[(size_t)b * c.Skv + j] = j < c.keep || (c.text_mask == 1 && j >= c.text_keys);
    // With two batches the last masks every key; with more, the first masks every key and the
    // last keeps only its first 30 % (a padded prompt), so split pieces of it see no key at all.
    if (c.B == 2 && c.text_mask == 0)
      for (int j = 0; j < c.Skv; ++j) m[(size_t)(c.B - 1) * c.Skv + j] = 0;
    if (c.B > 2 && c.text_mask == 0)
      for (int j = 0; j < c.Skv; ++j) {
        m[j] = 0;
        if (j >= c.Skv * 3 / 10) m[(size_t)(c.B - 1) * c.Skv + j] = 0;
      }
    CHECK_CUDA(cudaMalloc(&bf.mask, m.size()));
    CHECK_CUDA(cudaMemcpy(bf.mask, m.data(), m.size(), cudaMemcpyHostToDevice));
  }
  return bf;
}

static HopperArgs make_args(const Case& c, const Buffers& bf, int sm_count) {
  HopperArgs a;
  a.q = bf.q;
  a.k = bf.k;
  a.v = bf.v;
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = bf.qs[i];
    a.k_stride[i] = bf.ks[i];
    a.v_stride[i] = bf.vs[i];
  }
  a.q_rows = bf.q_rows;
  a.kv_rows = bf.kv_rows;
  a.tma_batch = bf.tma_batch;
  a.bf16 = !c.fp16;
  a.sm_count = sm_count;
  auto& p = a.params;
  p.out = bf.out;
  p.out_stride_b = bf.q_rows * c.H * c.D;
  p.out_stride_s = (long long)c.H * c.D;
  p.out_stride_h = c.D;
  if (c.lse) {
    p.lse = bf.lse;
    p.lse_stride_b = (long long)c.H * bf.q_rows;
    p.lse_stride_h = bf.q_rows;
    p.lse_stride_s = 1;
  }
  if (c.mask) {
    p.kv_mask = bf.mask;
    p.mask_stride_b = c.Skv;
    p.mask_stride_s = 1;
  }
  p.cu_seqlens_q = bf.cu_q;
  p.cu_seqlens_k = bf.cu_k;
  p.batch = c.B;
  p.heads_q = c.H;
  p.heads_kv = c.Hkv;
  p.seqlen_q = c.Sq;
  p.seqlen_k = c.Skv;
  p.head_size = c.D;
  p.scale_log2 = (1.0f / std::sqrt((float)c.D)) * 1.4426950408889634f;
  p.causal = c.causal;
  return a;
}

struct RefCheck {
  double rel = 0, max_err = 0, lse_err = 0;
  long long nan = 0, lse_bad = 0;
  bool ok(const Case& c) const { return nan == 0 && rel < (c.fp16 ? 2e-3 : 1e-2) && lse_bad == 0 && lse_err < 1e-2; }
};

// Runs the fp32 reference on every row_step-th query row of each sequence (every row of packed
// batches) and compares the kernel's output in bf.out, and its LSE when the case asks for one.
static RefCheck compare_with_reference(const Case& c, const Buffers& bf, int row_step) {
  if (c.varlen) row_step = 1;
  const long long nb = c.varlen ? 1 : c.B;
  float *ref, *ref_lse;
  CHECK_CUDA(cudaMalloc(&ref, bf.out_elems * 4));
  CHECK_CUDA(cudaMalloc(&ref_lse, (size_t)nb * bf.q_rows * c.H * 4));
  RefArgs r{};
  r.q = bf.q;
  r.k = bf.k;
  r.v = bf.v;
  for (int i = 0; i < 3; ++i) {
    r.qs[i] = bf.qs[i];
    r.ks[i] = bf.ks[i];
    r.vs[i] = bf.vs[i];
  }
  r.bf16 = !c.fp16;
  r.B = c.B;
  r.H = c.H;
  r.Hkv = c.Hkv;
  r.D = c.D;
  r.Sq = c.Sq;
  r.Skv = c.Skv;
  r.cu_q = bf.cu_q;
  r.cu_k = bf.cu_k;
  r.mask = bf.mask;
  r.mask_sb = c.Skv;
  r.scale = 1.0f / std::sqrt((float)c.D);
  r.causal = c.causal;
  r.row_step = row_step;
  r.out = ref;
  r.lse = ref_lse;
  reference_kernel<<<dim3((c.Sq + row_step - 1) / row_step, c.H, c.B), 32>>>(r);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> out(bf.out_elems);
  std::vector<float> hr(bf.out_elems), hl((size_t)nb * bf.q_rows * c.H), hlse((size_t)nb * c.H * bf.q_rows);
  CHECK_CUDA(cudaMemcpy(out.data(), bf.out, out.size() * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hl.data(), ref_lse, hl.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hlse.data(), bf.lse, hlse.size() * 4, cudaMemcpyDeviceToHost));
  RefCheck k;
  double num = 0, den = 0;
  const bool bf16 = !c.fp16;
  for (long long b = 0; b < nb; ++b) {
    for (long long s = 0; s < bf.q_rows; s += row_step) {
      for (int h = 0; h < c.H; ++h) {
        const long long row = (b * bf.q_rows + s) * c.H + h;
        for (int d = 0; d < c.D; ++d) {
          const float x = host_to_f(out[row * c.D + d], bf16), y = hr[row * c.D + d];
          if (!std::isfinite(x)) {
            ++k.nan;
            continue;
          }
          num += (x - y) * (double)(x - y);
          den += (double)y * y;
          k.max_err = std::max(k.max_err, (double)std::fabs(x - y));
        }
        if (c.lse) {
          const float got = hlse[(b * c.H + h) * bf.q_rows + s], want = hl[row];
          if (std::isinf(want)) {
            if (!(std::isinf(got) && got < 0)) ++k.lse_bad;
          } else {
            k.lse_err = std::max(k.lse_err, (double)std::fabs(got - want));
          }
        }
      }
    }
  }
  k.rel = std::sqrt(num / std::max(den, 1e-30));
  cudaFree(ref);
  cudaFree(ref_lse);
  return k;
}

static bool check_case(const Case& c, int sm_count, std::mt19937& rng) {
  Buffers bf = make_buffers(c, rng);
  CHECK_CUDA(cudaMemset(bf.out, 0xFF, bf.out_elems * 2));  // NaN poison
  const long long nb = c.varlen ? 1 : c.B;
  CHECK_CUDA(cudaMemset(bf.lse, 0xFF, (size_t)nb * c.H * bf.q_rows * 4));
  HopperArgs a = make_args(c, bf, sm_count);
  LaunchStatus s = g_launch(a, nullptr);
  if (!s.ok()) {
    std::printf("%-34s LAUNCH FAILED: %s\n", c.name.c_str(), s.message.c_str());
    bf.free_all();
    return false;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  const RefCheck k = compare_with_reference(c, bf, 1);
  const bool ok = k.ok(c);
  std::printf("%-34s relL2 %.3e  max %.3e  unwritten/NaN %lld  lse_err %.2e lse_bad %lld  %s\n", c.name.c_str(), k.rel,
              k.max_err, k.nan, k.lse_err, k.lse_bad, ok ? "PASS" : "FAIL");
  bf.free_all();
  return ok;
}

// Median time of one kernel on one workload, in ms (negative when the launch is refused). With
// `rel` the output of the timed launches is also compared with the reference on about 256 query
// rows per head (spread over every tile), so that a timing never stands for wrong results.
static double time_case(const Case& c, int sm_count, std::mt19937& rng, RefCheck* check = nullptr) {
  Buffers bf = make_buffers(c, rng);
  CHECK_CUDA(cudaMemset(bf.out, 0xFF, bf.out_elems * 2));  // NaN poison
  HopperArgs a = make_args(c, bf, sm_count);
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) {
    LaunchStatus s = g_launch(a, nullptr);
    if (!s.ok()) {
      std::printf("%s: %s\n", c.name.c_str(), s.message.c_str());
      bf.free_all();
      return -1.0;
    }
  }
  std::vector<Buffers> extra;  // the other input sets of --sets (outputs written, never checked)
  std::vector<HopperArgs> args = {a};
  for (int i = 1; i < g_sets; ++i) {
    extra.push_back(make_buffers(c, rng));
    args.push_back(make_args(c, extra.back(), sm_count));
    (void)g_launch(args.back(), nullptr);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  const double flops = 4.0 * c.B * c.H * (double)c.Sq * c.Skv * c.D * (c.causal ? 0.5 : 1.0);
  // Back-to-back launches between two events keep the host's per-launch work off the GPU clock.
  const int per_sample = flops > 5e13 ? 1 : flops > 2e12 ? 5 : 20;
  const int samples = flops > 5e13 ? 3 : 7;
  std::vector<float> ms;
  for (int i = 0; i < samples; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    for (int r = 0; r < per_sample; ++r) (void)g_launch(args[static_cast<size_t>(r + 1) % args.size()], nullptr);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / per_sample);
  }
  CHECK_CUDA(cudaGetLastError());
  if (check != nullptr) *check = compare_with_reference(c, bf, std::max(1, c.Sq / 256));
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  bf.free_all();
  for (Buffers& b : extra) b.free_all();
  return med;
}

static void report_time(const Case& c, const char* variant, double med, const RefCheck& check, FILE* csv) {
  const double flops = 4.0 * c.B * c.H * (double)c.Sq * c.Skv * c.D * (c.causal ? 0.5 : 1.0);
  const double tflops = flops / (med * 1e-3) / 1e12;
  const double gemm_floor_ms = flops / 770e12 * 1e3;
  const double exps = (double)c.B * c.H * c.Sq * c.Skv * (c.causal ? 0.5 : 1.0);
  const double mufu_floor_ms = exps / (16.0 * 132 * 1.98e9) * 1e3;
  const bool ok = check.ok(c);
  std::printf("%-26s %-20s %9.3f ms  %6.1f TFLOP/s  gemm-floor %.3f ms (%.0f%%)  exp-floor %.3f ms  relL2 %.1e%s\n",
              c.name.c_str(), variant, med, tflops, gemm_floor_ms, 100.0 * gemm_floor_ms / med, mufu_floor_ms, check.rel,
              ok ? "" : "  WRONG OUTPUT: this time does not count");
  if (csv)
    std::fprintf(csv, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%.4f,%.1f,%.4f,%.4f,%.3e,%d\n", c.name.c_str(), variant, c.B, c.H, c.Hkv,
                 c.Sq, c.Skv, c.D, c.causal, med, tflops, gemm_floor_ms, mufu_floor_ms, check.rel, ok ? 1 : 0);
}

int main(int argc, char** argv) {
  bool do_check = false, do_time = false, quick = false, variants = false;
  const char* csv_path = nullptr;
  std::string work_only;  // --work a,b: time only these workloads
  std::string case_text;  // --case TEXT: check only the cases whose name contains TEXT
  int rounds_arg = 0;     // --rounds N: interleaved rounds per workload (default 3 with variants)
  std::vector<Case> extra;  // --shape: bf16 workloads timed besides (or, with --work, instead of) the list
  std::string workloads_file = "bench/workloads.csv";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "check")) do_check = true;
    if (!std::strcmp(argv[i], "time")) do_time = true;
    if (!std::strcmp(argv[i], "quick")) quick = true;
    if (!std::strcmp(argv[i], "--sets") && i + 1 < argc) g_sets = std::max(1, std::atoi(argv[++i]));
    if (!std::strcmp(argv[i], "--unit-variance")) g_input_scale = 1.7320508f;
    if (!std::strcmp(argv[i], "variants")) variants = true;
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) g_only = argv[++i];
    if (!std::strcmp(argv[i], "--work") && i + 1 < argc) work_only = argv[++i];
    if (!std::strcmp(argv[i], "--case") && i + 1 < argc) case_text = argv[++i];
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds_arg = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--workloads-file") && i + 1 < argc) workloads_file = argv[++i];
    if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      int b = 0, h = 0, sq = 0, skv = 0, d = 128, causal = 0, hkv = 0;
      if (std::sscanf(argv[++i], "%d,%d,%d,%d,%d,%d,%d", &b, &h, &sq, &skv, &d, &causal, &hkv) < 4 || b < 1 || h < 1 ||
          sq < 1 || skv < 1 || hkv < 0 || (hkv > 0 && h % hkv != 0)) {
        std::fprintf(stderr, "--shape takes B,H,SQ,SKV[,D[,CAUSAL[,HKV]]] with positive sizes, got %s\n", argv[i]);
        return 2;
      }
      extra.push_back({"shape-" + std::to_string(b) + "x" + std::to_string(h) + "x" + std::to_string(sq) + "x" +
                           std::to_string(skv) + "-d" + std::to_string(d) + (causal ? "-causal" : "") +
                           (hkv > 0 ? "-kv" + std::to_string(hkv) : ""),
                       b, sq, skv, h, hkv > 0 ? hkv : h, d, causal != 0});
    }
  }
  int sm_count = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937 rng(std::random_device{}());
  g_seed = rng();
  int failures = 0;
  if (do_check) {
    std::vector<Case> cases = {
        // A last partial wave whose tiles are split along the keys (plan_tail_split).
        {"hd128 bf16 split mask+lse 3x700x2000 h20", 3, 700, 2000, 20, 20, 128, false, false, true, true},
        {"hd64 bf16 split mask+lse 2x500x1500 h30", 2, 500, 1500, 30, 30, 64, false, false, true, true},
        {"hd256 fp16 split lse 1x1000x3000 h20", 1, 1000, 3000, 20, 20, 256, false, true, false, true},
        // More tiles than SMs: every CTA runs several tiles, so the hand-over between tiles is checked.
        {"hd128 bf16 in-order lse 1x8200x700 h3", 1, 8200, 700, 3, 3, 128, false, false, false, true},
        {"hd128 fp16 in-order gqa 6/2 1x9000x1300", 1, 9000, 1300, 6, 2, 128, false, true},
        {"hd64 bf16 long rows mask+lse 1x8300x900 h2", 1, 8300, 900, 2, 2, 64, false, false, true, true, false, false,
         1, 200, 256},
        {"hd64 bf16 long rows causal 1x8400 h2", 1, 8400, 8400, 2, 2, 64, true},
        {"hd128 bf16 many-tiles 2x1500x700 h40", 2, 1500, 700, 40, 40, 128},
        {"hd128 bf16 many causal+mask+lse 3x900", 3, 900, 900, 24, 24, 128, true, false, true, true},
        {"hd128 bf16 many varlen+lse b4 h16", 4, 1200, 1000, 16, 16, 128, false, false, false, true, true},
        {"hd64 bf16 many-tiles 2x1000x777 h40", 2, 1000, 777, 40, 40, 64},
        {"hd64 bf16 many causal+lse 2x900 h32", 2, 900, 900, 32, 32, 64, true, false, false, true},
        {"hd256 bf16 many-tiles 1x1000x600 h40", 1, 1000, 600, 40, 40, 256},
        {"hd96 bf16 split gqa 12/4 lse 1x900x1800", 1, 900, 1800, 12, 4, 96, false, false, false, true},
        {"hd128 bf16 1x512x512 h2", 1, 512, 512, 2, 2, 128},
        // Padded prompts: whole key blocks of padding are skipped.
        {"hd128 bf16 text-first mask+lse 2x600x1100", 2, 600, 1100, 4, 4, 128, false, false, true, true, false, false,
         1, 150},
        {"hd128 fp16 prompt mask+lse 2x900x512", 2, 900, 512, 6, 6, 128, false, true, true, true, false, false, 2, 77},
        {"hd64 bf16 prompt mask causal 1x700x700", 1, 700, 700, 4, 4, 64, true, false, true, false, false, false, 2, 300},
        {"hd128 bf16 wide text-first 1x400x4608", 1, 400, 4608, 4, 4, 128, false, false, true, true, false, false, 1, 200},
        // A partly padded key block followed by a fully kept one: within a split piece (256 text
        // keys), and in whole tiles (FLUX.1's 200 of 512 with 576 tiles, most of them unsplit).
        {"hd128 bf16 text-first 200/256 1x200x1100", 1, 200, 1100, 2, 2, 128, false, false, true, true, false, false,
         1, 200, 256},
        {"hd128 bf16 flux prompt200 1x4608x4608 h24", 1, 4608, 4608, 24, 24, 128, false, false, true, false, false,
         false, 1, 200},
        {"hd128 bf16 2x333x1000 h3", 2, 333, 1000, 3, 3, 128},
        {"hd128 fp16 1x700x700 h2", 1, 700, 700, 2, 2, 128, false, true},
        {"hd128 bf16 causal 2x640x640", 2, 640, 640, 2, 2, 128, true},
        {"hd128 bf16 causal 1x300x500", 1, 300, 500, 2, 2, 128, true},
        {"hd128 bf16 gqa 8/2 1x400x450", 1, 400, 450, 8, 2, 128},
        {"hd128 bf16 mask+lse 3x256x300", 3, 256, 300, 2, 2, 128, false, false, true, true},
        {"hd128 bf16 lse 1x200x77", 1, 200, 77, 3, 3, 128, false, false, false, true},
        {"hd128 bf16 varlen+lse b3", 3, 500, 600, 2, 2, 128, false, false, false, true, true},
        {"hd128 bf16 varlen causal b3", 3, 400, 400, 2, 2, 128, true, false, false, false, true},
        {"hd128 bf16 packed-qkv 2x384", 2, 384, 384, 3, 3, 128, false, false, false, false, false, true},
        {"hd64 bf16 1x600x600 h3", 1, 600, 600, 3, 3, 64},
        {"hd64 fp16 causal+lse 2x300x300", 2, 300, 300, 2, 2, 64, true, true, false, true},
        {"hd96 bf16 1x500x520 h2", 1, 500, 520, 2, 2, 96},
        {"hd96 fp16 gqa 4/1 1x300x300", 1, 300, 300, 4, 1, 96, false, true},
        {"hd192 bf16 1x400x380 h2", 1, 400, 380, 2, 2, 192},
        {"hd192 bf16 causal+lse 1x300x300", 1, 300, 300, 2, 2, 192, true, false, false, true},
        {"hd192 bf16 lse 1x1000x9000", 1, 1000, 9000, 1, 1, 192, false, false, false, true},
        {"hd128 bf16 long-kv 1x300x8300", 1, 300, 8300, 2, 2, 128},
        {"hd128 bf16 wide mask+lse 3x700x4608 h6", 3, 700, 4608, 6, 6, 128, false, false, true, true},
        {"hd128 fp16 wide gqa 8/2 1x500x5760", 1, 500, 5760, 8, 2, 128, false, true},
        {"hd96 fp16 long-kv 1x200x8500", 1, 200, 8500, 2, 2, 96, false, true},
        {"hd256 bf16 1x400x400 h2", 1, 400, 400, 2, 2, 256},
        {"hd256 fp16 mask 2x300x333", 2, 300, 333, 2, 2, 256, false, true, true},
        {"hd256 bf16 varlen b2", 2, 300, 350, 2, 2, 256, false, false, false, false, true},
    };
    if (quick) cases.resize(3);
    if (!case_text.empty())
      cases.erase(std::remove_if(cases.begin(), cases.end(),
                                 [&](const Case& c) { return c.name.find(case_text) == std::string::npos; }),
                  cases.end());
    for (const Variant& v : kVariants) {
      if (!wanted(v, variants)) continue;
      g_launch = v.fn;
      int n = 0;
      for (const Case& c : cases) {
        if (v.D != 0 && (c.D != v.D || c.fp16)) continue;  // variants are bf16 instantiations
        if (v.fn != launch_default && ++n > 9) break;
        std::printf("[%s] ", v.name);
        failures += check_case(c, sm_count, rng) ? 0 : 1;
      }
    }
    std::printf("correctness: %d failure(s)\n", failures);
  }
  if (do_time) {
    FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
    if (csv) std::fprintf(csv, "workload,variant,B,H,Hkv,Sq,Skv,D,causal,ms,tflops,gemm_floor_ms,exp_floor_ms,sampled_rel_l2,correct\n");
    const auto table = diffattn::bench::load_workloads(workloads_file);
    if (!table.ok()) {
      std::fprintf(stderr, "flash_dev: %s\n", table.status().message().c_str());
      return 2;
    }
    std::vector<Case> work;
    for (const diffattn::bench::Workload& w : *table)
      work.push_back({w.name, w.batch, w.seq_q, w.seq_kv, w.heads, w.heads, w.head_dim});
    const std::vector<Case> dev_only = {
        {"square8k-hd128", 1, 8192, 8192, 24, 24, 128},
        {"square16k-hd128-causal", 1, 16384, 16384, 24, 24, 128, true},
        {"cross512-rows4608", 1, 4608, 512, 24, 24, 128},
        // Padded prompts (key masks; PyTorch's flash and cuDNN SDPA take no such mask).
        {"flux.1-1024-joint-prompt200", 1, 4608, 4608, 24, 24, 128, false, false, true, false, false, false, 1, 200},
        {"wan2.1-14b-480p-cross-prompt120", 1, 32760, 512, 40, 40, 128, false, false, true, false, false, false, 2, 120},
    };
    work.insert(work.end(), dev_only.begin(), dev_only.end());
    if (quick) work.resize(std::min<std::size_t>(work.size(), 5));
    const auto listed = [](const std::string& list, const std::string& name) {
      return ("," + list + ",").find("," + name + ",") != std::string::npos;
    };
    // --work picks from the list; --shape alone replaces it.
    std::vector<Case> kept;
    for (const Case& c : work)
      if (work_only.empty() ? extra.empty() : listed(work_only, c.name)) kept.push_back(c);
    work = kept;
    work.insert(work.end(), extra.begin(), extra.end());
    // Variants are timed in interleaved rounds (A B C A B C ...) and each reports the median of
    // its rounds, so clock and power drift during a workload does not favour one of them.
    const int rounds = rounds_arg > 0 ? rounds_arg : variants ? 3 : 1;
    for (const Case& c : work) {
      std::vector<const Variant*> chosen;
      for (const Variant& v : kVariants)
        if ((v.D == 0 || v.D == c.D) && wanted(v, variants)) chosen.push_back(&v);
      std::vector<std::vector<double>> got(chosen.size());
      std::vector<RefCheck> checks(chosen.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < chosen.size(); ++i) {
          g_launch = chosen[i]->fn;
          got[i].push_back(time_case(c, sm_count, rng, r == 0 ? &checks[i] : nullptr));
        }
      for (size_t i = 0; i < chosen.size(); ++i) {
        std::sort(got[i].begin(), got[i].end());
        if (got[i].front() <= 0) continue;
        report_time(c, chosen[i]->name, got[i][got[i].size() / 2], checks[i], csv);
        if (!checks[i].ok(c)) ++failures;
      }
    }
    if (csv) std::fclose(csv);
  }
  return failures == 0 ? 0 : 1;
}
