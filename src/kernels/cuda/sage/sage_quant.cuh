#pragma once
// SAGE_ATTN's quantization passes (kernels/sage/sage_quant.h gives the arithmetic), in three
// launches: the Q pass with the statistics pass (sage_prepass_kernel), the means, then the K pass
// with the V pass (sage_quant_kv_kernel); with the LSE also each row's shift (sage_q_shift_kernel).
// Short key sequences on sm_90 can run steps 1, 3 and 4 below as one launch that reads K and V once
// (sage_quant_slices.cuh; sage_reads_kv_once says when), with the same bits.
//  1. statistics: per chunk of keys, the sum of each K channel and the maximum |V| of each channel
//     over the valid keys, and the number of valid keys (fixed-order partials, so every run gives
//     the same bits);
//  2. Q: per row (kQGroup is 1), the softmax scale (in log2 units) folded in, INT8 with one scale;
//  3. K: smoothed by the mean of its channels over the valid keys, INT8 per group of kKGroup keys;
//     padding keys are written as zero and never enter a maximum;
//  4. V (FP8 P*V only): FP8 E4M3 with one scale per channel, transposed to [D, keys] so it is the
//     K-major operand of the P*V product, keys permuted within each 32 so that the score
//     accumulators a thread holds are exactly its FP8 operand fragment (no shuffles):
//     position a of a 32-key chunk holds key 8 * (2 * (a / 16) + (a % 4) / 2) + 2 * ((a % 16) / 4) + a % 2.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/sage/sage_quant.h"

// Blocks of 256 threads per SM that the statistics/Q pass's and the K/V pass's registers must
// allow (__launch_bounds__). Both passes are bound by the loads they keep in flight, and at four
// blocks an SM (64 registers a thread) they keep more in flight than unbounded, where the prepass
// took 130 registers at hd128 (one block an SM) and 84 at hd64, the K/V pass 69 at hd128:
// on an H100, Flux's passes took 129 -> 92 us, Wan2.2-5B's 292 -> 204, 512-key cross-attention's
// (32760 query rows) 419 -> 222, QK16/V8's V pass on Wan2.2-5B 144 -> 95. Five or six blocks spill
// and were slower (scripts/device/sage_quant_variants.sh; docs/backends/sage_attn.md). The -D
// switches rebuild other settings for such runs.
#ifndef DIFFATTN_SAGE_PREPASS_MIN_BLOCKS
#define DIFFATTN_SAGE_PREPASS_MIN_BLOCKS 4
#endif
#ifndef DIFFATTN_SAGE_STATS_UNROLL
#define DIFFATTN_SAGE_STATS_UNROLL 8  // keys per step of a statistics lane
#endif
#ifndef DIFFATTN_SAGE_KV_MIN_BLOCKS
#define DIFFATTN_SAGE_KV_MIN_BLOCKS 4
#endif

