#pragma once
// SAGE_ATTN's K and V passes in one read of K and V, for short key sequences on sm_90 (the
// statistics pass, the means and the K/V pass of sage_quant.cuh in one launch). Each CTA stages one
// 16-channel slice of one (batch, kv head)'s K or V, every key of it, in shared memory (cp.async,
// zeros for keys the mask drops or past the sequence), and works from there:
//  - V: each channel's maximum |v| over the valid keys, its scale, and the FP8 codes in the
//    transposed, permuted layout of sage_quant_v_block. V's maxima are per channel, so a slice
//    needs no other CTA.
//  - K: each channel's mean over the valid keys (per channel too), the smoothed keys' largest |x|
//    per group of kKGroup keys over the slice's channels; then the kD / 16 CTAs of the head, one
//    thread-block cluster, take each group's maximum over all slices from each other's shared
//    memory, and every CTA writes its channels' INT8 codes with the group's scale.
// The arithmetic is sage_quant.cuh's step for step (the same roundings, the same treatment of
// dropped keys); only the order in which a channel's sum is added differs, and it is fixed, so every
// run gives the same bits. The three-launch passes read K and V twice from DRAM (the second read
// misses L2 once K and V outgrow it); these read them once (docs/backends/sage_attn.md).

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/cuda/sage/sage_quant.cuh"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

inline constexpr int kSliceChannels = 16;         // channels of a CTA: 32 bytes of a 16-bit key row
inline constexpr int kSliceMaxKeys = 6 * 1024;    // kv_padded limit: 192 KiB of staged rows
inline constexpr int kSliceThreads = 256;

// Shared memory of one CTA for kv_padded keys and k_groups K groups: the staged rows, each key's
// validity, the slice's and the cluster's group maxima (K), each statistics chunk's channel sums
// (K), the warps' partials and the slice's statistics.
__host__ __device__ constexpr std::size_t slice_smem_bytes(int kv_padded, int k_groups) {
  return static_cast<std::size_t>(kv_padded) * (kSliceChannels * 2 + 1) +
         (2 * static_cast<std::size_t>((k_groups + 3) / 4 * 4) + static_cast<std::size_t>(kv_padded) / kStatChunk * kSliceChannels +
          8 * (kSliceChannels + 1) + kSliceChannels) * 4;
}

static_assert(slice_smem_bytes(kSliceMaxKeys, kSliceMaxKeys / kKGroup) <= 227 * 1024,
              "the longest sequence's slice fits one CTA's shared memory on sm_90");

// Sixteen 16-bit values of a staged row (32 bytes at `row`) as floats.
template <bool kBf16>
__device__ __forceinline__ void load_slice_row(const std::uint8_t* row, float (&x)[kSliceChannels]) {
  const uint4 a = *reinterpret_cast<const uint4*>(row), b = *reinterpret_cast<const uint4*>(row + 16);
  const auto put = [&x](int at, const float4& v) { x[at] = v.x, x[at + 1] = v.y, x[at + 2] = v.z, x[at + 3] = v.w; };
  put(0, unpack4<kBf16>(make_uint2(a.x, a.y)));
  put(4, unpack4<kBf16>(make_uint2(a.z, a.w)));
  put(8, unpack4<kBf16>(make_uint2(b.x, b.y)));
  put(12, unpack4<kBf16>(make_uint2(b.z, b.w)));
}

