#pragma once
// The one-warpgroup walk of block-sparse lists on Hopper (sm_90a): one warpgroup per CTA and 64
// query rows per CTA, several CTAs resident per SM, for every 64 x 64 list (FASTVIDEO_VSA's cubes)
// and the 128 x 128 lists at hd64 (flash_config.h, list_walk). Each CTA walks its query tile's key
// list: thread 0 issues the TMA loads of Q and of the listed key blocks into small K and V rings,
// and the warpgroup runs Q K^T (wgmma from shared memory), the online softmax and P V (P from
// registers), block n's Q K^T together with block n - 1's P V, which runs under block n's softmax.
// The SM's other CTAs, walking other lists, keep the tensor cores busy while one runs its softmax
// or waits for a block, so no producer warpgroup and no turn-taking are needed, and the CTAs never
// wait for each other's lists. It takes the lists, tile rows and FlashParams of the flash kernel's
// listed walk (flash_fwd_hopper.cuh) and gives its results: an empty list writes zeros and LSE
// -inf, keys past a tile's valid rows are never attended. With kSegmented (64 x 64 lists only) it
// walks the lists segmented instead (kernels/sparse/segmented_key_blocks.h): partial tiles' 16-row
// segments packed four to a CTA on the query side (a segment per warp) and four to a key block on
// the key side, each loaded by a 16-row TMA box of its own; a warp attends only the key segments
// its own tile lists.

#include <cstdint>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_fwd_hopper.cuh"
#include "kernels/cuda/flash/flash_params.h"
#include "kernels/cuda/flash/hopper_ptx.cuh"
#include "kernels/cuda/flash/wgmma_ops.cuh"
#include "kernels/sparse/segmented_key_blocks.h"