namespace diffattn::sage {

template <bool kBf16>
__device__ __forceinline__ float load_elem(const void* base, std::int64_t index) {
  if constexpr (kBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
  else return __half2float(static_cast<const __half*>(base)[index]);
}

// Four consecutive 16-bit elements from `index` on, still packed (two registers where a float4
// takes four, so that more loads fit in flight): one 8-byte load where the tensor allows it (`vec`:
// its base 8-byte aligned and its strides multiples of four elements, SageParams::vec_*), else
// four 2-byte loads.
__device__ __forceinline__ uint2 load4_raw(const void* base, std::int64_t index, bool vec) {
  const std::uint16_t* e = static_cast<const std::uint16_t*>(base) + index;
  if (vec) return *reinterpret_cast<const uint2*>(e);
  return make_uint2(e[0] | (static_cast<std::uint32_t>(e[1]) << 16), e[2] | (static_cast<std::uint32_t>(e[3]) << 16));
}

template <bool kBf16>
__device__ __forceinline__ float4 unpack4(const uint2& raw) {
  float2 lo, hi;
  if constexpr (kBf16) {
    lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  } else {
    lo = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
    hi = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
  }
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__device__ __forceinline__ float at4(const float4& v, int e) { return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w; }

__device__ __forceinline__ bool key_valid(const SageParams& p, int b, int key) {
  return key < p.seqlen_k && (p.kv_mask == nullptr || p.kv_mask[b * p.mask_stride_b + key * p.mask_stride_s] != 0);
}

// The position of key offset `k` (0..31) inside its 32-key chunk of the transposed V.
__host__ __device__ constexpr int v_position(int k) {
  const int g = k / 8, w = k % 8;
  return 16 * (g / 2) + 4 * (w / 2) + 2 * (g % 2) + w % 2;
}

// The maximum of `x` over the block (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ float block_max(float x, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  const int warps = blockDim.x / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float m = 0.f;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// One (chunk, batch * kv head) of the statistics, 256 threads: each thread holds four channels of every
// (256 / (kD / 4))-th key of the chunk; the key lanes' partials are then added in a fixed order.
// Without k_stats (QkMode::k16, whose K is not smoothed) K is not read and its sums are zero.
template <bool kBf16, int kD>
__device__ __forceinline__ void sage_stats_block(const SageParams& p, bool k_stats, bool v_stats, int chunk, int bh) {
  constexpr int kLanesPerKey = kD / 4, kKeyLanes = 256 / kLanesPerKey;
  __shared__ float4 s_sum[256], s_max[256];
  __shared__ int s_cnt[kKeyLanes];
  const int c0 = (threadIdx.x % kLanesPerKey) * 4, lane = threadIdx.x / kLanesPerKey;
  const int b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int key0 = chunk * kStatChunk, key1 = min(key0 + kStatChunk, p.seqlen_k);
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f), amax = sum;
  int count = 0;
  // kUnroll keys per step, all their loads issued (kept packed) before any is added: the pass is
  // bound by how many loads are in flight (four keys per step read at 1.8 TB/s on an H200).
  constexpr int kUnroll = DIFFATTN_SAGE_STATS_UNROLL;
  for (int base = key0 + lane; base < key1; base += kUnroll * kKeyLanes) {
    uint2 k[kUnroll], v[kUnroll];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int key = base + u * kKeyLanes;
      live[u] = key < key1 && key_valid(p, b, key);
      const std::int64_t kat = b * p.k_stride_b + static_cast<std::int64_t>(key) * p.k_stride_s + hkv * p.k_stride_h + c0;
      const std::int64_t vat = b * p.v_stride_b + static_cast<std::int64_t>(key) * p.v_stride_s + hkv * p.v_stride_h + c0;
      k[u] = live[u] && k_stats ? load4_raw(p.k, kat, p.vec_k) : make_uint2(0u, 0u);
      v[u] = live[u] && v_stats ? load4_raw(p.v, vat, p.vec_v) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!live[u]) continue;
      const float4 kf = unpack4<kBf16>(k[u]), vf = unpack4<kBf16>(v[u]);
      sum.x += kf.x, sum.y += kf.y, sum.z += kf.z, sum.w += kf.w;
      amax.x = fmaxf(amax.x, fabsf(vf.x)), amax.y = fmaxf(amax.y, fabsf(vf.y));
      amax.z = fmaxf(amax.z, fabsf(vf.z)), amax.w = fmaxf(amax.w, fabsf(vf.w));
      ++count;
    }
  }
  s_sum[threadIdx.x] = sum;
  s_max[threadIdx.x] = amax;
  if (c0 == 0) s_cnt[lane] = count;
  __syncthreads();
  if (threadIdx.x >= kD) return;
  const int c = threadIdx.x, slot = c / 4, e = c % 4;
  float total = 0.f, vmax = 0.f;
  int n = 0;
  for (int l = 0; l < kKeyLanes; ++l) {
    total += at4(s_sum[l * kLanesPerKey + slot], e);
    vmax = fmaxf(vmax, at4(s_max[l * kLanesPerKey + slot], e));
    n += s_cnt[l];
  }
  const std::int64_t part = (static_cast<std::int64_t>(bh) * p.stat_chunks + chunk) * kD + c;
  p.k_sum_parts[part] = total;
  if (v_stats) p.v_amax_parts[part] = vmax;
  if (hkv == 0 && c == 0) p.valid_parts[b * p.stat_chunks + chunk] = n;
}

// Chunk lanes per channel of the means pass: lane l adds chunks l, l + kMeanLanes, ... in order,
// then the lanes' sums are added in lane order.
inline constexpr int kMeanLanes = 8;

// grid (B * Hkv, kD / 32), 32 * kMeanLanes threads: K's channel means and V's channel maxima from
// the statistics pass's partials, 32 channels per block, summed in a fixed order (every run gives
// the same bits). Eight lanes per channel keep eight loads in flight where one thread per channel
// waited on each in turn (Wan2.1 480p: 256 chunks, 61 us on an H200 with one lane).
template <int kD>
__global__ void __launch_bounds__(32 * kMeanLanes) sage_means_kernel(const SageParams p, bool v_stats) {
  static_assert(kD % 32 == 0, "32 channels per block");
  __shared__ float s_sum[kMeanLanes][32], s_max[kMeanLanes][32];
  __shared__ int s_n[kMeanLanes];
  cuda::allow_dependents_to_start();  // the K/V pass may start loading K and V
  cuda::wait_for_prior_kernel();      // the statistics pass's partials
  const int bh = blockIdx.x, b = bh / p.heads_kv, lane = threadIdx.x / 32, c = blockIdx.y * 32 + threadIdx.x % 32;
  const float* sums = p.k_sum_parts + static_cast<std::int64_t>(bh) * p.stat_chunks * kD + c;
  const float* maxima = p.v_amax_parts + static_cast<std::int64_t>(bh) * p.stat_chunks * kD + c;
  float s = 0.f, amax = 0.f;
  int n = 0;
#pragma unroll 4
  for (int ch = lane; ch < p.stat_chunks; ch += kMeanLanes) {
    s += sums[static_cast<std::int64_t>(ch) * kD];
    n += p.valid_parts[b * p.stat_chunks + ch];
    if (v_stats) amax = fmaxf(amax, maxima[static_cast<std::int64_t>(ch) * kD]);
  }
  s_sum[lane][threadIdx.x % 32] = s;
  s_max[lane][threadIdx.x % 32] = amax;
  if (threadIdx.x % 32 == 0) s_n[lane] = n;
  __syncthreads();
  if (lane != 0) return;
  s = 0.f, amax = 0.f, n = 0;
#pragma unroll
  for (int l = 0; l < kMeanLanes; ++l) {
    s += s_sum[l][threadIdx.x];
    amax = fmaxf(amax, s_max[l][threadIdx.x]);
    n += s_n[l];
  }
  p.k_mean[static_cast<std::int64_t>(bh) * kD + c] = n > 0 ? __fdiv_rn(s, static_cast<float>(n)) : 0.f;
  if (v_stats) {
    p.v_amax[static_cast<std::int64_t>(bh) * kD + c] = amax;
    p.v_scale[static_cast<std::int64_t>(bh) * kD + c] = __fdiv_rn(amax, kE4m3Max);
    if (p.v_inv != nullptr)  // the in-kernel V items' factor, as sage_quant_v_block computes it
      p.v_inv[static_cast<std::int64_t>(bh) * kD + c] = amax > 0.f ? __fdiv_rn(kE4m3Max, amax) : 0.f;
  }
}