// grid (B * Hkv * kinds * kD / 16), cluster (kD / 16), 256 threads, slice_smem_bytes of dynamic
// shared memory. Block x: slice s = x % (kD / 16), then the kind (K before V where both run), then
// batch * kv head. `k_kind`: SAGE_ATTN's INT8 K (false for QkMode::k16); `v_kind`: FP8 V (false in
// the 16-bit P*V mode). Launched as a dependent launch only after a kernel of the same call (the
// Q pass or the key walk), which writes nothing this kernel loads before its wait.
template <bool kBf16, int kD>
__global__ void __launch_bounds__(kSliceThreads, 1)
    sage_kv_slices_kernel(const SageParams p, bool k_kind, bool v_kind) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kSlices = kD / kSliceChannels;
  static_assert(kD % kSliceChannels == 0 && kSlices <= 8, "a portable cluster of slices");
  cuda::allow_dependents_to_start();  // the attention kernel waits for this one to finish
  const int kinds = (k_kind ? 1 : 0) + (v_kind ? 1 : 0);
  const int s = static_cast<int>(blockIdx.x) % kSlices, rest = static_cast<int>(blockIdx.x) / kSlices;
  const bool is_k = k_kind && (kinds == 1 || rest % kinds == 0);
  const int bh = rest / kinds, b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int keys = p.kv_padded, c0 = s * kSliceChannels;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint8_t* rows = smem;                                         // [keys][32 bytes]
  std::uint8_t* valid = rows + static_cast<std::size_t>(keys) * 32;  // [keys]
  const int groups_padded = (p.k_groups + 3) / 4 * 4;
  float* slice_max = reinterpret_cast<float*>(valid + keys);         // [k_groups] (keys: a multiple of 128)
  float* group_max = slice_max + groups_padded;                      // [k_groups]
  float* chunk_sum = group_max + groups_padded;                      // [keys / kStatChunk][16]
  float* red = chunk_sum + keys / kStatChunk * kSliceChannels;       // [8][17]
  float* stat = red + 8 * (kSliceChannels + 1);                      // [16]: the means (K) or maxima (V)

  // 1. Stage the slice: two 16-byte pieces a key; dropped keys and keys past the end as zeros.
  const std::uint16_t* src = static_cast<const std::uint16_t*>(is_k ? p.k : p.v);
  const std::int64_t sb = is_k ? p.k_stride_b : p.v_stride_b, ss = is_k ? p.k_stride_s : p.v_stride_s;
  const std::int64_t at = b * sb + hkv * (is_k ? p.k_stride_h : p.v_stride_h) + c0;
  for (int i = threadIdx.x; i < 2 * keys; i += kSliceThreads) {
    const int key = i / 2, half = i % 2;
    const bool live = key_valid(p, b, key);
    cuda::cp_async_16(rows + key * 32 + half * 16, src + at + (live ? static_cast<std::int64_t>(key) * ss : 0) + half * 8,
                      live);
    if (half == 0) valid[key] = live ? 1 : 0;
  }
  cuda::cp_async_commit();
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  cuda::wait_for_prior_kernel();  // nothing is written before the kernel before (and its own waits) finished
  __syncthreads();

  if (is_k) {
    // 2K. K's channel sums in the three-launch passes' order, so that the means have their bits:
    // per 128-key chunk, key lane l (of kLanes, sage_stats_block's lanes at this head size) adds
    // keys l, l + kLanes, ... of the chunk in order, then the lanes' sums are added in lane order
    // (shuffled to lane 0 of the group); the means kernel's order over the chunks below.
    constexpr int kLanes = kSliceThreads / (kD / 4), kAtOnce = kSliceThreads / (kSliceChannels * kLanes);
    static_assert(kLanes <= 32 && 32 % kLanes == 0, "a channel's lanes within one warp");
    const int l = threadIdx.x % kLanes, c = (threadIdx.x / kLanes) % kSliceChannels;
    const int first = threadIdx.x / (kLanes * kSliceChannels);
    for (int ch = first; ch < keys / kStatChunk; ch += kAtOnce) {
      float sum = 0.f;
#pragma unroll 4
      for (int key = ch * kStatChunk + l; key < (ch + 1) * kStatChunk; key += kLanes)
        if (valid[key]) sum += load_elem<kBf16>(rows + key * 32, c);
      float total = 0.f;
#pragma unroll
      for (int i = 0; i < kLanes; ++i) total += __shfl_sync(0xffffffffu, sum, (lane / kLanes) * kLanes + i);
      if (l == 0) chunk_sum[ch * kSliceChannels + c] = total;
    }
    int count = 0;
    for (int key = threadIdx.x; key < keys; key += kSliceThreads) count += valid[key];
    count = __reduce_add_sync(0xffffffffu, count);
    if (lane == 0) red[warp] = __int_as_float(count);
    __syncthreads();
    if (threadIdx.x < kSliceChannels) {
      const int ch_c = threadIdx.x;
      int n = 0;
      for (int w = 0; w < 8; ++w) n += __float_as_int(red[w]);
      float lanes[kMeanLanes];
#pragma unroll
      for (int m = 0; m < kMeanLanes; ++m) {
        lanes[m] = 0.f;
        for (int ch = m; ch < keys / kStatChunk; ch += kMeanLanes) lanes[m] += chunk_sum[ch * kSliceChannels + ch_c];
      }
      float total = 0.f;
#pragma unroll
      for (int m = 0; m < kMeanLanes; ++m) total += lanes[m];
      const float mean = n > 0 ? __fdiv_rn(total, static_cast<float>(n)) : 0.f;
      stat[ch_c] = mean;
      p.k_mean[static_cast<std::int64_t>(bh) * kD + c0 + ch_c] = mean;
    }
  } else {
    // 2V. V's channel maxima over the keys (a maximum: any order), a key a lane, then a warp tree
    // and the warps.
    float acc[kSliceChannels];
#pragma unroll
    for (int c = 0; c < kSliceChannels; ++c) acc[c] = 0.f;
    for (int key = threadIdx.x; key < keys; key += kSliceThreads) {
      float x[kSliceChannels];
      load_slice_row<kBf16>(rows + key * 32, x);
#pragma unroll
      for (int c = 0; c < kSliceChannels; ++c) acc[c] = fmaxf(acc[c], fabsf(x[c]));
    }
#pragma unroll
    for (int c = 0; c < kSliceChannels; ++c) {
#pragma unroll
      for (int o = 16; o > 0; o /= 2) acc[c] = fmaxf(acc[c], __shfl_xor_sync(0xffffffffu, acc[c], o));
    }
    if (lane == 0) {
#pragma unroll
      for (int c = 0; c < kSliceChannels; ++c) red[warp * (kSliceChannels + 1) + c] = acc[c];
    }
    __syncthreads();
    if (threadIdx.x < kSliceChannels) {
      float m = 0.f;
      for (int w = 0; w < 8; ++w) m = fmaxf(m, red[w * (kSliceChannels + 1) + threadIdx.x]);
      stat[threadIdx.x] = m;
      const std::int64_t o = static_cast<std::int64_t>(bh) * kD + c0 + threadIdx.x;
      p.v_amax[o] = m;
      p.v_scale[o] = __fdiv_rn(m, kE4m3Max);
    }
  }
  __syncthreads();

  if (!is_k) {
    // 3V. V's scales, then the codes: a warp converts a 32-key chunk of the slice's 16 channels at a
    // time, a thread one 32-bit word (positions 4 word .. 4 word + 3: keys kb, kb + 1, kb + 8, kb + 9)
    // of four channels, as sage_quant_v_block does.
    const int word = lane % 8, cg4 = lane / 8, kb = 16 * (word / 4) + 2 * (word % 4);
    float inv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float m = stat[4 * cg4 + e];
      inv[e] = m > 0.f ? __fdiv_rn(kE4m3Max, m) : 0.f;
    }
    for (int chunk = warp; chunk < keys / 32; chunk += 8) {
      float x[4][4];  // [key kb, kb + 1, kb + 8, kb + 9][channel]
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int key = chunk * 32 + kb + (k / 2) * 8 + k % 2;
        const float4 v = unpack4<kBf16>(*reinterpret_cast<const uint2*>(rows + key * 32 + cg4 * 8));
#pragma unroll
        for (int e = 0; e < 4; ++e) x[k][e] = __fmul_rn(at4(v, e), inv[e]);
      }
      store_v_words(x, p.v_e4m3 + (static_cast<std::int64_t>(bh) * kD + c0 + 4 * cg4) * p.kv_padded + chunk * 32 + 4 * word,
                    p.kv_padded);
    }
    return;
  }

  // 3K. Each K group's largest smoothed |x| over this slice: a warp a group, a lane two of its keys.
  float mean[kSliceChannels];