namespace diffattn::flash {

// The walk's TMA maps: Q (64-row boxes), K and V (kBlockN-row boxes), and Q, K and V again with
// 16-row boxes for segmented blocks (set only for kSegmented launches).
struct WalkTmaMaps {
  CUtensorMap q, k, v, q_segment, k_segment, v_segment;
};

// kBlockN: the lists' tiles (square: kBlockN query rows by kBlockN keys); a CTA takes 64 rows of a
// query tile and walks that tile's list. kKBufs / kVBufs: depth of the K and V rings (block n +
// depth loads once block n's product has read its buffer); kCtasPerSm: the residency the launch
// bounds ask for (registers per thread follow from it: 65536 / (128 x kCtasPerSm)).
// flash_config.h's list_walk chooses them.
template <int kD_, bool kBf16_, int kKBufs_, int kVBufs_, int kCtasPerSm_, int kBlockN_, bool kSegmented_ = false,
          int kQRegisterChunks_ = 0>
struct WalkTraits {
  static constexpr int kD = kD_;
  static constexpr bool kBf16 = kBf16_;
  static constexpr int kKBufs = kKBufs_;
  static constexpr int kVBufs = kVBufs_;
  static constexpr int kCtasPerSm = kCtasPerSm_;
  static constexpr bool kSegmented = kSegmented_;  // walks p.bs_blocks (segmented key blocks)
  static constexpr int kQRegisterChunks = kQRegisterChunks_;  // of Q K^T's A operand, from registers
  static constexpr int kBlockM = 64;                   // query rows per CTA
  static constexpr int kBlockN = kBlockN_;             // keys per block, and query rows per list
  static constexpr int kCtasPerList = kBlockN / kBlockM;
  static constexpr int kThreads = 128;
  static constexpr int kChunks = kD / 64;              // 64-column (128-byte) swizzle chunks
  static constexpr int kQChunkBytes = kBlockM * 128;   // one chunk of the Q tile
  static constexpr int kKVChunkBytes = kBlockN * 128;  // one chunk of a K or V block
  static constexpr int kQBytes = kChunks * kQChunkBytes;
  static constexpr int kKVBytes = kChunks * kKVChunkBytes;
  static constexpr int kKOffset = kQBytes;             // Q first
  static constexpr int kVOffset = kKOffset + kKBufs * kKVBytes;
  static constexpr int kBarrierOffset = kVOffset + kVBufs * kKVBytes;
  static constexpr int kNumBarriers = 1 + kKBufs + kVBufs;
  // +1024: the dynamic shared-memory base is only 16-byte aligned; swizzled tiles need 1024.
  static constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;
  static constexpr int kSAcc = kBlockN / 2;  // score accumulators per thread
  static constexpr int kOAcc = kD / 2;       // output accumulators per thread
  static_assert(kD % 64 == 0, "the walk loads whole 64-column chunks");
  static_assert(kBlockN == 64 || kBlockN == 128, "64- or 128-key lists");
  static_assert(!kSegmented || kBlockN == kSegmentTile, "segmented key blocks are 64 keys");
  static constexpr int kSegmentBytes = kSegmentRows * 128;  // one 16-row box of a chunk
  static_assert(kQRegisterChunks == 0 || kBlockN == 64, "Q K^T from registers is generated for 64-key blocks");
  static_assert(kQRegisterChunks >= 0 && kQRegisterChunks <= kD / 64, "Q has kD / 64 chunks");
  static constexpr int kQRegs = kQRegisterChunks > 0 ? kQRegisterChunks * 16 : 1;  // 4 words per 16 columns
  static_assert(kSmemBytes == list_walk_smem_bytes(kD, ListWalk{kKBufs, kVBufs, kCtasPerSm, kBlockN}),
                "flash_config.h and the kernel disagree on the shared memory");
  static_assert((kSmemBytes + kSmemReservedPerCta) * kCtasPerSm <= kHopperSmemPerSm,
                "the CTAs asked for do not fit in one SM");
};

namespace listed_walk {

// Online softmax of one key block for this thread's two rows (r = 0: row lane/4 of the warp's
// 16, r = 1: lane/4 + 8): s becomes exp2 values in place and st moves on. As in the flash kernel's
// softmax (flash_fwd_hopper.cuh), the running maximum only moves when some row of the warp grew by
// more than 2^8; then alpha holds the factors the output must be scaled by and the return value
// says so.
template <class T>
__device__ __forceinline__ bool softmax(float (&s)[T::kSAcc], RowState& st, float (&alpha)[2], float scale) {
  constexpr int kCols = T::kBlockN / 4;  // values of a row held by this thread
  constexpr float kRescaleLog2 = 8.f;
  auto at = [](int i, int r) { return (i / 2) * 4 + 2 * r + (i % 2); };
  float mx[2];
  bool grew = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float part[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) part[i] = s[at(i, r)];
#pragma unroll
    for (int i = 4; i < kCols; ++i) part[i % 4] = fmaxf(part[i % 4], s[at(i, r)]);
    float m = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
    mx[r] = fmaxf(m, st.m[r]);
    // -inf - -inf is NaN and compares false: a row with no live key yet does not ask to grow.
    grew = grew || (mx[r] - st.m[r]) * scale > kRescaleLog2;
  }
  const bool rescale = __any_sync(0xffffffff, grew);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rescale) {
      const float m_scaled = mx[r] == -INFINITY ? 0.f : mx[r] * scale;
      alpha[r] = ptx::exp2_approx(st.m[r] * scale - m_scaled);
      st.m[r] = mx[r];
    }
    const float m_scaled = st.m[r] == -INFINITY ? 0.f : st.m[r] * scale;
    float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kCols; ++i) {
      const float v = ptx::exp2_approx(fmaf(s[at(i, r)], scale, -m_scaled));
      s[at(i, r)] = v;
      part[i % 4] += v;
    }
    const float sum = (part[0] + part[1]) + (part[2] + part[3]);
    st.l[r] = rescale ? fmaf(st.l[r], alpha[r], sum) : st.l[r] + sum;
  }
  return rescale;
}