template <int kD>
__device__ __forceinline__ void k_means(const SageParams& p, int bh, int, float* mean) {
  for (int c = threadIdx.x; c < kD; c += blockDim.x) mean[c] = p.k_mean[static_cast<std::int64_t>(bh) * kD + c];
}

// Query rows per block of the Q pass: eight warps, sixteen rows each.
inline constexpr int kQRowsPerBlock = 128;

// a / b for a, b in [1, 2) x [1, 128], correctly rounded: the approximate reciprocal refined once,
// then the quotient corrected twice by its exact remainder (FFMA), as an IEEE division's fast path
// computes it where no operand or result is near the ends of the float range.
__device__ __forceinline__ float div_rn_moderate(float a, float b) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(b));
  y = fmaf(y, fmaf(-b, y, 1.f), y);
  float q = __fmul_rn(a, y);
  q = fmaf(fmaf(-b, q, a), y, q);
  return fmaf(fmaf(-b, q, a), y, q);
}

// x = m 2^e with m in [1, 2), for a positive finite x (subnormals included). Branch-free, as the
// functions below: see q_code_ratio.
__device__ __forceinline__ float split_exponent(float x, int& e) {
  const bool tiny = x < 1.17549435e-38f;
  const unsigned bits = __float_as_uint(tiny ? __fmul_rn(x, 18446744073709551616.f) : x);  // 2^64: exact
  e = static_cast<int>(bits >> 23) - 127 - (tiny ? 64 : 0);
  return __uint_as_float((bits & 0x7fffffu) | 0x3f800000u);
}

// x 2^e, exactly where the result is a normal float (a product of powers of two in two steps, so
// that each factor is one); an overflow gives inf, as a rounding of the exact value would.
__device__ __forceinline__ float scale_by_power_of_two(float x, int e) {
  const int h = e / 2;
  return __fmul_rn(__fmul_rn(x, __uint_as_float(static_cast<unsigned>(h + 127) << 23)),
                   __uint_as_float(static_cast<unsigned>(e - h + 127) << 23));
}

// 1 / x rounded to nearest even for 0 < x < 2^126 (the same bits as 1.f / x), without a call: the
// attention kernel's row sums (at most 448 per key) in its epilogue.
__device__ __forceinline__ float reciprocal_rn(float x) {
  int e;
  const float m = split_exponent(x, e);
  return scale_by_power_of_two(div_rn_moderate(1.f, m), -e);
}

// 127 / amax and amax / 127 rounded to nearest even, for every amax >= 0 (0 gives 0 for both, as the
// Q pass defines them): the same bits as IEEE division (__fdiv_rn), without the call to its slow path
// and without branches. The attention kernel's producer warps quantize Q under setmaxnreg's 32
// registers; a call or a branch there made ptxas spill the consumer warpgroups' tile state (96
// bytes at hd128), which these leave alone. tests/gpu/sage_attn_test.cc compares both with
// __fdiv_rn for every non-negative float.
__device__ __forceinline__ float q_code_ratio(float amax) {
  int e;
  const float m = split_exponent(amax, e);
  const float r = scale_by_power_of_two(div_rn_moderate(kInt8Max, m), -e);  // in (63.5, 127] before the scaling
  return amax > 0.f && amax < INFINITY ? r : 0.f;  // 0, inf and NaN: 0, as the Q pass had it
}