#pragma unroll
  for (int c = 0; c < kSliceChannels; ++c) mean[c] = stat[c];
  for (int g = warp; g < p.k_groups; g += 8) {
    float m = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = g * kKGroup + half * 32 + lane;
      if (key >= p.seqlen_k || !valid[key]) continue;
      float x[kSliceChannels];
      load_slice_row<kBf16>(rows + key * 32, x);
#pragma unroll
      for (int c = 0; c < kSliceChannels; ++c) m = fmaxf(m, fabsf(__fsub_rn(x[c], mean[c])));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) slice_max[g] = m;
  }
  // 4K. The head's group maxima: the largest of every slice's (a maximum is exact in any order, so
  // every CTA of the cluster finds the same), read from the other CTAs' shared memory.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  for (int g = threadIdx.x; g < p.k_groups; g += kSliceThreads) {
    float m = 0.f;
#pragma unroll
    for (int r = 0; r < kSlices; ++r) m = fmaxf(m, *cluster.map_shared_rank(slice_max + g, r));
    group_max[g] = m;
    if (s == 0) p.k_scale[static_cast<std::int64_t>(bh) * p.k_groups + g] = __fdiv_rn(m, kInt8Max);
  }
  cluster.sync();  // no CTA leaves while another reads its shared memory; group_max is visible
  // 5K. The codes: a lane a key, sixteen channels, one 16-byte store.
  for (int g = warp; g < p.k_groups; g += 8) {
    const float amax = group_max[g];
    const float r = amax > 0.f ? __fdiv_rn(kInt8Max, amax) : 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = g * kKGroup + half * 32 + lane;
      if (key >= p.seqlen_k) continue;
      float x[kSliceChannels];
      load_slice_row<kBf16>(rows + key * 32, x);
      const bool live = valid[key] != 0;
      std::uint32_t packed[4] = {0u, 0u, 0u, 0u};
#pragma unroll
      for (int c = 0; c < kSliceChannels; ++c) {
        const float y = live ? __fsub_rn(x[c], mean[c]) : 0.f;
        const int v = max(-127, min(127, __float2int_rn(__fmul_rn(y, r))));
        packed[c / 4] |= (static_cast<std::uint32_t>(v) & 0xffu) << (8 * (c % 4));
      }
      *reinterpret_cast<uint4*>(p.k_int8 + (static_cast<std::int64_t>(bh) * p.seqlen_k + key) * kD + c0) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  }
#endif
}

}  // namespace diffattn::sage