// Query tile blockIdx.x of head blockIdx.y, batch blockIdx.z.
template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kCtasPerSm)
    listed_walk_kernel(const __grid_constant__ WalkTmaMaps maps, const __grid_constant__ FlashParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  uint8_t* const base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* const bars = reinterpret_cast<uint64_t*>(base + T::kBarrierOffset);
  uint64_t* const q_full = bars;
  uint64_t* const k_full = bars + 1;
  uint64_t* const v_full = bars + 1 + T::kKBufs;
  const int h = blockIdx.y, b = blockIdx.z;
  int t = blockIdx.x;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int first, len;
  int4 qblk = {-1, -1, -1, -1};  // kSegmented: this CTA's query block
  if constexpr (T::kSegmented) {
    // The packed CTAs' longer walks first (blockIdx.x 0 .. packed - 1), then the whole tiles'.
    const int packed = p.bs_query_ctas - p.bs_query_wholes;
    t = t < packed ? p.bs_query_wholes + t : t - packed;
    const int i = (b * p.heads_q + h) * p.bs_query_ctas + t;
    first = __ldg(p.bs_block_first + i);
    len = __ldg(p.bs_block_counts + i);
    qblk = __ldg(reinterpret_cast<const int4*>(p.bs_query_blocks) + t);
  } else {
    const int r = b * p.bs_stride_b + h * p.bs_stride_h + t / T::kCtasPerList;
    first = __ldg(p.bs_offsets + r);
    len = __ldg(p.bs_offsets + r + 1) - first;
  }
  const int* list = p.bs_indices + first;
  const int4* blocks = reinterpret_cast<const int4*>(p.bs_blocks) + first;
  const int hkv = h / (p.heads_q / p.heads_kv);
  // Block n of the list into buffer n % bufs of the ring at `ring` (K or V), completing on full[buf].
  auto load_block = [&](const CUtensorMap* map, const CUtensorMap* segment_map, int ring, uint64_t* full, int bufs,
                        int n) {
    const int buf = n % bufs;
    ptx::mbar_arrive_expect_tx(full + buf, T::kKVBytes);
    uint8_t* const dst = base + ring + buf * T::kKVBytes;
    if constexpr (T::kSegmented) {
      const int4 blk = __ldg(blocks + n);
      if (blk.y == -1) {
        const int row = static_cast<int>(segment_word_row(blk.x));
#pragma unroll
        for (int ch = 0; ch < T::kChunks; ++ch)
          ptx::tma_load_4d(dst + ch * T::kKVChunkBytes, map, full + buf, ch * 64, row, hkv, b);
      } else {
        const int words[4] = {blk.x, blk.y, blk.z < 0 ? blk.x : blk.z, blk.w < 0 ? blk.x : blk.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = static_cast<int>(segment_word_row(words[i]));
#pragma unroll
          for (int ch = 0; ch < T::kChunks; ++ch)
            ptx::tma_load_4d(dst + ch * T::kKVChunkBytes + i * T::kSegmentBytes, segment_map, full + buf, ch * 64, row,
                             hkv, b);
        }
      }
    } else {
      const int row = __ldg(list + n) * T::kBlockN;
#pragma unroll
      for (int ch = 0; ch < T::kChunks; ++ch)
        ptx::tma_load_4d(dst + ch * T::kKVChunkBytes, map, full + buf, ch * 64, row, hkv, b);
    }
  };
  auto load_k = [&](int n) { load_block(&maps.k, &maps.k_segment, T::kKOffset, k_full, T::kKBufs, n); };
  auto load_v = [&](int n) { load_block(&maps.v, &maps.v_segment, T::kVOffset, v_full, T::kVBufs, n); };
  if (tid == 0) {
    for (int i = 0; i < T::kNumBarriers; ++i) ptx::mbar_init(bars + i, 1);
    ptx::fence_barrier_init();
    // An empty list loads nothing (no load may still be in flight when the CTA exits).
    if (len > 0) {
      ptx::mbar_arrive_expect_tx(q_full, T::kQBytes);
      if (T::kSegmented && qblk.y != -1) {
        const int words[4] = {qblk.x, qblk.y, qblk.z < 0 ? qblk.x : qblk.z, qblk.w < 0 ? qblk.x : qblk.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int ch = 0; ch < T::kChunks; ++ch)
            ptx::tma_load_4d(base + ch * T::kQChunkBytes + i * T::kSegmentBytes, &maps.q_segment, q_full, ch * 64,
                             static_cast<int>(segment_word_row(words[i])), h, b);
      } else {
        const int row = T::kSegmented ? static_cast<int>(segment_word_row(qblk.x)) : t * T::kBlockM;
#pragma unroll
        for (int ch = 0; ch < T::kChunks; ++ch)
          ptx::tma_load_4d(base + ch * T::kQChunkBytes, &maps.q, q_full, ch * 64, row, h, b);
      }
      for (int n = 0; n < T::kKBufs && n < len; ++n) load_k(n);
      for (int n = 0; n < T::kVBufs && n < len; ++n) load_v(n);
    }
  }
  __syncthreads();

  const uint64_t q_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(base), 16, 1024);
  const uint64_t k_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(base + T::kKOffset), 16, 1024);
  // V is [keys][D]: MN-major for the P V product; 64-column chunks are kKVChunkBytes apart.
  const uint64_t v_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(base + T::kVOffset), T::kKVChunkBytes, 1024);
  float o[T::kOAcc];