__device__ __forceinline__ float q_scale_of(float amax) {
  int e;
  const float m = split_exponent(amax, e);
  const float normal = scale_by_power_of_two(div_rn_moderate(m, kInt8Max), e);  // in [2^-7, 2^-6) before the scaling
  // Below 127 2^-126 the quotient is below the smallest normal float: a whole number n of 2^-149,
  // n = round(A / 127) for the whole number A = amax 2^149 (< 2^30); 127 is odd, so there is no tie.
  const unsigned a = static_cast<unsigned>(__fmul_rn(__fmul_rn(amax, 1.2676506002282294e30f), 562949953421312.f));
  const unsigned n = a / 127u + (2u * (a % 127u) > 127u ? 1u : 0u);
  const float sub = __fmul_rn(__fmul_rn(static_cast<float>(n), 7.8886090522101181e-31f), 1.7763568394002505e-15f);
  const float finite = amax < 127.f * 1.17549435e-38f ? sub : normal;
  return amax > 0.f && amax < INFINITY ? finite : amax;  // 0, inf and NaN stay
}

// A Q row's quantization in its steps, each lane holding kPer of the row's channels (kPer a multiple
// of two, at most eight): the softmax scale (log2 units) folded into x, and the largest |x| of the
// lane's channels (never NaN: fmaxf passes over a NaN); then, with the row's largest |x| (amax),
// 127 / amax (q_code_ratio) and the row's scale amax / 127 (q_scale_of, kQGroup is 1), the INT8
// codes, four to a word, the first channel in the lowest byte. The Q pass (quantize_q_row) and the
// attention kernel's own quantization of Q (sage_fwd_hopper.cuh, kFusedQ) take the same steps, so
// they give the same bits however a row is spread over lanes (a maximum does not depend on the
// order it is taken in).
template <int kPer>
__device__ __forceinline__ float q_fold_scale(float (&x)[kPer], float scale_log2) {
  float amax = 0.f;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    x[e] = __fmul_rn(x[e], scale_log2);
    amax = fmaxf(amax, fabsf(x[e]));
  }
  return amax;
}

template <int kPer>
__device__ __forceinline__ void q_codes(const float (&x)[kPer], float r, std::uint32_t (&packed)[(kPer + 3) / 4]) {
#pragma unroll
  for (int w = 0; w < (kPer + 3) / 4; ++w) packed[w] = 0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int v = max(-127, min(127, __float2int_rn(__fmul_rn(x[e], r))));
    packed[e / 4] |= (static_cast<std::uint32_t>(v) & 0xffu) << (8 * (e % 4));
  }
}

// One Q row held by kLanes consecutive lanes: its codes and (in `scale`) its scale.
template <int kPer, int kLanes>
__device__ __forceinline__ void quantize_q_row(float (&x)[kPer], float scale_log2,
                                               std::uint32_t (&packed)[(kPer + 3) / 4], float& scale) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power-of-two group of lanes");
  float amax = q_fold_scale<kPer>(x, scale_log2);
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  q_codes<kPer>(x, q_code_ratio(amax), packed);
  scale = q_scale_of(amax);
}

// One (row block, batch * head) of the Q pass, 256 threads: each warp quantizes sixteen rows, each
// with its own INT8 scale (kQGroup is 1), a lane holding four consecutive channels (hd128: a row per
// warp step; hd64: two rows, one per half-warp, so that every load is an 8-byte one: the 2-byte
// loads of two channels a lane left hd64's pass bound by load instructions); every row's loads are
// issued, kept packed, before any row is reduced, the pass being bound by the loads in flight. Q
// needs none of K's statistics, so this runs in the same launch as the statistics pass
// (sage_prepass_kernel). A row's maximum is exact whichever lanes hold it: the same bits.
template <bool kBf16, int kD>
__device__ __forceinline__ void sage_quant_q_block(const SageParams& p, int qblock, int bh) {
  static_assert(kQGroup == 1, "the Q pass gives every row its own scale");
  constexpr int kLanesPerRow = kD / 4, kRowsPerStep = 32 / kLanesPerRow, kRows = kQRowsPerBlock / 8;
  constexpr int kSteps = kRows / kRowsPerStep;
  static_assert(kLanesPerRow * kRowsPerStep == 32 && kRows % kRowsPerStep == 0, "whole rows per warp step");
  const int b = bh / p.heads_q, h = bh % p.heads_q;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c0 = (lane % kLanesPerRow) * 4;
  const int first = qblock * kQRowsPerBlock + warp * kRows;  // the warp's first row
  const int row0 = first + lane / kLanesPerRow;             // this lane's
  uint2 raw[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = min(row0 + i * kRowsPerStep, p.seqlen_q - 1);  // rows past the end reload the last one, unused
    const std::int64_t at = b * p.q_stride_b + static_cast<std::int64_t>(row) * p.q_stride_s + h * p.q_stride_h + c0;
    raw[i] = load4_raw(p.q, at, p.vec_q);
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row0 + i * kRowsPerStep;
    if (first + i * kRowsPerStep >= p.seqlen_q) break;  // the step's first row: the same for the whole warp
    const float4 v = unpack4<kBf16>(raw[i]);
    float x[4] = {v.x, v.y, v.z, v.w};
    std::uint32_t packed[1];
    float scale;
    quantize_q_row<4, kLanesPerRow>(x, p.scale_log2, packed, scale);  // every lane takes part in the shuffles
    if (row >= p.seqlen_q) continue;  // hd64: the step's second row past the end
    std::int8_t* dst = p.q_int8 + (static_cast<std::int64_t>(bh) * p.seqlen_q + row) * kD + c0;
    *reinterpret_cast<std::uint32_t*>(dst) = packed[0];
    if (lane % kLanesPerRow == 0) p.q_scale[static_cast<std::int64_t>(bh) * p.q_groups + row] = scale;
  }
}

// grid (ceil(Sq / kQRowsPerBlock) * B * Hq + stat_chunks * B * Hkv), 256 threads: the Q pass's
// blocks, then the statistics pass's. One launch reads Q, K and V once. QkMode::k16 launches no Q
// blocks (q_blocks 0) and only V's statistics (k_stats false). The Q blocks go row block by row
// block, every head of one before the next (`q_heads_first`), or head by head; the statistics
// blocks chunk by chunk, every kv head of one before the next (`keys_first`), or head by head. In
// [B, S, H, D] views a row block of one head is 128 pieces of 2 kD bytes a row's width apart;
// every head of it is one span of the tensor, so the blocks that run at once read few, whole
// stretches of memory. Either order gives the same bits.
template <bool kBf16, int kD>
__global__ void __launch_bounds__(256, DIFFATTN_SAGE_PREPASS_MIN_BLOCKS)
    sage_prepass_kernel(const SageParams p, bool k_stats, bool v_stats, int q_blocks, bool q_heads_first,
                        bool keys_first) {
  cuda::allow_dependents_to_start();  // the means kernel waits for this one to finish
  const int qb = (p.seqlen_q + kQRowsPerBlock - 1) / kQRowsPerBlock;
  const int block = blockIdx.x;
  if (block < q_blocks) {
    const int bhq = q_blocks / qb;
    if (q_heads_first) sage_quant_q_block<kBf16, kD>(p, block / bhq, block % bhq);
    else sage_quant_q_block<kBf16, kD>(p, block % qb, block / qb);
  } else {
    const int s = block - q_blocks, bhkv = p.batch * p.heads_kv;
    if (keys_first) sage_stats_block<kBf16, kD>(p, k_stats, v_stats, s / bhkv, s % bhkv);
    else sage_stats_block<kBf16, kD>(p, k_stats, v_stats, s % p.stat_chunks, s / p.stat_chunks);
  }
}

// Only for calls that ask for the LSE: each row's q' . mean(K), the amount by which smoothing K
// lowered the row's scores (in log2 units), which the LSE adds back. grid (ceil(Sq / 8), B * Hq),
// 256 threads, a warp per row, a lane holding kD / 32 consecutive channels.
template <bool kBf16, int kD>
__global__ void __launch_bounds__(256) sage_q_shift_kernel(const SageParams p) {
  constexpr int kPer = kD / 32;
  __shared__ float mean[kD];
  const int bh = blockIdx.y, b = bh / p.heads_q, h = bh % p.heads_q;
  k_means<kD>(p, b * p.heads_kv + h / (p.heads_q / p.heads_kv), b, mean);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c0 = lane * kPer;
  const int row = blockIdx.x * 8 + warp;
  if (row >= p.seqlen_q) return;
  const std::int64_t at = b * p.q_stride_b + static_cast<std::int64_t>(row) * p.q_stride_s + h * p.q_stride_h + c0;
  float shift = 0.f;
#pragma unroll
  for (int e = 0; e < kPer; ++e) shift = fmaf(__fmul_rn(load_elem<kBf16>(p.q, at + e), p.scale_log2), mean[c0 + e], shift);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) shift += __shfl_xor_sync(0xffffffffu, shift, o);
  if (lane == 0) p.q_shift[static_cast<std::int64_t>(bh) * p.seqlen_q + row] = shift;
}

// One (key group, batch * kv head) of the K pass, 256 threads, each holding four consecutive channels of some of the
// group's keys (one 32-bit store of INT8 codes per key).
template <bool kBf16, int kD>
__device__ __forceinline__ void sage_quant_k_block(const SageParams& p, int group, int bh) {
  constexpr int kLanesPerKey = kD / 4, kKeysPerPass = 256 / kLanesPerKey, kPasses = kKGroup / kKeysPerPass;
  __shared__ float mean[kD];
  __shared__ float scratch[8];
  const int b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int key0 = group * kKGroup, c0 = (threadIdx.x % kLanesPerKey) * 4;
  // Every key's loads issued (kept packed) before the means are waited for; an invalid key reads
  // as zero and stays zero after smoothing.
  uint2 raw[kPasses];
  bool valid[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int key = key0 + i * kKeysPerPass + threadIdx.x / kLanesPerKey;
    valid[i] = key_valid(p, b, key);
    const std::int64_t at = b * p.k_stride_b + static_cast<std::int64_t>(key) * p.k_stride_s + hkv * p.k_stride_h + c0;
    raw[i] = valid[i] ? load4_raw(p.k, at, p.vec_k) : make_uint2(0u, 0u);
  }
  cuda::wait_for_prior_kernel();  // the means (and, before them, the previous call's last kernel)
  k_means<kD>(p, bh, b, mean);
  __syncthreads();
  float x[kPasses][4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const float4 k = unpack4<kBf16>(raw[i]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[i][e] = valid[i] ? __fsub_rn(at4(k, e), mean[c0 + e]) : 0.f;
      amax = fmaxf(amax, fabsf(x[i][e]));
    }
  }
  amax = block_max(amax, scratch);
  const float r = amax > 0.f ? __fdiv_rn(kInt8Max, amax) : 0.f;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int key = key0 + i * kKeysPerPass + threadIdx.x / kLanesPerKey;
    if (key >= p.seqlen_k) continue;
    std::uint32_t packed = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = max(-127, min(127, __float2int_rn(__fmul_rn(x[i][e], r))));
      packed |= (static_cast<std::uint32_t>(v) & 0xffu) << (8 * e);
    }
    *reinterpret_cast<std::uint32_t*>(p.k_int8 + (static_cast<std::int64_t>(bh) * p.seqlen_k + key) * kD + c0) = packed;
  }
  if (threadIdx.x == 0) p.k_scale[static_cast<std::int64_t>(bh) * p.k_groups + group] = __fdiv_rn(amax, kInt8Max);
}