#pragma unroll
  for (int i = 0; i < T::kOAcc; ++i) o[i] = 0.f;
  RowState st{{-INFINITY, -INFINITY}, {0.f, 0.f}};
  // This thread's part of the Q tile's first kQRegisterChunks chunks as wgmma A fragments, read
  // once from the swizzled tile (below, once Q has landed): words 4kk .. 4kk + 3 hold columns
  // 16kk .. 16kk + 15 of rows lane/4 and lane/4 + 8 of this warp's 16.
  uint32_t qa[T::kQRegs];
  // Q K^T of block n into s (issued and committed, not waited for).
  auto issue_qk = [&](float (&s)[T::kSAcc], int n) {
    const int kbuf = n % T::kKBufs;
    ptx::mbar_wait(k_full + kbuf, (n / T::kKBufs) & 1);
    ptx::fence_operands(o);
    ptx::wgmma_fence();
    const uint64_t k0 = ptx::smem_desc_advance(k_desc0, kbuf * T::kKVBytes);
    if constexpr (T::kQRegisterChunks > 0) ptx::fence_operands(qa);
#pragma unroll
    for (int kk = 0; kk < T::kD / 16; ++kk) {
      const uint32_t col = (kk % 4) * 32;  // 16 columns of 2 bytes within a 64-column chunk
      const uint64_t kd = ptx::smem_desc_advance(k0, (kk / 4) * T::kKVChunkBytes + col);
      bool from_registers = false;
      if constexpr (T::kQRegisterChunks > 0) {
        if (kk < T::kQRegisterChunks * 4) {
          const uint32_t a[4] = {qa[4 * kk + 0], qa[4 * kk + 1], qa[4 * kk + 2], qa[4 * kk + 3]};
          Wgmma<T::kBlockN>::template rs_k<T::kBf16>(s, a, kd, kk > 0 ? 1 : 0);
          from_registers = true;
        }
      }
      if (!from_registers)
        Wgmma<T::kBlockN>::template ss<T::kBf16>(s, ptx::smem_desc_advance(q_desc0, (kk / 4) * T::kQChunkBytes + col),
                                                 kd, kk > 0 ? 1 : 0);
    }
    ptx::wgmma_commit();
  };
  // Block n's scores in s to probabilities, in place (keys past the block's valid rows, a padded
  // tile's or the sequence's end, are never attended). Returns whether the output must be scaled
  // by alpha.
  auto softmax_scores = [&](float (&s)[T::kSAcc], int n, float (&alpha)[2]) {
    int valid;
    if constexpr (T::kSegmented) {
      // A warp attends a box's rows only where its own tile lists the box's tile.
      const int4 blk = __ldg(blocks + n);
      valid = segment_word_rows_for(blk.x, warp);
      if (blk.y != -1) {
        // Four 16-row boxes: keys past each box's rows are never attended (j / 2: the box of
        // this thread's columns j * 8 ..).
        const int rows[4] = {segment_word_rows_for(blk.x, warp), segment_word_rows_for(blk.y, warp),
                             segment_word_rows_for(blk.z, warp), segment_word_rows_for(blk.w, warp)};
        if (rows[0] + rows[1] + rows[2] + rows[3] < T::kBlockN) {
#pragma unroll
          for (int j = 0; j < T::kBlockN / 8; ++j) {
            const int limit = rows[j / 2] - (lane % 4) * 2 - (j % 2) * 8;
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if ((e & 1) >= limit) s[j * 4 + e] = -INFINITY;
          }
        }
        valid = T::kBlockN;
      }
    } else {
      const int kb = __ldg(list + n);
      valid = p.bs_tile_rows != nullptr ? __ldg(p.bs_tile_rows + kb) : p.seqlen_k - kb * T::kBlockN;
    }
    if (valid < T::kBlockN) {
      const int limit = valid - (lane % 4) * 2;
#pragma unroll
      for (int j = 0; j < T::kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * 8 + (e & 1) >= limit) s[j * 4 + e] = -INFINITY;
    }
    return softmax<T>(s, st, alpha, p.scale_log2);
  };
  // The output rescaled where the maximum moved, and the probabilities packed for the P V product.
  auto finish_block = [&](const float (&s)[T::kSAcc], uint32_t (&pr)[T::kBlockN / 4], bool rescale,
                          const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < T::kBlockN / 4; ++i) pr[i] = pack2<T::kBf16>(s[2 * i], s[2 * i + 1]);
    if (rescale) {
#pragma unroll
      for (int j = 0; j < T::kD / 8; ++j) {
        o[j * 4 + 0] *= alpha[0];
        o[j * 4 + 1] *= alpha[0];
        o[j * 4 + 2] *= alpha[1];
        o[j * 4 + 3] *= alpha[1];
      }
    }
  };
  // P V of block n into o (issued and committed, not waited for).
  auto issue_pv = [&](uint32_t (&pr)[T::kBlockN / 4], int n) {
    const int vbuf = n % T::kVBufs;
    ptx::mbar_wait(v_full + vbuf, (n / T::kVBufs) & 1);
    ptx::fence_operands(o);
    ptx::fence_operands(pr);
    ptx::wgmma_fence();
    const uint64_t v0 = ptx::smem_desc_advance(v_desc0, vbuf * T::kKVBytes);
#pragma unroll
    for (int kk = 0; kk < T::kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pr[4 * kk + 0], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
      Wgmma<T::kD>::template rs<T::kBf16>(o, a, ptx::smem_desc_advance(v0, kk * 16 * 128), 1);
    }
    ptx::wgmma_commit();
  };
  if (len > 0) ptx::mbar_wait(q_full, 0);
  if constexpr (T::kQRegisterChunks > 0) {
    // Row r of a 128-byte-swizzled chunk keeps its 16-byte unit u at (u ^ (r % 8)) * 16; this
    // thread's rows are warp * 16 + lane / 4 (+ 8), so r % 8 = lane / 4 % 8 for both.
    const int r = warp * 16 + lane / 4, x = (lane / 4) % 8;
#pragma unroll
    for (int kk = 0; kk < T::kQRegisterChunks * 4; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r + (i % 2) * 8, unit = (kk % 4) * 2 + i / 2;
        qa[4 * kk + i] = *reinterpret_cast<const uint32_t*>(base + (kk / 4) * T::kQChunkBytes + row * 128 +
                                                            ((unit ^ x) << 4) + (lane % 4) * 4);
      }
  }
  // Block n - 1's P V runs on the tensor cores while block n's softmax runs: block n's Q K^T and
  // block n - 1's P V are issued together, the softmax starts once Q K^T is done, and the output
  // is rescaled and P converted once P V is done too (no register a product in flight reads or
  // writes is touched meanwhile). With two K buffers block n + 2 loads into block n's after both
  // products are done, as V's buffer takes block n - 1 + kVBufs; with one K buffer, block n + 1
  // loads into it as soon as block n's Q K^T is done (one more barrier a block).
  static_assert(T::kKBufs == 1 || T::kKBufs == 2, "the overlapped walk keeps one or two K buffers");
  float s[T::kSAcc];
  uint32_t pr[T::kBlockN / 4];
  float alpha[2];
  // The first block alone (no P V to overlap), so that the loop below has no branch around its
  // products (ptxas serialises the wgmma when it cannot tell which are in flight).
  if (len > 0) {
    issue_qk(s, 0);
    ptx::wgmma_wait<0>();
    ptx::fence_operands(s);
    ptx::named_barrier_sync(1, T::kThreads);
    if (tid == 0 && T::kKBufs < len) load_k(T::kKBufs);
    const bool rescale = softmax_scores(s, 0, alpha);
    finish_block(s, pr, rescale, alpha);
  }
  for (int n = 1; n < len; ++n) {
    issue_qk(s, n);
    issue_pv(pr, n - 1);
    ptx::wgmma_wait<1>();
    ptx::fence_operands(s);
    if constexpr (T::kKBufs == 1) {
      ptx::named_barrier_sync(1, T::kThreads);
      if (tid == 0 && n + 1 < len) load_k(n + 1);
    }
    const bool rescale = softmax_scores(s, n, alpha);
    ptx::wgmma_wait<0>();
    ptx::fence_operands(o);
    ptx::named_barrier_sync(1, T::kThreads);
    if (tid == 0) {
      if (T::kKBufs == 2 && n + 2 < len) load_k(n + 2);
      if (n - 1 + T::kVBufs < len) load_v(n - 1 + T::kVBufs);
    }
    finish_block(s, pr, rescale, alpha);
  }
  if (len > 0) {
    issue_pv(pr, len - 1);
    ptx::wgmma_wait<0>();
    ptx::fence_operands(o);
  }

  // Rows with no live key (an empty list) finish as zeros with LSE -inf. A segmented CTA writes
  // only its query block's rows: a one-box block's first rows, each box's rows for its warp.
  int row0 = t * T::kBlockM + warp * 16, rows_here = p.seqlen_q - row0;
  if constexpr (T::kSegmented) {
    if (qblk.y == -1) {
      row0 = static_cast<int>(segment_word_row(qblk.x)) + warp * 16;
      rows_here = segment_word_rows(qblk.x) - warp * 16;
    } else {
      const int word = warp == 0 ? qblk.x : warp == 1 ? qblk.y : warp == 2 ? qblk.z : qblk.w;
      row0 = static_cast<int>(segment_word_row(word));
      rows_here = segment_word_rows(word);
    }
  }
  uint16_t* out = static_cast<uint16_t*>(p.out);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float l = st.l[rr];
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = row0 + lane / 4 + 8 * rr;
    if (lane / 4 + 8 * rr >= rows_here) continue;
    if (p.lse != nullptr && lane % 4 == 0)
      p.lse[b * p.lse_stride_b + h * p.lse_stride_h + row * p.lse_stride_s] =
          l > 0.f ? (st.m[rr] * p.scale_log2 + __log2f(l)) * 0.69314718055994531f : -INFINITY;
    uint16_t* dst = out + b * p.out_stride_b + int64_t(row) * p.out_stride_s + h * p.out_stride_h + (lane % 4) * 2;
#pragma unroll
    for (int j = 0; j < T::kD / 8; ++j)
      *reinterpret_cast<uint32_t*>(dst + j * 8) = pack2<T::kBf16>(o[j * 4 + 2 * rr] * inv, o[j * 4 + 2 * rr + 1] * inv);
  }
#else
  __trap();  // built for an architecture without wgmma/TMA: the launcher never selects this
#endif
}

}  // namespace listed_walk
}  // namespace diffattn::flash