// Four channels' 32-bit words of the transposed V (positions 4 word .. 4 word + 3 of a 32-key chunk:
// keys kb, kb + 1, kb + 8, kb + 9): x[k][e] is channel e's scaled value of the word's k-th key,
// rounded to E4M3 with saturation; channel e's word goes to dst + e * row_bytes.
__device__ __forceinline__ void store_v_words(const float (&x)[4][4], std::uint8_t* dst, std::int64_t row_bytes) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(x[0][e], x[1][e]), __NV_SATFINITE, __NV_E4M3);
    const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(x[2][e], x[3][e]), __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<std::uint32_t*>(dst + e * row_bytes) = (lo & 0xffffu) | (hi << 16);
  }
}

// One (key block, batch * kv head) of the V pass, 256 threads: one block of keys, every channel, with no
// shared memory. A thread writes one 32-bit word (four positions of a 32-key chunk) of four
// channels: positions 4j .. 4j + 3 hold keys kb, kb + 1, kb + 8, kb + 9 (v_position), so it loads
// those four keys' four channels and packs them. A warp covers eight words of one chunk (32
// contiguous bytes per channel row) for 16 channels: its loads and stores fill whole sectors.
template <bool kBf16, int kD>
__device__ __forceinline__ void sage_quant_v_block(const SageParams& p, int kvblock, int bh) {
  constexpr int kUnits = (kKvBlock / 32) * (kD / 16);  // (32-key chunk, 16-channel block) pairs
  const int b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int key0 = kvblock * kKvBlock;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, word = lane % 8;
  const int kb = 16 * (word / 4) + 2 * (word % 4);  // the first of the word's keys within its chunk
  const float* amax = p.v_amax + static_cast<std::int64_t>(bh) * kD;
  static_assert(kUnits % 8 == 0, "every warp takes as many units");
  constexpr int kWarpUnits = kUnits / 8;
  // Every unit's loads issued (kept packed) before any is converted: [unit][key kb, kb + 1, kb + 8, kb + 9].
  uint2 raw[kWarpUnits][4];
#pragma unroll
  for (int w = 0; w < kWarpUnits; ++w) {
    const int u = warp + 8 * w;
    const int chunk = u % (kKvBlock / 32), c0 = (u / (kKvBlock / 32)) * 16 + (lane / 8) * 4;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int key = key0 + chunk * 32 + kb + (k / 2) * 8 + k % 2;
      const std::int64_t at = b * p.v_stride_b + static_cast<std::int64_t>(key) * p.v_stride_s + hkv * p.v_stride_h + c0;
      raw[w][k] = key_valid(p, b, key) ? load4_raw(p.v, at, p.vec_v) : make_uint2(0u, 0u);
    }
  }
  cuda::wait_for_prior_kernel();  // V's channel maxima
#pragma unroll
  for (int w = 0; w < kWarpUnits; ++w) {
    const int u = warp + 8 * w;
    const int chunk = u % (kKvBlock / 32), c0 = (u / (kKvBlock / 32)) * 16 + (lane / 8) * 4;
    float inv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float m = __ldg(amax + c0 + e);
      inv[e] = m > 0.f ? __fdiv_rn(kE4m3Max, m) : 0.f;
    }
    float x[4][4];  // [key kb, kb + 1, kb + 8, kb + 9][channel]
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 v = unpack4<kBf16>(raw[w][k]);
#pragma unroll
      for (int e = 0; e < 4; ++e) x[k][e] = __fmul_rn(at4(v, e), inv[e]);
    }
    store_v_words(x, p.v_e4m3 + (static_cast<std::int64_t>(bh) * kD + c0) * p.kv_padded + key0 + chunk * 32 + 4 * word,
                  p.kv_padded);
  }
}

// The K/V pass's work as items of one warp each, for the attention kernel's idle producer warps
// (SageParams::kv_ready): the same arithmetic, so the same bits, as sage_quant_k_block and
// sage_quant_v_block, in few registers (the producer warpgroup runs under setmaxnreg's 24 or 32).
//  - A K group: a lane holds four channels of one key (hd128) or of one of two keys (hd64); the
//    group's largest |x - mean| by a warp maximum, then the codes from a second read of the keys
//    (L1 or L2 by then); 127 / amax and amax / 127 call-free (q_code_ratio, q_scale_of: the bits
//    of __fdiv_rn).
//  - A V block: the V pass's 32-bit words (keys kb, kb + 1, kb + 8, kb + 9 of a 32-key chunk) one
//    channel at a time, with the means kernel's 448 / amax (v_inv).
template <bool kBf16, int kD>
__device__ __forceinline__ void sage_k_group_item(const SageParams& p, int group, int bh, int lane) {
  constexpr int kLanesPerKey = kD / 4, kKeysPerStep = 32 / kLanesPerKey;
  const int b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int c0 = (lane % kLanesPerKey) * 4, first = group * kKGroup + lane / kLanesPerKey;
  const float4 mean = *reinterpret_cast<const float4*>(p.k_mean + static_cast<std::int64_t>(bh) * kD + c0);
  const std::int64_t base = b * p.k_stride_b + hkv * p.k_stride_h + c0;
  float amax = 0.f;
#pragma unroll 4
  for (int i = 0; i < kKGroup / kKeysPerStep; ++i) {
    const int key = first + i * kKeysPerStep;
    if (!key_valid(p, b, key)) continue;
    const float4 k = unpack4<kBf16>(load4_raw(p.k, base + static_cast<std::int64_t>(key) * p.k_stride_s, p.vec_k));
    amax = fmaxf(amax, fabsf(__fsub_rn(k.x, mean.x)));
    amax = fmaxf(amax, fabsf(__fsub_rn(k.y, mean.y)));
    amax = fmaxf(amax, fabsf(__fsub_rn(k.z, mean.z)));
    amax = fmaxf(amax, fabsf(__fsub_rn(k.w, mean.w)));
  }
  amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(amax)));  // non-negative: bits order
  const float r = q_code_ratio(amax);
  std::int8_t* out = p.k_int8 + static_cast<std::int64_t>(bh) * p.seqlen_k * kD + c0;
#pragma unroll 2
  for (int i = 0; i < kKGroup / kKeysPerStep; ++i) {
    const int key = first + i * kKeysPerStep;
    if (key >= p.seqlen_k) break;
    std::uint32_t packed = 0;
    if (key_valid(p, b, key)) {
      const float4 k = unpack4<kBf16>(load4_raw(p.k, base + static_cast<std::int64_t>(key) * p.k_stride_s, p.vec_k));
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = max(-127, min(127, __float2int_rn(__fmul_rn(__fsub_rn(at4(k, e), at4(mean, e)), r))));
        packed |= (static_cast<std::uint32_t>(v) & 0xffu) << (8 * e);
      }
    }
    *reinterpret_cast<std::uint32_t*>(out + static_cast<std::int64_t>(key) * kD) = packed;
  }
  if (lane == 0) p.k_scale[static_cast<std::int64_t>(bh) * p.k_groups + group] = q_scale_of(amax);
}

// Element e (0-3) of four packed 16-bit values, as unpack4 gives it.
template <bool kBf16>
__device__ __forceinline__ float elem4(const uint2& raw, int e) {
  const std::uint32_t w = e < 2 ? raw.x : raw.y;
  const std::uint16_t h = static_cast<std::uint16_t>(e % 2 == 0 ? w & 0xffffu : w >> 16);
  if constexpr (kBf16) return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
  else return __half2float(__ushort_as_half(h));
}

template <bool kBf16, int kD>
__device__ __forceinline__ void sage_v_block_item(const SageParams& p, int kvblock, int bh, int lane) {
  constexpr int kChunks = kKvBlock / 32, kUnits = kChunks * (kD / 16);
  const int b = bh / p.heads_kv, hkv = bh % p.heads_kv;
  const int key0 = kvblock * kKvBlock, word = lane % 8;
  const int kb = 16 * (word / 4) + 2 * (word % 4);
  const std::int64_t base = b * p.v_stride_b + hkv * p.v_stride_h;
#pragma unroll 1
  for (int u = 0; u < kUnits; ++u) {
    const int chunk = u % kChunks, c0 = (u / kChunks) * 16 + (lane / 8) * 4;
    uint2 raw[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int key = key0 + chunk * 32 + kb + (k / 2) * 8 + k % 2;
      raw[k] = key_valid(p, b, key) ? load4_raw(p.v, base + static_cast<std::int64_t>(key) * p.v_stride_s + c0, p.vec_v)
                                    : make_uint2(0u, 0u);
    }
    std::uint8_t* dst = p.v_e4m3 + (static_cast<std::int64_t>(bh) * kD + c0) * p.kv_padded + key0 + chunk * 32 + 4 * word;
    const float* inv = p.v_inv + static_cast<std::int64_t>(bh) * kD + c0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float s = inv[e];
      const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(
          make_float2(__fmul_rn(elem4<kBf16>(raw[0], e), s), __fmul_rn(elem4<kBf16>(raw[1], e), s)), __NV_SATFINITE, __NV_E4M3);
      const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(
          make_float2(__fmul_rn(elem4<kBf16>(raw[2], e), s), __fmul_rn(elem4<kBf16>(raw[3], e), s)), __NV_SATFINITE, __NV_E4M3);
      *reinterpret_cast<std::uint32_t*>(dst + e * p.kv_padded) = (lo & 0xffffu) | (hi << 16);
    }
  }
}

// One item of SageParams::kv_ready's pairs, taken from kv_next, quantized and counted on its pair's
// kv_ready (release: its codes and scales are visible to a thread that acquires the count, the TMA
// loads after that thread's proxy fence included); false when none was left.
template <bool kBf16, int kD>
__device__ __forceinline__ bool sage_kv_item(const SageParams& p, int lane) {
  int i = 0;
  if (lane == 0) i = atomicAdd(p.kv_next, 1);
  i = __shfl_sync(0xffffffffu, i, 0);
  if (i >= (p.batch * p.heads_kv - p.kv_from) * p.kv_head_items) return false;
  const int bh = p.kv_from + i / p.kv_head_items, j = i % p.kv_head_items;
  if (j < p.kv_k_items) sage_k_group_item<kBf16, kD>(p, j, bh, lane);
  else sage_v_block_item<kBf16, kD>(p, j - p.kv_k_items, bh, lane);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
  __threadfence();
  __syncwarp();
  if (lane == 0) atomicAdd(p.kv_ready + bh, 1);
  return true;
}

// Whether pair bh's items are all done (acquire); the K/V pass's pairs always are.
__device__ __forceinline__ bool sage_kv_ready(const SageParams& p, int bh) {
  if (p.kv_ready == nullptr || bh < p.kv_from) return true;
  int done;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(done) : "l"(p.kv_ready + bh) : "memory");
  return done >= p.kv_head_items;
}

// The TMA thread's wait for pair bh's items (a no-op for the pairs the K/V pass quantized); the
// warps that quantize items keep taking them meanwhile.
__device__ __forceinline__ void sage_wait_kv_ready(const SageParams& p, int bh) {
  while (!sage_kv_ready(p, bh)) __nanosleep(64);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");  // the TMA loads that follow read them
#endif
}

// The K pass's and the V pass's blocks, 256 threads each. One launch reads K and V once more,
// after the means. The arithmetic of each block does not depend on the order, which is one of two:
//  - `keys_first` (sage_kv_keys_first, the default): by keys, 128-key chunk by chunk from the last,
//    every (batch, kv head) of a chunk before the next, each head's two K groups of the chunk and
//    then its V block (`with_v`); grid (kv_padded / kKvBlock * B * Hkv * (2 with K + 1 with V)), K
//    groups past the last doing nothing. The statistics pass ran chunk by chunk from the first
//    (sage_prepass_kernel), so the last chunks are the ones still in L2, and the blocks that run at
//    once read whole spans of [B, S, H, D] views;
//  - else head by head from the last (batch, kv head) to the first, each head's K groups then its V
//    blocks (k_blocks 0: V only); grid (k_groups * B * Hkv + (FP8: kv_padded / kKvBlock * B * Hkv)).
//    The statistics pass read the heads first to last, so the last heads' K and V are still in L2
//    when this pass starts (FLUX.1's K and V, 57 MB, do not all fit).
template <bool kBf16, int kD>
__global__ void __launch_bounds__(256, DIFFATTN_SAGE_KV_MIN_BLOCKS)
    sage_quant_kv_kernel(const SageParams p, int k_blocks, bool keys_first, bool with_v) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for this one to finish
  // With kv_ready the pairs [0, kv_from) only: the attention kernel quantizes the rest.
  const int heads = p.kv_ready != nullptr ? p.kv_from : p.batch * p.heads_kv;
  if (keys_first) {
    static_assert(kKvBlock == 2 * kKGroup, "two K groups a chunk");
    const int per_chunk = (k_blocks > 0 ? 2 : 0) + (with_v ? 1 : 0);
    const int item = blockIdx.x, r = item % (heads * per_chunk);
    const int chunk = p.kv_padded / kKvBlock - 1 - item / (heads * per_chunk), bh = r / per_chunk, j = r % per_chunk;
    if (k_blocks > 0 && j < 2) {
      if (2 * chunk + j < p.k_groups) sage_quant_k_block<kBf16, kD>(p, 2 * chunk + j, bh);
    } else {
      sage_quant_v_block<kBf16, kD>(p, chunk, bh);
    }
    return;
  }
  const int per_head = static_cast<int>(gridDim.x) / heads, k_per_head = k_blocks / heads;
  const int bh = heads - 1 - static_cast<int>(blockIdx.x) / per_head, r = static_cast<int>(blockIdx.x) % per_head;
  if (r < k_per_head) sage_quant_k_block<kBf16, kD>(p, r, bh);
  else sage_quant_v_block<kBf16, kD>(p, r - k_per_head, bh);
}

}  // namespace diffattn::sage
