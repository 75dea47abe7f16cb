#pragma once
// SAGE_ATTN's attention kernel for Hopper (sm_90a), after the quantization kernels have written
// INT8 Q and K and (FP8 mode) transposed E4M3 V. One persistent CTA per SM: warpgroup 0 is the
// producer (one thread issues TMA loads of the Q tile and a kStages-deep K/V ring); two to four
// consumer warpgroups own 64 query rows each. A consumer computes S = Q K^T with s8 wgmma into
// int32, scales it by its rows' and keys' INT8 scales, runs the exact online softmax of the block
// (kernels/sage/sage_quant.h), quantizes P and multiplies it by V into a block accumulator of its
// own (two-level accumulation: the FP8 tensor cores keep about 22 bits, so each block's sum is
// added into the fp32 output by ordinary adds).
//  - Two consumer groups (kConsumers 2) overlap their own work: the next block's Q K^T is issued
//    together with the previous block's P V, so the softmax runs under the tensor cores; the two
//    groups issue their products in turn.
//  - Three consumer groups (kConsumers 3) run each block's Q K^T, softmax and P V in order, and the
//    other two groups keep the tensor cores busy meanwhile. Holding no second score tile is what
//    lets three groups share the register file.
//  - Four in-order groups (kConsumers 4, 256-row tiles, hd64 with FP8 P V only): at hd64 the
//    products are short and the three-group kernel waits on its softmax chains (ncu on SD3: 3.25
//    warps per scheduler, one eligible in two cycles), so a fourth group adds the warps that hide
//    them; its 112 registers per consumer thread hold the hd64 FP8 tile state (the 16-bit P V mode
//    spilled 300 bytes there and keeps three groups).
// With kQk16 the same kernel is FLASHINFER_ATTN's QK16/V8 mode: Q and K come straight from the
// caller's 16-bit tensors (64-column chunks, 128-byte swizzle, as FLASH_ATTN loads them) and
// Q K^T runs as a bf16/fp16 wgmma into fp32 scores; the softmax scale is applied to the score, and
// the FP8 P V path is unchanged.
// With kFusedQ (three groups, INT8 Q K^T) the producer warpgroup's idle warps 1-3 quantize each
// tile's Q rows from the caller's tensor into the Q buffer, a tile ahead of the consumers
// (SageQQuantizer), in place of the Q pass and the INT8 Q tile's TMA load: Q is read once, not
// read, written and read again.
// With kListed (two consumer groups: 128-row query tiles, 128-key blocks) the kernel walks
// block-sparse key-tile lists (SageParams::bs_*): each query tile visits only the key blocks its
// list names, in list order, with keys past a padded tile's valid rows masked; RAINFUSION_ATTN's
// 8-bit fine pass.

#include <cstdint>
#include <type_traits>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/flash/hopper_ptx.cuh"
#include "kernels/cuda/flash/wgmma_ops.cuh"
#include "kernels/cuda/sage/sage_config.h"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/cuda/sage/sage_quant.cuh"
#include "kernels/cuda/sage/sage_wgmma.cuh"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

namespace ptx = flash::ptx;

struct SageTmaMaps {
  // q, k: INT8 [B, H, S, D], or the caller's (kQk16); v: E4M3 [B, Hkv, D, kv_padded], or the caller's V (FP16 mode)
  CUtensorMap q, k, v;
};

// kPolyEvery: measured on an H200 (dev/sage_time.cc) for the three in-order groups, every
// exponential on the MUFU unit is fastest (long hd128 rows +3-6 % against every fourth on the FMA
// pipe, +9-14 % against every second): those groups are bound by issue slots, not by the MUFU unit.
// At hd64 (2026-12-04, bench/results/sage-hd64-2026-12-04-h200/) every eighth on the FMA pipe was
// 1-2.5 % faster in the three-group FP8 mode and every fourth 2-8 % slower in every mode, while four
// groups gained 4-9 %: the groups' latency, not the MUFU unit, bounds hd64.
template <int kD_, bool kBf16_, bool kPvFp8_, int kConsumers_ = 2, bool kQk16_ = false,
          int kPolyEvery_ = kConsumers_ == 2 ? 4 : 0, bool kListed_ = false, bool kSplit_ = false,
          bool kFusedQ_ = false, bool kWalk_ = false, bool kKvInKernel_ = false>
struct SageTraits {
  // The launch of a key-masked call with a key walk (SageParams::kv_walk; run_sage_attn.cu): a
  // kernel of its own, so that calls without a key mask run exactly the code they ran before the
  // walk existed (one kernel checking for the walk in every block made them 1-3 % slower).
  static constexpr bool kWalk = kWalk_;
  // The in-order groups' launch that splits a short last wave into pieces (sage_config.h,
  // sage_tail_split). A kernel of its own: the pieces' bookkeeping cost the whole-tile kernel
  // 2.5-3.5 % at hd128 (ptxas spilled 16 bytes), so the launcher takes it only where it splits.
  static constexpr bool kSplit = kSplit_;
  static constexpr bool kListed = kListed_;  // the block-sparse walk (see the file comment)
  // The producer warpgroup's warps 1-3 quantize each tile's Q rows themselves (SageQQuantizer),
  // in place of the Q pass and the INT8 Q tile's TMA load (see the file comment).
  static constexpr bool kFusedQ = kFusedQ_;
  // The launch of a call whose K and V the producer warpgroup's warps 1-3 quantize while the
  // consumers run (SageParams::kv_ready; run_sage_attn.cu): a kernel of its own, since the code
  // made ptxas spill more in the kernels it was added to (4-group hd64 40 -> 88 bytes, the
  // two-group kernel 0 -> 48). sage_kv_in_kernel_fits says which kernels have one.
  static constexpr bool kKvInKernel = kKvInKernel_;
  static constexpr int kPolyEvery = kPolyEvery_;  // see SageConsumer::exp2_col
  static constexpr int kD = kD_;
  static constexpr bool kBf16 = kBf16_;    // the caller's dtype: the output, and P and V in the FP16 mode
  static constexpr bool kPvFp8 = kPvFp8_;
  static constexpr int kConsumers = kConsumers_;  // consumer warpgroups of 64 query rows
  static constexpr bool kInOrder = kConsumers >= 3;  // see the file comment
  static constexpr int kBlockM = 64 * kConsumers;
  static constexpr int kBlockN = kKvBlock;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr bool kQk16 = kQk16_;  // 16-bit Q K^T on the caller's Q and K (see the file comment)
  // INT8 Q and K rows are kD bytes: 128-byte swizzle at hd128, 64-byte swizzle at hd64. 16-bit rows
  // are kD / 64 chunks of 128 bytes, each chunk a [rows][64] tile with 128-byte swizzle.
  static constexpr int kRowBytes = kQk16 ? 2 * kD : kD;
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKBytes = kBlockN * kRowBytes;
  static constexpr int kQkChunks = kQk16 ? kD / 64 : 1;
  static constexpr int kQChunkBytes = kQBytes / kQkChunks;
  static constexpr int kKChunkBytes = kKBytes / kQkChunks;
  static_assert(!kQk16 || kPvFp8, "the 16-bit Q K^T runs with the FP8 P V only");
  // The P V product also sums each row of P, so the row sums come out of the tensor cores with the
  // output instead of one add per score (the in-order groups are bound by issue slots).
  //  - FP8 mode: V gains eight rows of E4M3 ones (a constant atom written once behind each stage's
  //    V rows).
  //  - FP16 mode (kOnesChunk): the product gains a last 64-column chunk, of which it reads eight
  //    columns, from one 16-bit tile of ones. The chunks of an MN-major operand lie a fixed stride
  //    apart, so each stage's descriptor gets its own stride, the one that puts its chunk after the
  //    last V chunk on the ones (see v_chunk_offset). The hd128 split kernel keeps its adds: with
  //    the ones ptxas spilled 84 bytes there and FLUX.1 ran 1-2 % slower, while SD3's hd64 split
  //    kernel gained 7 % (bench/results/sage-rowsum-2026-12-03-h200/). At hd64 the overlapped
  //    groups (short calls, sage_config.h) take the ones too; the block-sparse walk keeps its adds.
  static constexpr bool kOnesChunk = !kPvFp8 && !kListed && (kD == 64 || (kInOrder && !kSplit));
  static constexpr bool kRowSumByMma = kPvFp8 || kOnesChunk;
  static constexpr int kPvN = kD + (kRowSumByMma ? 8 : 0);  // columns of the P V product
  // V: E4M3 [kD rows][128 keys] (128-byte rows) and its ones atom, or the caller's [128 keys][kD]
  // in 64-column chunks.
  static constexpr int kVChunkBytes = kBlockN * 128;
  static constexpr int kVBytes = kPvFp8 ? kD * kBlockN : (kD / 64) * kVChunkBytes;  // what TMA loads
  static constexpr int kVStageBytes = kPvFp8 ? kPvN * kBlockN : kVBytes;
  static constexpr int kOnesBytes = kOnesChunk ? kVChunkBytes : 0;
  // The in-order groups keep two Q buffers where they fit, so that the next tile's Q loads while
  // this tile runs instead of after its last Q K^T (QK16/V8's 16-bit tile has room for one). The
  // overlapped groups keep one: the second buffer's bookkeeping made them spill.
  static constexpr int kRingBytes = kStages * (kKBytes + kVStageBytes);
  // kFusedQ: the caller's 16-bit Q rows of a tile, staged (row-major, 2 kD bytes a row) for the
  // quantizing warps, and the rows' INT8 scales of each Q buffer.
  static constexpr int kQStageBytes = kFusedQ ? kBlockM * kD * 2 : 0;
  static constexpr int kQScaleBytes = kFusedQ ? 2 * kBlockM * 4 : 0;  // both buffers' (kFusedQ needs two)
  static constexpr int kQBuffers =
      kInOrder && 2 * kQBytes + kRingBytes + kOnesBytes + kQStageBytes + kQScaleBytes + 2048 <= 227 * 1024 ? 2 : 1;
  // The tiles' places. In units of a V chunk (16 KB), the FP16 mode's ones chunk at hd128 needs
  // stage s's first V chunk at 2s and its second at 6 + s, so that both lie on a line towards the
  // ones at 12 (strides 6, 5 and 4 units); the K stages fill the gaps (1, 3, 5) and the Q buffers
  // 9-12. Everywhere else: the Q buffers, the K stages, the V stages (and ones), one after another.
  static constexpr bool kInterleaved = kOnesChunk && kD == 128;
  static constexpr int kQOffset = kInterleaved ? 9 * kVChunkBytes : 0;
  static constexpr int kKOffset = kInterleaved ? kVChunkBytes : kQBuffers * kQBytes;
  static constexpr int kKStride = kInterleaved ? 2 * kVChunkBytes : kKBytes;
  static constexpr int kVOffset = kInterleaved ? 0 : kKOffset + kStages * kKBytes;
  static constexpr int kOnesOffset = kInterleaved ? 12 * kVChunkBytes : kVOffset + kStages * kVStageBytes;
  static_assert(!kInterleaved || (kStages == 3 && kKBytes <= kVChunkBytes && kQBuffers * kQBytes <= 3 * kVChunkBytes),
                "the interleaved places hold three stages and Q buffers of at most three units");
  // V chunk c of stage s (the FP16 mode's 64-column chunks; the FP8 mode's stage is one piece).
  static constexpr int v_chunk_offset(int s, int c) {
    if constexpr (kInterleaved) return (c == 0 ? 2 * s : 6 + s) * kVChunkBytes;
    return kVOffset + s * kVStageBytes + c * kVChunkBytes;
  }
  // kOnesChunk: the distance from stage s's first V chunk to its next chunk, the last of which is
  // the ones (the stage's own stride).
  static constexpr int v_chunk_stride(int s) { return (kOnesOffset - v_chunk_offset(s, 0)) / (kD / 64); }
  static constexpr int kQStageOffset = kOnesOffset + kOnesBytes;
  static constexpr int kQScaleOffset = kQStageOffset + kQStageBytes;
  static constexpr int kBarrierOffset = kQScaleOffset + kQScaleBytes;
  static constexpr int kNumBarriers = 2 * kQBuffers + 4 * kStages;
  static constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;
  // The register file (64K) split between the producer and the consumers (setmaxnreg).
  // setmaxnreg moves registers within the CTA's own launch allocation: kThreads times the launch's
  // per-thread count, which __launch_bounds__ caps at 65536 / kThreads rounded down to a multiple of
  // 8 (four groups: 96 per thread, so 24 for the producer leaves 112 for each consumer; asking for
  // more waits forever).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = kConsumers == 3 ? 32 : 24;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : kConsumers == 3 ? 160 : 112;
  static_assert(kConsumers >= 2 && kConsumers <= 4, "two to four consumer warpgroups");
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= kThreads * kLaunchRegs,
                "the setmaxnreg split exceeds the CTA's launch allocation");
  static_assert(kD == 64 || kD == 128, "SAGE_ATTN's Hopper kernel has hd64 and hd128");
  static_assert(kConsumers < 4 || (kD == 64 && kPvFp8 && !kListed && !kFusedQ),
                "four groups: hd64 with FP8 P V (the tile state of the others does not fit in 112 registers)");
  static_assert(!kListed || (kBlockM == kBlockN && !kQk16), "lists of square tiles, on the INT8 Q K^T");
  static_assert(!kSplit || (kInOrder && !kListed), "the in-order groups split whole tiles' key blocks");
  static_assert(!kFusedQ || (kInOrder && !kQk16 && !kListed && kQBuffers == 2),
                "the producer quantizes Q for the in-order groups' INT8 Q K^T, into the buffer they do not read");
  static_assert(!kFusedQ || kBlockM == 3 * 64, "warp w of the producer quantizes consumer group w's 64 rows");
  static_assert(!kWalk || !kListed, "block-sparse lists take no key mask");
  static_assert(!kKvInKernel || sage_kv_in_kernel_fits(kConsumers, kPvFp8, !kQk16, kListed || kWalk),
                "K and V in the kernel: in-order groups with FP8 P V and INT8 Q K^T, no lists or walk");
  using Split =
      SageTraits<kD_, kBf16_, kPvFp8_, kConsumers_, kQk16_, kPolyEvery_, kListed_, true, kFusedQ_, kWalk_, kKvInKernel_>;
  using Walk = SageTraits<kD_, kBf16_, kPvFp8_, kConsumers_, kQk16_, kPolyEvery_, kListed_, kSplit_, kFusedQ_, true>;
  using KvInKernel = SageTraits<kD_, kBf16_, kPvFp8_, kConsumers_, kQk16_, kPolyEvery_, kListed_, kSplit_, kFusedQ_,
                                kWalk_, true>;
  static_assert(kSmemBytes <= 227 * 1024, "tile does not fit in shared memory");
};

// wgmma descriptor of a K-major tile whose rows are `row_bytes` (64 or 128) long, swizzled to match.
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t addr, int row_bytes) {
  uint64_t desc = static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(1) << 16;  // leading byte offset: unused by swizzled K-major tiles
  desc |= static_cast<uint64_t>((8 * row_bytes) >> 4) << 32;
  desc |= static_cast<uint64_t>(row_bytes == 128 ? 1 : 2) << 62;
  return desc;
}

struct SageTile {
  int b, h, m_block;
  int n_begin, n_blocks;     // the key blocks [n_begin, n_blocks) of the work item (list positions with kListed)
  const std::int32_t* list;  // kListed: the query tile's key blocks
};

template <class T>
__device__ __forceinline__ SageTile decode_tile(const SageParams& p, int tile) {
  SageTile c;
  int m = tile % p.num_m_blocks;
  const int bh = tile / p.num_m_blocks;
  c.h = bh % p.heads_q;
  c.b = bh / p.heads_q;
  if (p.causal) m = p.num_m_blocks - 1 - m;  // longest rows first
  c.m_block = m;
  c.list = nullptr;
  c.n_begin = 0;
  if constexpr (T::kListed) {
    const std::int64_t row = static_cast<std::int64_t>(bh) * p.num_m_blocks + m;
    const int begin = __ldg(p.bs_offsets + row);
    c.list = p.bs_indices + begin;
    c.n_blocks = __ldg(p.bs_offsets + row + 1) - begin;
    return c;
  }
  if constexpr (T::kWalk) {  // a key mask's blocks (never causal)
    c.n_blocks = __ldg(p.kv_walk_count + c.b);
    return c;
  }
  int kv_end = p.seqlen_k;
  if (p.causal) kv_end = min(kv_end, (m + 1) * T::kBlockM);
  c.n_blocks = (kv_end + T::kBlockN - 1) / T::kBlockN;
  return c;
}

// Entry n of batch b's key walk (SageParams::kv_walk): {first key, length | drops a key << 16}.
__device__ __forceinline__ int2 walk_entry(const SageParams& p, int b, int n) {
  return __ldg(reinterpret_cast<const int2*>(p.kv_walk) + static_cast<std::int64_t>(b) * p.kv_walk_stride + n);
}

// Work item `item` of the in-order groups' persistent loop (sage_config.h, sage_tail_split): a whole
// tile, or piece k of a split tail tile, whose key blocks are the k-th of split_pieces even ranges
// and whose partials are the (item - split_begin)-th (SageParams::split_*); T::kSplit launches only.
template <class T>
__device__ __forceinline__ SageTile decode_item(const SageParams& p, int item) {
  if (!T::kSplit || item < p.split_begin) return decode_tile<T>(p, item);
  const int j = item - p.split_begin, k = j % p.split_pieces;
  SageTile c = decode_tile<T>(p, p.split_begin + j / p.split_pieces);
  const int n = c.n_blocks;
  c.n_begin = static_cast<int>(sage_piece_begin(n, p.split_pieces, k));
  c.n_blocks = static_cast<int>(sage_piece_begin(n, p.split_pieces, k + 1));
  return c;
}

// The LSE (natural log) of query row `row` of tile `c`, from its running maximum `m` and row sum `l`
// (log2 units; in the FP8 mode l sums 448 p), plus what smoothing K took from its scores (none with
// kQk16); -inf for a row that saw no key. The whole tiles' epilogue and sage_merge_kernel both.
template <class T>
__device__ __forceinline__ float row_lse(const SageParams& p, const SageTile& c, int row, float m, float l) {
  if (!(l > 0.f)) return -INFINITY;
  float shift = 0.f;
  if constexpr (!T::kQk16) shift = p.q_shift[(static_cast<std::int64_t>(c.b) * p.heads_q + c.h) * p.seqlen_q + row];
  return (m + __log2f(l) - (T::kPvFp8 ? kLog2E4m3Max : 0.f) + shift) * 0.69314718055994531f;
}

template <class T>
__device__ __forceinline__ int work_items(const SageParams& p) {
  return T::kSplit ? p.num_items : p.num_tiles;
}

// The key block a tile visits n-th: n, its list's n-th entry, or its batch's n-th walk entry.
template <class T>
__device__ __forceinline__ int key_block(const SageParams& p, const SageTile& c, int n) {
  if constexpr (T::kListed) return __ldg(c.list + n);
  else if constexpr (T::kWalk) return walk_entry(p, c.b, n).x / T::kBlockN;
  else return n;
}

// The n-th key block of a tile as the softmax reads it: its index j (with a key walk, n itself:
// see walked_block), and the key from which on its keys are not attended (the sequence's end, or,
// kListed, the end of a padded tile's valid rows). The consumers take it before they wait for the
// block, so that the list's loads are not on the softmax's path.
struct KeyBlock {
  int j, end;
};

template <class T>
__device__ __forceinline__ KeyBlock key_block_at(const SageParams& p, const SageTile& c, int n) {
  if constexpr (T::kListed) {
    const int j = n < c.n_blocks ? __ldg(c.list + n) : 0;
    const int end = p.bs_tile_rows != nullptr && n < c.n_blocks
                        ? min(p.seqlen_k, j * T::kBlockN + __ldg(p.bs_tile_rows + j))
                        : p.seqlen_k;
    return {j, end};
  } else {
    return {n, p.seqlen_k};
  }
}

// With a key walk (T::kWalk), the block of walk entry kb.j, and whether the key mask also drops one
// of its keys. Read where it is used, so that no register holds it across the Q K^T product: held
// from key_block_at on, ptxas spilled 60 bytes in the kernel that quantizes Q itself.
struct WalkedBlock {
  int j;
  bool drops_key;
};

__device__ __forceinline__ WalkedBlock walked_block(const SageParams& p, const SageTile& c, const KeyBlock& kb) {
  const int2 e = walk_entry(p, c.b, kb.j);
  return {e.x / kKvBlock, ((e.y >> 16) & 1) != 0};
}

template <class T>
struct SageSmem {
  uint8_t* base;
  __device__ uint8_t* q(int b) const { return base + T::kQOffset + b * T::kQBytes; }
  __device__ uint8_t* k(int s) const { return base + T::kKOffset + s * T::kKStride; }
  __device__ uint8_t* v(int s) const { return base + T::kVOffset + s * T::kVStageBytes; }  // the FP8 mode's stage
  __device__ uint8_t* v_chunk(int s, int c) const { return base + T::v_chunk_offset(s, c); }
  __device__ uint8_t* ones() const { return base + T::kOnesOffset; }
  __device__ uint8_t* q_stage() const { return base + T::kQStageOffset; }
  __device__ float* q_scale(int b) const { return reinterpret_cast<float*>(base + T::kQScaleOffset) + b * T::kBlockM; }
  __device__ uint64_t* bar() const { return reinterpret_cast<uint64_t*>(base + T::kBarrierOffset); }
  __device__ uint64_t* q_full(int b) const { return bar() + b; }
  __device__ uint64_t* q_empty(int b) const { return bar() + T::kQBuffers + b; }
  __device__ uint64_t* k_full(int s) const { return bar() + 2 * T::kQBuffers + s; }
  __device__ uint64_t* k_empty(int s) const { return bar() + 2 * T::kQBuffers + T::kStages + s; }
  __device__ uint64_t* v_full(int s) const { return bar() + 2 * T::kQBuffers + 2 * T::kStages + s; }
  __device__ uint64_t* v_empty(int s) const { return bar() + 2 * T::kQBuffers + 3 * T::kStages + s; }
};

// Which Q buffer a CTA's tiles use in turn, and the phase of its barriers, from one count of the
// CTA's tiles (one register: the three-group consumers have none to spare).
template <class T>
struct QSlot {
  uint32_t count = 0;
  __device__ int buf() const { return T::kQBuffers == 1 ? 0 : static_cast<int>(count & 1); }
  __device__ uint32_t phase() const { return (T::kQBuffers == 1 ? count : count >> 1) & 1; }
  __device__ void advance() { ++count; }
};
template <class T>
__device__ __forceinline__ void sage_producer(const SageTmaMaps& maps, const SageParams& p, const SageSmem<T>& sm) {
  const int group = p.heads_q / p.heads_kv;
  int stage = 0;
  uint32_t phase = 0;
  QSlot<T> q;
  [[maybe_unused]] int ready_pair = -1;  // the pair whose in-kernel K/V items were last waited for
  for (int item = blockIdx.x; item < work_items<T>(p); item += gridDim.x, q.advance()) {
    const SageTile c = decode_item<T>(p, item);
    // With SageParams::kv_ready, a pair quantized in this kernel is waited for before the tile's Q
    // is loaded, so the consumers (which read the key scales once Q is in) never run ahead of it.
    if constexpr (T::kKvInKernel)
      if (const int pair = c.b * p.heads_kv + c.h / group; p.kv_ready != nullptr && pair != ready_pair) {
        sage_wait_kv_ready(p, pair);
        ready_pair = pair;
      }
    if constexpr (!T::kFusedQ) {  // else warps 1-3 fill the Q buffer (SageQQuantizer)
      ptx::mbar_wait(sm.q_empty(q.buf()), q.phase() ^ 1);
      ptx::mbar_arrive_expect_tx(sm.q_full(q.buf()), T::kQBytes);
#pragma unroll
      for (int ch = 0; ch < T::kQkChunks; ++ch)
        ptx::tma_load_4d(sm.q(q.buf()) + ch * T::kQChunkBytes, &maps.q, sm.q_full(q.buf()), ch * 64,
                         c.m_block * T::kBlockM, c.h, c.b);
    }
    const int hkv = c.h / group;
    for (int n = c.n_begin; n < c.n_blocks; ++n) {
      const int key0 = key_block<T>(p, c, n) * T::kBlockN;
      ptx::mbar_wait(sm.k_empty(stage), phase ^ 1);
      ptx::mbar_arrive_expect_tx(sm.k_full(stage), T::kKBytes);
#pragma unroll
      for (int ch = 0; ch < T::kQkChunks; ++ch)
        ptx::tma_load_4d(sm.k(stage) + ch * T::kKChunkBytes, &maps.k, sm.k_full(stage), ch * 64, key0, hkv, c.b);
      ptx::mbar_wait(sm.v_empty(stage), phase ^ 1);
      ptx::mbar_arrive_expect_tx(sm.v_full(stage), T::kVBytes);
      if constexpr (T::kPvFp8) {
        ptx::tma_load_4d(sm.v(stage), &maps.v, sm.v_full(stage), key0, 0, hkv, c.b);
      } else {
#pragma unroll
        for (int ch = 0; ch < T::kD / 64; ++ch)
          ptx::tma_load_4d(sm.v_chunk(stage, ch), &maps.v, sm.v_full(stage), ch * 64, key0, hkv, c.b);
      }
      if (++stage == T::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// kFusedQ: warp w (0-2) of the producer warpgroup's warps 1-3 turns consumer group w's 64 rows of
// each tile's Q into INT8 codes in the tile's Q buffer and their scales beside it, with the Q pass's
// arithmetic (q_fold_scale, q_code_ratio, q_scale_of, q_codes: the same bits). The caller's rows are
// staged in shared memory by cp.async (16-byte pieces) as soon as the warp has quantized the
// previous tile's, so they load while the consumers run. The codes go where the TMA load would put
// them (128- or 64-byte swizzle), and each of the warps' threads arrives on the buffer's q_full (96
// arrivals) after a proxy fence, since the products read the buffer through the async proxy. Rows
// past the sequence stage as zeros: codes and scale 0.
template <class T>
struct SageQQuantizer {
  static constexpr int kRows = 64;                     // rows of a warp
  static constexpr int kRowStage = 2 * T::kD;          // bytes of a staged row
  static constexpr int kCopyLanes = kRowStage / 16;    // lanes that copy a row
  static constexpr int kRowsAtOnce = 32 / kCopyLanes;  // rows a warp copies at once
  const SageParams& p;
  const SageSmem<T>& sm;
  int w, lane;

  __device__ void stage(const SageTile& c) const {
    const int first = c.m_block * T::kBlockM + w * kRows;
    const std::uint16_t* src = static_cast<const std::uint16_t*>(p.q) + c.b * p.q_stride_b + c.h * p.q_stride_h +
                               (lane % kCopyLanes) * 8;
    uint8_t* dst = sm.q_stage() + w * kRows * kRowStage + lane * 16;
#pragma unroll 4
    for (int i = 0; i < kRows; i += kRowsAtOnce) {
      const int row = first + i + lane / kCopyLanes;
      const bool in = row < p.seqlen_q;
      cuda::cp_async_16(dst + i * kRowStage, src + static_cast<std::int64_t>(in ? row : 0) * p.q_stride_s, in);
    }
    cuda::cp_async_commit();
  }

  // A row's kD / 32 channels of this lane, from the staging area.
  __device__ static void load_row(uint32_t at, float (&x)[T::kD / 32]) {
    if constexpr (T::kD == 128) {
      uint2 raw;
      asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(raw.x), "=r"(raw.y) : "r"(at));
      const float4 v = unpack4<T::kBf16>(raw);
      x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else {
      uint32_t raw;
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(raw) : "r"(at));
      const float4 v = unpack4<T::kBf16>(make_uint2(raw, 0u));
      x[0] = v.x, x[1] = v.y;
    }
  }

  // The warp's 64 rows in two halves of 32: a row's largest |x| in one warp reduction each (redux on
  // the bits: non-negative floats order as their bits do), kept by lane i for the half's i-th row;
  // then every lane's two divisions at once, for its row; then each row's codes with its lane's
  // ratio. The divisions are off the per-row path, which a row at a time (64 dependent chains per
  // tile) was too slow for short tiles. 32-bit shared-memory addresses, one row in flight: the
  // producer runs under setmaxnreg's 32 registers, and more pressure there made ptxas spill the
  // consumers' tile state.
  __device__ void quantize(int buf) const {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncwarp();
    constexpr int kPer = T::kD / 32;
    const uint32_t staged = ptx::smem_addr(sm.q_stage()) + (w * kRows * kRowStage + lane * kPer * 2);
    const uint32_t codes = ptx::smem_addr(sm.q(buf));
    const uint32_t scales = ptx::smem_addr(sm.q_scale(buf)) + w * kRows * 4;
#pragma unroll 1
    for (int half = 0; half < kRows; half += 32) {
      float mine = 0.f;
#pragma unroll 4
      for (int i = 0; i < 32; ++i) {
        float x[kPer];
        load_row(staged + (half + i) * kRowStage, x);
        const float lane_max = q_fold_scale<kPer>(x, p.scale_log2);
        const float amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(lane_max)));
        mine = lane == i ? amax : mine;
      }
      const float ratio = q_code_ratio(mine);
      asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(scales + 4 * (half + lane)), "f"(q_scale_of(mine)) : "memory");
#pragma unroll 1
      for (int i = 0; i < 32; ++i) {
        float x[kPer];
        load_row(staged + (half + i) * kRowStage, x);
        (void)q_fold_scale<kPer>(x, p.scale_log2);
        std::uint32_t packed[1];
        q_codes<kPer>(x, __shfl_sync(0xffffffffu, ratio, i), packed);
        const uint32_t at = (w * kRows + half + i) * T::kRowBytes + lane * kPer;
        const uint32_t dst = codes + (at ^ (((at >> 7) & (T::kRowBytes == 128 ? 7 : 3)) << 4));
        if constexpr (kPer == 4)
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dst), "r"(packed[0]) : "memory");
        else
          asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(dst), "h"(static_cast<unsigned short>(packed[0])) : "memory");
      }
    }
    ptx::fence_proxy_async_smem();
    __syncwarp();
  }

  // With kKvInKernel, K/V items (SageParams::kv_ready) while the Q buffer is still in use, and the
  // tile's (batch, kv head) pair ready before its Q is handed over: the consumers read its key
  // scales once they have Q. Waiting warps take items too, so some warp always works on the
  // lowest pair not yet done (items go out in pair order).
  __device__ void kv_items_while_busy(int buf, uint32_t parity) const {
    if constexpr (T::kKvInKernel) {
      if (p.kv_ready == nullptr) return;
      for (;;) {
        uint32_t free = 0;
        if (lane == 0)
          asm volatile(
              "{\n.reg .pred f;\nmbarrier.test_wait.parity.shared::cta.b64 f, [%1], %2;\nselp.u32 %0, 1, 0, f;\n}\n"
              : "=r"(free)
              : "r"(ptx::smem_addr(sm.q_empty(buf))), "r"(parity)
              : "memory");
        if (__shfl_sync(0xffffffffu, free, 0) != 0 || !sage_kv_item<T::kBf16, T::kD>(p, lane)) return;
      }
    }
  }
  __device__ void wait_pair(const SageTile& c) const {
    if constexpr (T::kKvInKernel) {
      // Lane 0 acquires the count and the warp follows it (one decision for all lanes, which the
      // item's shuffles need; __syncwarp orders every lane's later arrival after the acquire).
      const int pair = c.b * p.heads_kv + c.h / (p.heads_q / p.heads_kv);
      for (;;) {
        int ready = 0;
        if (lane == 0) ready = sage_kv_ready(p, pair) ? 1 : 0;
        if (__shfl_sync(0xffffffffu, ready, 0) != 0) break;
        if (!sage_kv_item<T::kBf16, T::kD>(p, lane)) __nanosleep(64);
      }
      __syncwarp();
    }
  }

  __device__ void run() const {
    QSlot<T> q;
    const int items = work_items<T>(p);
    if (blockIdx.x < items) stage(decode_item<T>(p, blockIdx.x));
    for (int item = blockIdx.x; item < items; item += gridDim.x, q.advance()) {
      kv_items_while_busy(q.buf(), q.phase() ^ 1);
      ptx::mbar_wait(sm.q_empty(q.buf()), q.phase() ^ 1);
      quantize(q.buf());
      wait_pair(decode_item<T>(p, item));
      ptx::mbar_arrive(sm.q_full(q.buf()));  // each thread releases its own writes
      if (item + static_cast<int>(gridDim.x) < items) stage(decode_item<T>(p, item + gridDim.x));
    }
  }
};

// Four E4M3 values (x0 in the lowest byte), each rounded to nearest even with saturation.
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(x0, x1), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(x2, x3), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

template <bool kBf16>
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  if constexpr (kBf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <class T>
struct SageConsumer {
  static constexpr int kSAcc = T::kBlockN / 2;  // 64 scores per thread: int32 sums, or fp32 (kQk16)
  using Acc = std::conditional_t<T::kQk16, float, int>;
  static constexpr int kOAcc = T::kPvN / 2;  // output columns, then (FP8) the row sums
  static constexpr int kPRegs = T::kPvFp8 ? T::kBlockN / 8 : T::kBlockN / 4;

  const SageParams& p;
  const SageSmem<T>& sm;
  int wg, tid, lane, warp;
  uint64_t q_desc0 = 0, k_desc0 = 0, v_desc0 = 0;

  __device__ void init_descriptors() {
    if constexpr (T::kQk16) {
      q_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.q(0)) + wg * 64 * 128, 16, 1024);
      k_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.k(0)), 16, 1024);
    } else {
      q_desc0 = kmajor_desc(ptx::smem_addr(sm.q(0)) + wg * 64 * T::kRowBytes, T::kRowBytes);
      k_desc0 = kmajor_desc(ptx::smem_addr(sm.k(0)), T::kRowBytes);
    }
    if constexpr (T::kPvFp8) v_desc0 = kmajor_desc(ptx::smem_addr(sm.v(0)), 128);
    else if constexpr (T::kOnesChunk) v_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.base) + T::v_chunk_offset(0, 0), T::v_chunk_stride(0), 1024);
    else v_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.v(0)), T::kVChunkBytes, 1024);
  }

  // kOnesChunk: stage s's V chunks and then the ones lie equally far apart (SageTraits::
  // v_chunk_offset), so each stage's descriptor has its own chunk stride (the leading byte offset).
  // Both the first chunk's place and the stride move by the same amount from stage to stage, so a
  // stage's descriptor is stage 0's plus s steps (start address in the low field, stride from bit
  // 16): one multiply-add instead of building a descriptor for every block.
  static constexpr std::int64_t kVDescStep =
      (T::v_chunk_offset(1, 0) - T::v_chunk_offset(0, 0)) / 16 +
      static_cast<std::int64_t>((T::v_chunk_stride(1) - T::v_chunk_stride(0)) / 16) * 65536;
  static_assert(!T::kOnesChunk ||
                    (T::v_chunk_offset(2, 0) - T::v_chunk_offset(1, 0) == T::v_chunk_offset(1, 0) - T::v_chunk_offset(0, 0) &&
                     T::v_chunk_stride(2) - T::v_chunk_stride(1) == T::v_chunk_stride(1) - T::v_chunk_stride(0)),
                "the stages' places and strides step evenly");

  // The P V product's B operand for stage `stage`.
  __device__ uint64_t v_desc(int stage) const {
    if constexpr (T::kOnesChunk) return v_desc0 + static_cast<uint64_t>(static_cast<std::int64_t>(stage) * kVDescStep);
    else return ptx::smem_desc_advance(v_desc0, stage * T::kVStageBytes);
  }

  __device__ void issue_qk(Acc (&s)[kSAcc], int stage, int q_buf) const {
    const uint64_t k0 = ptx::smem_desc_advance(k_desc0, stage * T::kKStride);
    const uint64_t q0 = ptx::smem_desc_advance(q_desc0, q_buf * T::kQBytes);
    if constexpr (T::kQk16) {
      // 16 columns per product: four in each 64-column chunk, 32 bytes apart inside the swizzled rows.
#pragma unroll
      for (int kk = 0; kk < T::kD / 16; ++kk)
        flash::Wgmma<T::kBlockN>::template ss<T::kBf16>(
            s, ptx::smem_desc_advance(q0, (kk / 4) * T::kQChunkBytes + (kk % 4) * 32),
            ptx::smem_desc_advance(k0, (kk / 4) * T::kKChunkBytes + (kk % 4) * 32), kk > 0 ? 1 : 0);
    } else {
#pragma unroll
      for (int kk = 0; kk < T::kD / 32; ++kk) {
        const uint64_t qd = ptx::smem_desc_advance(q0, kk * 32), kd = ptx::smem_desc_advance(k0, kk * 32);
        if (kk == 0) WgmmaS8<T::kBlockN>::ss_first(s, qd, kd);
        else WgmmaS8<T::kBlockN>::ss(s, qd, kd, 1);
      }
    }
  }

  // P V into o: from zero (the block accumulator of the two-level sum), or, with kAccumulate (the
  // in-order groups' FP16 mode, whose tensor cores keep fp32 sums), added to what o holds.
  template <bool kAccumulate = false>
  __device__ void issue_pv(float (&o)[kOAcc], const uint32_t (&pr)[kPRegs], int stage) const {
    const uint64_t v0 = v_desc(stage);
    if constexpr (T::kPvFp8) {
      static_assert(!kAccumulate, "FP8 P V sums each block on its own");
#pragma unroll
      for (int kk = 0; kk < T::kBlockN / 32; ++kk) {
        const uint32_t a[4] = {pr[4 * kk], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
        if (kk == 0) WgmmaE4m3<T::kPvN>::rs_first(o, a, v0);
        else WgmmaE4m3<T::kPvN>::rs(o, a, ptx::smem_desc_advance(v0, kk * 32), 1);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < T::kBlockN / 16; ++kk) {
        const uint32_t a[4] = {pr[4 * kk], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
        flash::Wgmma<T::kPvN>::template rs<T::kBf16>(o, a, ptx::smem_desc_advance(v0, kk * 16 * 128),
                                                     kAccumulate || kk > 0 ? 1 : 0);
      }
    }
  }

  // The two overlapping consumer warpgroups issue their products in turn (named barriers 4 and
  // 5): a group takes its turn, issues, waits for its scores and hands the turn over, so one
  // group's softmax runs while the other's products occupy the tensor cores instead of both at
  // once. Group 0 starts; group 1's last hand-over is taken by group 0 after its last tile. The
  // in-order groups issue freely.
  static constexpr int kTurnBarrier = 4;
  static constexpr bool kTurns = !T::kInOrder;
  __device__ void take_turn() const {
    if constexpr (kTurns) ptx::named_barrier_sync(kTurnBarrier + wg, 256);
  }
  __device__ void pass_turn() const {
    if constexpr (kTurns) ptx::named_barrier_arrive(kTurnBarrier + (wg + 1) % T::kConsumers, 256);
  }
  __device__ void start_turns() const {
    if constexpr (kTurns)
      if (wg == T::kConsumers - 1) ptx::named_barrier_arrive(kTurnBarrier, 256);
  }
  __device__ void finish_turns() const {
    if constexpr (kTurns)
      if (wg == 0) ptx::named_barrier_sync(kTurnBarrier, 256);
  }

  __device__ void release(uint64_t* bar) const {
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(bar);
  }

  // The Q buffer's release. kFusedQ: every consumer thread arrives (kQEmptyArrivals), as every
  // quantizing thread arrives on q_full: racecheck does not see a warp's other lanes' reads of the
  // buffer's scales ordered before one lane's arrival by __syncwarp, and reported them against the
  // quantizing warps' next writes once tiles without key blocks (a key walk's batch that keeps no
  // key) handed buffers back right after reading them.
  static constexpr int kQEmptyArrivals = T::kFusedQ ? 128 * T::kConsumers : 4 * T::kConsumers;
  __device__ void release_q(uint64_t* bar) const {
    if constexpr (T::kFusedQ) ptx::mbar_arrive(bar);
    else release(bar);
  }

  // Every T::kPolyEvery-th exponential of a row (0: none) on the FMA pipe (ptx::exp2_fma, relative
  // error 1.1e-4, far below an E4M3 or bf16 rounding of P), so the MUFU unit, which also converts
  // P, is not the kernel's bottleneck.
  __device__ static float exp2_col(int col, float x) {
    if constexpr (T::kPolyEvery > 0)
      if (col % T::kPolyEvery == T::kPolyEvery - 1) return ptx::exp2_fma(x);
    return ptx::exp2_approx(x);
  }

  // The int32 score x plus 1.5 * 2^23, as a float, exactly, on the integer pipe (x added to the
  // bits of 1.5 * 2^23; |x| < 2^22, since a dot product of kD <= 128 INT8 pairs is at most
  // 128 * 127^2 < 2^21). I2F would take the conversion unit, which the exponentials and the FP8
  // packing of P already keep busy.
  static constexpr float kFloatImage = 12582912.f;  // 1.5 * 2^23
  __device__ static float float_image(int x) {
    static_assert(T::kD * 127 * 127 < (1 << 22), "scores must stay below 2^22 for the exact conversion");
    return __int_as_float(x + 0x4B400000);
  }

  // A masked key's sum: -inf for 16-bit scores; for INT8 scores the int32 whose float image is
  // -inf (0xFF800000 less the image's constant), below every real sum (|x| < 2^22).
  static constexpr int kDeadSum = static_cast<int>(0xFF800000u - 0x4B400000u);
  __device__ static Acc dead_sum() {
    if constexpr (T::kQk16) return -INFINITY;
    else return kDeadSum;
  }
  static_assert(kDeadSum + 0x4B400000 == static_cast<int>(0xFF800000u), "a masked key's image is -inf");
  // The float the softmax's FFMA takes for a sum: the 16-bit score itself, or the INT8 sum's image.
  __device__ static float score_image(Acc x) {
    if constexpr (T::kQk16) return x;
    else return float_image(x);
  }

  // The largest of n int32 sums, three at a time (one DPX instruction each on sm_90): half the
  // instructions of two-input maxima. Against two-input float maxima over the sums' images, the
  // FP8 mode ran 1-5 % faster on every row and the accurate mode up to 4 % (level on the long rows)
  // on an H200 (bench/results/sage-intmax-2026-12-04-h200/). A tree of depth log3 n, except in the
  // kernel that quantizes Q itself, which runs them on two running maxima: the tree's five live
  // temporaries made ptxas spill 8 bytes there (the long hd128 rows 9 % slower), and two running
  // maxima elsewhere were 1.5-2 % slower than the tree.
  template <int kN>
  __device__ static int max_of(int (&x)[kN]) {
    if constexpr (T::kFusedQ) {
      static_assert(kN >= 6 && kN % 2 == 0, "two triples, then pairs");
      int acc[2] = {__vimax3_s32(x[0], x[1], x[2]), __vimax3_s32(x[3], x[4], x[5])};
#pragma unroll
      for (int i = 6; i < kN; i += 2) acc[(i / 2) % 2] = __vimax3_s32(acc[(i / 2) % 2], x[i], x[i + 1]);
      return max(acc[0], acc[1]);
    } else {
#pragma unroll
      for (int n = kN; n > 1; n = (n + 2) / 3) {
#pragma unroll
        for (int i = 0; i < (n + 2) / 3; ++i) {
          const int first = x[3 * i];
          x[i] = __vimax3_s32(first, 3 * i + 1 < n ? x[3 * i + 1] : first, 3 * i + 2 < n ? x[3 * i + 2] : first);
        }
      }
      return x[0];
    }
  }

  __device__ static float quad_max(float m) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
    return fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
  }

  // Index in the score accumulators of this thread's i-th value of row r (r = 0: row lane / 4 of
  // the warp's 16, r = 1: lane / 4 + 8); that value is key 8 (i / 2) + 2 (lane % 4) + i % 2 of the
  // block, in key group key / kKGroup.
  static constexpr int kCols = T::kBlockN / 4;  // values per row held by this thread
  static constexpr int kGroups = T::kBlockN / kKGroup;
  static constexpr int kLanes = 4;  // independent partials of a row's maximum and sum
  __device__ static constexpr int at(int i, int r) { return (i / 2) * 4 + 2 * r + (i % 2); }
  __device__ static constexpr int group_of(int i) { return (i / 2) * 8 / kKGroup; }
  static_assert(kCols % (kLanes * kGroups) == 0, "every reduction lane stays inside one key group");

  // The INT8 scales of key block kb's groups (0 past the sequence; none with kQk16). With
  // kEarlyKeyScales the in-order groups load them before they wait for the block's scores, so that
  // the loads are off the softmax's path; measured on an H200 against loading them after the wait
  // (bench/results/sage-intmax-2026-12-04-h200/ab-early-key-scales.txt): the accurate mode 6-7 %
  // faster on long hd128 rows and the 4k square, the FP8 mode 1-4 %; but the accurate mode's split
  // kernel (FLUX.1's short last wave) 5 % slower, so it loads them after the wait, as do the
  // overlapped groups (not measured).
  static constexpr bool kEarlyKeyScales = T::kPvFp8 || !T::kSplit;
  __device__ void key_scales(const SageTile& c, const KeyBlock& kb, float (&ks)[kGroups]) const {
    const std::int64_t kbase = (static_cast<std::int64_t>(c.b) * p.heads_kv + c.h / (p.heads_q / p.heads_kv)) * p.k_groups;
    int j = kb.j;
    if constexpr (T::kWalk) j = walked_block(p, c, kb).j;
    const int g0 = j * kGroups;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if constexpr (T::kQk16) ks[g] = 0.f;
      // With kKvInKernel a plain load, not __ldg: other SMs may write these during the kernel.
      else if constexpr (T::kKvInKernel) ks[g] = g0 + g < p.k_groups ? p.k_scale[kbase + g0 + g] : 0.f;
      else ks[g] = g0 + g < p.k_groups ? __ldg(p.k_scale + kbase + g0 + g) : 0.f;
    }
  }

  // The block's exact online softmax in log2 units: s becomes exp2(score - m) against the new row
  // maximum m (times 448 in the FP8 mode, ready for E4M3), alpha the factor for the earlier output.
  // In the FP16 mode without kRowSumByMma l sums this thread's p; otherwise the P V product sums the
  // rows and l is left alone. qs holds the INT8 scales of the thread's two rows.
  //
  // A score is a[r][g] x + b[r][g] of the int32 sum's float image x (float_image; int_to_float's
  // trick without its subtraction: the constant is folded into b, rounded once, which moves a score
  // by at most one unit of the INT8 product, far below the INT8 rounding). a > 0, so within a key
  // group the largest int32 sum gives the largest score: each group's maximum is taken over the
  // sums themselves, three at a time (max_of), and turned into a score once; each
  // exponent is one FFMA of the image. In blocks with masked keys (the sequence's end, causal, a
  // key mask) those keys' sums become kDeadSum, whose image is -inf: -inf scores, zero
  // exponentials, and a group with no live key has maximum -inf.
  // With kQk16 the score is the fp32 sum itself, a = the softmax scale in log2 units and b = 0, and
  // a masked key's sum becomes -inf; there the maxima are taken over the scores' floats on kLanes
  // partials each, so that the reduction is not one long dependent chain.
  __device__ void softmax(Acc (&si)[kSAcc], float (&s)[kSAcc], float (&m)[2], float (&l)[2], float (&alpha)[2],
                          const SageTile& c, const KeyBlock& kb, const float (&qs)[2], const float (&ks)[kGroups]) const {
    int j = kb.j;
    bool drops_key = false;  // with T::kWalk: the key mask drops one of the block's keys
    if constexpr (T::kWalk) {
      const WalkedBlock wb = walked_block(p, c, kb);
      j = wb.j, drops_key = wb.drops_key;
    }
    const int key_end = kb.end;
    float a[2][kGroups], b[2][kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if constexpr (T::kQk16) {
        a[0][g] = a[1][g] = p.scale_log2;
        b[0][g] = b[1][g] = 0.f;
      } else {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // Kept positive, so a masked key's image (-inf) gives -inf, never NaN; where the product
          // is 0 (an all-zero query row, a group of keys equal to their mean) every score of the
          // group is then about 1e-30 x instead of 0, which no exponential can tell apart.
          a[r][g] = fmaxf(__fmul_rn(qs[r], ks[g]), 1e-30f);
          b[r][g] = -kFloatImage * a[r][g];
        }
      }
    }
    const bool edge = (j + 1) * T::kBlockN > key_end || (p.causal && (j + 1) * T::kBlockN - 1 > c.m_block * T::kBlockM);
    if (edge || (T::kWalk ? drops_key : p.kv_mask != nullptr)) {
      // Which of the thread's keys are live, as bits (a rolled loop: one register, not kCols).
      static_assert(kCols <= 32, "one bit per key of a row");
      const int key0 = j * T::kBlockN + (lane % 4) * 2;
      const uint8_t* mask = p.kv_mask != nullptr ? p.kv_mask + c.b * p.mask_stride_b : nullptr;
      uint32_t live = 0;
      if constexpr (T::kWalk) {
        // The walk's packed bits (zero past Skv): word i / 8 of the block holds the thread's keys
        // 8 (i / 2) + 2 (lane % 4) + i % 2, at bits 8 ((i / 2) % 4) + 2 (lane % 4) + i % 2. Four
        // word loads where the bytes took one load per key, 32 in a row (a block that read them
        // cost about three unmasked ones); rolled, since unrolled they made ptxas spill more in the
        // four-group kernel.
        static_assert(kCols == 32 && T::kBlockN == 128, "four mask words a block, eight keys of the thread each");
        const uint32_t* words = p.kv_walk_bits + static_cast<std::int64_t>(c.b) * p.kv_walk_words + j * (T::kBlockN / 32);
        const int shift = (lane % 4) * 2;
#pragma unroll 1
        for (int w = 0; w < T::kBlockN / 32; ++w) {
          const uint32_t x = __ldg(words + w) >> shift;
          live |= ((x & 0x3u) | ((x >> 6) & 0xcu) | ((x >> 12) & 0x30u) | ((x >> 18) & 0xc0u)) << (8 * w);
        }
      } else {
#pragma unroll 1
        for (int i = 0; i < kCols; ++i) {
          const int col = key0 + (i / 2) * 8 + i % 2;
          bool keep = col < key_end;
          if (keep && mask != nullptr) keep = mask[col * p.mask_stride_s] != 0;
          live |= static_cast<uint32_t>(keep) << i;
        }
      }
      // Causal: the thread's i-th key is visible to row r while its offset (i / 2) 8 + i % 2 is at most last[r].
      const int row0 = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4;
      const int last[2] = {p.causal ? row0 - key0 : T::kBlockN, p.causal ? row0 + 8 - key0 : T::kBlockN};
#pragma unroll
      for (int i = 0; i < kCols; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          if (!((live >> i) & 1u) || (i / 2) * 8 + i % 2 > last[r]) si[at(i, r)] = dead_sum();
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        constexpr int kPerGroup = kCols / kGroups;
        if constexpr (T::kQk16) {
          float part[kLanes];
#pragma unroll
          for (int i = 0; i < kPerGroup; ++i) {
            const float x = score_image(si[at(g * kPerGroup + i, r)]);
            part[i % kLanes] = i < kLanes ? x : fmaxf(part[i % kLanes], x);
          }
#pragma unroll
          for (int w = kLanes / 2; w > 0; w /= 2)
#pragma unroll
            for (int i = 0; i < w; ++i) part[i] = fmaxf(part[i], part[i + w]);
          mx = fmaxf(mx, fmaf(part[0], a[r][g], b[r][g]));
        } else {
          int x[kPerGroup];
#pragma unroll
          for (int i = 0; i < kPerGroup; ++i) x[i] = si[at(g * kPerGroup + i, r)];
          mx = fmaxf(mx, fmaf(float_image(max_of<kPerGroup>(x)), a[r][g], b[r][g]));
        }
      }
      mx = quad_max(mx);
      const float use = mx == -INFINITY ? 0.f : mx;
      alpha[r] = ptx::exp2_approx(m[r] - use);
      m[r] = mx;
      const float shift = T::kPvFp8 ? use - kLog2E4m3Max : use;  // exp2(score - shift) = 448 p
      float sum[kLanes];
#pragma unroll
      for (int i = 0; i < kCols; ++i) {
        const int g = group_of(i);
        const float v = exp2_col(i, fmaf(score_image(si[at(i, r)]), a[r][g], b[r][g] - shift));
        s[at(i, r)] = v;
        if constexpr (!T::kRowSumByMma) sum[i % kLanes] = i < kLanes ? v : sum[i % kLanes] + v;
      }
      if constexpr (!T::kRowSumByMma) {  // else the P V product sums the rows
#pragma unroll
        for (int w = kLanes / 2; w > 0; w /= 2)
#pragma unroll
          for (int i = 0; i < w; ++i) sum[i] += sum[i + w];
        l[r] = fmaf(l[r], alpha[r], sum[0]);
      }
    }
  }

  // P as the A operand of the P V product: E4M3 of 448 p (the softmax already scaled it), ordered as the transposed V's keys
  // (sage_quant.cuh), or p rounded to the caller's dtype.
  __device__ static void convert_p(const float (&s)[kSAcc], uint32_t (&pr)[kPRegs]) {
    if constexpr (T::kPvFp8) {
#pragma unroll
      for (int kk = 0; kk < T::kBlockN / 32; ++kk)
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int g = 4 * kk + 2 * half;
            pr[4 * kk + 2 * half + r] =
                pack_e4m3x4(s[g * 4 + 2 * r], s[g * 4 + 2 * r + 1], s[(g + 1) * 4 + 2 * r], s[(g + 1) * 4 + 2 * r + 1]);
          }
    } else {
#pragma unroll
      for (int i = 0; i < kPRegs; ++i) pr[i] = pack_half2<T::kBf16>(s[2 * i], s[2 * i + 1]);
    }
  }

  __device__ static void accumulate(float (&o)[kOAcc], const float (&blk)[kOAcc], const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < kOAcc; ++i) o[i] = fmaf(o[i], alpha[(i % 4) / 2], blk[i]);
  }

  __device__ static void rescale(float (&o)[kOAcc], const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < kOAcc; ++i) o[i] *= alpha[(i % 4) / 2];
  }

  // Row r's sum of P, in every thread of its quad.
  __device__ static float row_sum(const float (&o)[kOAcc], const float (&l_part)[2], int r) {
    if constexpr (T::kRowSumByMma) {
      return o[T::kD / 2 + 2 * r];  // a column of ones: the row's whole sum in every thread of its quad
    } else {
      float l = l_part[r];
      l += __shfl_xor_sync(0xffffffff, l, 1);
      return l + __shfl_xor_sync(0xffffffff, l, 2);
    }
  }

  __device__ const float* v_scales(const SageTile& c) const {
    const int hkv = c.h / (p.heads_q / p.heads_kv);
    return p.v_scale + (static_cast<std::int64_t>(c.b) * p.heads_kv + hkv) * T::kD;
  }

  // A piece of a split tile: its rows' output before the division by the row sum (times V's
  // scales in the FP8 mode), their running maxima and row sums, for sage_merge_kernel.
  __device__ void store_partial(const float (&o)[kOAcc], const float (&m)[2], const float (&l_part)[2],
                                const SageTile& c, int slot) const {
    const float* vs = v_scales(c);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = row_sum(o, l_part, r);
      const std::int64_t at = static_cast<std::int64_t>(slot) * T::kBlockM + wg * 64 + warp * 16 + lane / 4 + 8 * r;
      if (lane % 4 == 0) reinterpret_cast<float2*>(p.split_ml)[at] = make_float2(m[r], l);
      float* dst = p.split_o + at * T::kD + (lane % 4) * 2;
#pragma unroll
      for (int j = 0; j < T::kD / 8; ++j) {
        const int col = j * 8 + (lane % 4) * 2;
        float x0 = o[j * 4 + 2 * r], x1 = o[j * 4 + 2 * r + 1];
        if constexpr (T::kPvFp8) {
          x0 *= __ldg(vs + col);
          x1 *= __ldg(vs + col + 1);
        }
        *reinterpret_cast<float2*>(dst + j * 8) = make_float2(x0, x1);
      }
    }
  }

  __device__ void finish(const float (&o)[kOAcc], const float (&m)[2], const float (&l_part)[2], const SageTile& c) const {
    const float* vs = v_scales(c);
    uint16_t* out = static_cast<uint16_t*>(p.out);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = row_sum(o, l_part, r);
      const int row = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4 + 8 * r;
      if (row >= p.seqlen_q) continue;
      if (p.lse != nullptr && lane % 4 == 0)
        p.lse[c.b * p.lse_stride_b + c.h * p.lse_stride_h + row * p.lse_stride_s] = row_lse<T>(p, c, row, m[r], l);
      uint16_t* dst = out + c.b * p.out_stride_b + static_cast<std::int64_t>(row) * p.out_stride_s + c.h * p.out_stride_h +
                      (lane % 4) * 2;
      // One division per row, not one per value, and no call: see q_code_ratio.
      const float inv = l > 0.f ? reciprocal_rn(l) : 0.f;
#pragma unroll
      for (int j = 0; j < T::kD / 8; ++j) {
        const int col = j * 8 + (lane % 4) * 2;
        float x0 = o[j * 4 + 2 * r], x1 = o[j * 4 + 2 * r + 1];
        if constexpr (T::kPvFp8) {
          x0 *= __ldg(vs + col);  // o sums (448 p) (v / vs) and l sums 448 p
          x1 *= __ldg(vs + col + 1);
        }
        x0 *= inv;
        x1 *= inv;
        *reinterpret_cast<uint32_t*>(dst + j * 8) = pack_half2<T::kBf16>(x0, x1);
      }
    }
  }

  __device__ static void fence_scores(Acc (&si)[kSAcc]) {
#pragma unroll
    for (int i = 0; i < kSAcc; ++i) {
      if constexpr (T::kQk16) asm volatile("" : "+f"(si[i])::"memory");
      else asm volatile("" : "+r"(si[i])::"memory");
    }
  }
  __device__ static void advance(int& stage, uint32_t& phase) {
    if (++stage == T::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }

  // The INT8 scales of the thread's two rows (kQGroup is 1: one per row); 0 past the sequence.
  // kFusedQ: from beside Q buffer `buf`, after its q_full wait.
  __device__ void row_scales(const SageTile& c, float (&qs)[2], int buf) const {
    static_assert(kQGroup == 1, "the consumer reads one Q scale per row");
    if constexpr (T::kQk16) {
      qs[0] = qs[1] = 0.f;  // unused: 16-bit scores carry no INT8 scales
    } else if constexpr (T::kFusedQ) {
      const uint32_t at = ptx::smem_addr(sm.q_scale(buf)) + 4 * (wg * 64 + warp * 16 + lane / 4);
      asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(qs[0]) : "r"(at));
      asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(qs[1]) : "r"(at + 32));
    } else {
      const int row0 = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int r = 0; r < 2; ++r)
        qs[r] = row0 + 8 * r < p.seqlen_q
                    ? __ldg(p.q_scale + (static_cast<std::int64_t>(c.b) * p.heads_q + c.h) * p.q_groups + row0 + 8 * r)
                    : 0.f;
    }
  }

  __device__ void run() const {
    if constexpr (T::kInOrder) run_in_order();
    else run_overlapped();
  }

  // Three groups: each block's Q K^T, softmax and P V in order.
  __device__ void run_in_order() const {
    int stage = 0;
    uint32_t phase = 0;
    QSlot<T> q;
    for (int item = blockIdx.x; item < work_items<T>(p); item += gridDim.x, q.advance()) {
      const SageTile c = decode_item<T>(p, item);
      float qs[2];
      if constexpr (!T::kFusedQ) row_scales(c, qs, q.buf());  // global loads, ahead of the wait
      float o[kOAcc];
#pragma unroll
      for (int i = 0; i < kOAcc; ++i) o[i] = 0.f;
      float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
      ptx::mbar_wait(sm.q_full(q.buf()), q.phase());
      if constexpr (T::kFusedQ) row_scales(c, qs, q.buf());  // written with the buffer
      if (c.n_blocks == c.n_begin) release_q(sm.q_empty(q.buf()));
      for (int n = c.n_begin; n < c.n_blocks; ++n) {
        Acc si[kSAcc];
        float s[kSAcc];
        uint32_t pr[kPRegs];
        const KeyBlock kb = key_block_at<T>(p, c, n);
        float ks[kGroups];
        if constexpr (kEarlyKeyScales) key_scales(c, kb, ks);
        ptx::mbar_wait(sm.k_full(stage), phase);
        ptx::fence_operands(o);
        ptx::wgmma_fence();
        issue_qk(si, stage, q.buf());
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        fence_scores(si);
        release(sm.k_empty(stage));
        if (n == c.n_blocks - 1) release_q(sm.q_empty(q.buf()));  // the last read of this Q: the buffer may load again
        if constexpr (!kEarlyKeyScales) key_scales(c, kb, ks);
        softmax(si, s, m, l, alpha, c, kb, qs, ks);
        convert_p(s, pr);
        ptx::mbar_wait(sm.v_full(stage), phase);
        if constexpr (T::kPvFp8) {
          float blk[kOAcc];
          ptx::fence_operands(pr);
          ptx::wgmma_fence();
          issue_pv(blk, pr, stage);
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          ptx::fence_operands(blk);
          release(sm.v_empty(stage));
          accumulate(o, blk, alpha);
        } else {
          rescale(o, alpha);
          ptx::fence_operands(o);
          ptx::fence_operands(pr);
          ptx::wgmma_fence();
          issue_pv<true>(o, pr, stage);
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          ptx::fence_operands(o);
          release(sm.v_empty(stage));
        }
        advance(stage, phase);
      }
      if (T::kSplit && item >= p.split_begin) store_partial(o, m, l, c, item - p.split_begin);
      else finish(o, m, l, c);
    }
  }

  // Two groups: block n's Q K^T and block n - 1's P V in flight together, block n's softmax under
  // the P V; the groups issue in turn.
  __device__ void run_overlapped() const {
    int stage = 0;
    uint32_t phase = 0;
    QSlot<T> q;
    start_turns();
    for (int item = blockIdx.x; item < work_items<T>(p); item += gridDim.x, q.advance()) {
      const SageTile c = decode_item<T>(p, item);  // whole tiles: only the in-order groups split
      float qs[2];
      row_scales(c, qs, q.buf());
      float o[kOAcc], blk[kOAcc];
#pragma unroll
      for (int i = 0; i < kOAcc; ++i) o[i] = 0.f;
      float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2] = {1.f, 1.f}, alpha_prev[2] = {1.f, 1.f};
      Acc si[kSAcc];
      float s[kSAcc];
      uint32_t pr[kPRegs];
      ptx::mbar_wait(sm.q_full(q.buf()), q.phase());
      if (c.n_blocks == 0) {
        release_q(sm.q_empty(q.buf()));
        finish(o, m, l, c);
        continue;
      }
      // Block 0: its Q K^T alone.
      KeyBlock kb = key_block_at<T>(p, c, 0);
      float ks[kGroups];
      ptx::mbar_wait(sm.k_full(stage), phase);
      take_turn();
      ptx::wgmma_fence();
      issue_qk(si, stage, q.buf());
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      pass_turn();
      fence_scores(si);
      release(sm.k_empty(stage));
      if (c.n_blocks == 1) release_q(sm.q_empty(q.buf()));
      key_scales(c, kb, ks);
      softmax(si, s, m, l, alpha, c, kb, qs, ks);
      alpha_prev[0] = alpha[0];
      alpha_prev[1] = alpha[1];
      convert_p(s, pr);
      int prev_stage = stage;
      uint32_t prev_phase = phase;
      advance(stage, phase);
      // Block n's Q K^T and block n - 1's P V in flight together; block n's softmax under the P V.
      for (int n = 1; n < c.n_blocks; ++n) {
        kb = key_block_at<T>(p, c, n);
        ptx::mbar_wait(sm.v_full(prev_stage), prev_phase);
        ptx::mbar_wait(sm.k_full(stage), phase);
        ptx::fence_operands(pr);
        take_turn();
        ptx::wgmma_fence();
        issue_qk(si, stage, q.buf());
        ptx::wgmma_commit();
        issue_pv(blk, pr, prev_stage);
        ptx::wgmma_commit();
        ptx::wgmma_wait<1>();
        pass_turn();
        fence_scores(si);
        release(sm.k_empty(stage));
        if (n == c.n_blocks - 1) release_q(sm.q_empty(q.buf()));  // the last read of this Q: the buffer may load again
        key_scales(c, kb, ks);
        softmax(si, s, m, l, alpha, c, kb, qs, ks);
        ptx::wgmma_wait<0>();
        ptx::fence_operands(blk);
        release(sm.v_empty(prev_stage));
        accumulate(o, blk, alpha_prev);
        alpha_prev[0] = alpha[0];
        alpha_prev[1] = alpha[1];
        convert_p(s, pr);
        prev_stage = stage;
        prev_phase = phase;
        advance(stage, phase);
      }
      ptx::mbar_wait(sm.v_full(prev_stage), prev_phase);
      ptx::fence_operands(pr);
      take_turn();
      ptx::wgmma_fence();
      issue_pv(blk, pr, prev_stage);
      ptx::wgmma_commit();
      pass_turn();
      ptx::wgmma_wait<0>();
      ptx::fence_operands(blk);
      release(sm.v_empty(prev_stage));
      accumulate(o, blk, alpha_prev);
      finish(o, m, l, c);
    }
    finish_turns();
  }
};

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    sage_fwd_hopper_kernel(const __grid_constant__ SageTmaMaps maps, const __grid_constant__ SageParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  SageSmem<T> sm{reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023))};
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int b = 0; b < T::kQBuffers; ++b) {
      ptx::mbar_init(sm.q_full(b), T::kFusedQ ? 96 : 1);  // every quantizing thread, or the TMA load
      ptx::mbar_init(sm.q_empty(b), SageConsumer<T>::kQEmptyArrivals);
    }
    for (int s = 0; s < T::kStages; ++s) {
      ptx::mbar_init(sm.k_full(s), 1);
      ptx::mbar_init(sm.v_full(s), 1);
      ptx::mbar_init(sm.k_empty(s), 4 * T::kConsumers);
      ptx::mbar_init(sm.v_empty(s), 4 * T::kConsumers);
    }
    ptx::fence_barrier_init();
  }
  if constexpr (T::kPvFp8) {
    // E4M3 1.0 (0x38) in the eight rows past each stage's V rows; a uniform atom needs no swizzle.
    for (int s = 0; s < T::kStages; ++s)
      for (int i = threadIdx.x; i < 8 * T::kBlockN / 16; i += T::kThreads)
        reinterpret_cast<uint4*>(sm.v(s) + T::kVBytes)[i] = make_uint4(0x38383838u, 0x38383838u, 0x38383838u, 0x38383838u);
    ptx::fence_proxy_async_smem();  // the products read the atoms through the async proxy
  } else if constexpr (T::kOnesChunk) {
    const uint32_t one2 = T::kBf16 ? 0x3F803F80u : 0x3C003C00u;  // two ones in bf16 / fp16
    for (int i = threadIdx.x; i < T::kOnesBytes / 16; i += T::kThreads)
      reinterpret_cast<uint4*>(sm.ones())[i] = make_uint4(one2, one2, one2, one2);
    ptx::fence_proxy_async_smem();
  }
  if (threadIdx.x == 0) {
    if constexpr (!T::kFusedQ) ptx::prefetch_tensor_map(&maps.q);  // kFusedQ: no Q map
    ptx::prefetch_tensor_map(&maps.k);
    ptx::prefetch_tensor_map(&maps.v);
  }
  cuda::wait_for_prior_kernel();  // the quantization passes' copies and scales (a dependent launch)
  __syncthreads();
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x == 0) {
      sage_producer<T>(maps, p, sm);
    }
    if constexpr (T::kFusedQ) {
      if (threadIdx.x >= 32)
        SageQQuantizer<T>{p, sm, static_cast<int>(threadIdx.x / 32) - 1, static_cast<int>(threadIdx.x % 32)}.run();
    } else if constexpr (T::kKvInKernel) {
      if (threadIdx.x >= 32 && p.kv_ready != nullptr)  // idle warps 1-3: K and V until none is left
        while (sage_kv_item<T::kBf16, T::kD>(p, static_cast<int>(threadIdx.x % 32))) {
        }
    }
  } else {
    ptx::setmaxnreg_inc<T::kConsumerRegs>();
    const int tid = threadIdx.x % 128;
    SageConsumer<T> consumer{p, sm, warpgroup - 1, tid, tid % 32, tid / 32};
    consumer.init_descriptors();
    consumer.run();
  }
#else
  __trap();  // built for an architecture without wgmma/TMA: the launcher never selects this
#endif
}

// The split tiles' pieces combined (sage_config.h, sage_tail_split), one warp per query row: each
// piece's partial output and row sum weighted by exp2 of its running maximum against the largest,
// then the one division by the weighted sum, as a whole tile's epilogue divides; the LSE likewise.
// A row that no piece saw a key of (every maximum -inf) is zero with LSE -inf.
template <class T>
__global__ void sage_merge_kernel(const __grid_constant__ SageParams p) {
  cuda::wait_for_prior_kernel();  // the pieces (a dependent launch)
  const std::int64_t warp_id = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int tail = p.num_tiles - p.split_begin, pieces = p.split_pieces;
  if (warp_id >= static_cast<std::int64_t>(tail) * T::kBlockM) return;
  const int t = static_cast<int>(warp_id / T::kBlockM), row_in = static_cast<int>(warp_id % T::kBlockM);
  const SageTile c = decode_tile<T>(p, p.split_begin + t);
  const int row = c.m_block * T::kBlockM + row_in;
  if (row >= p.seqlen_q) return;
  const float2* ml = reinterpret_cast<const float2*>(p.split_ml);
  const std::int64_t first = static_cast<std::int64_t>(t) * pieces * T::kBlockM + row_in;
  float mx = -INFINITY;
  for (int k = 0; k < pieces; ++k) mx = fmaxf(mx, ml[first + static_cast<std::int64_t>(k) * T::kBlockM].x);
  constexpr int kPer = T::kD / 32;  // columns per lane
  float acc[kPer] = {}, l = 0.f;
  if (mx != -INFINITY) {
    for (int k = 0; k < pieces; ++k) {
      const std::int64_t at = first + static_cast<std::int64_t>(k) * T::kBlockM;
      const float2 e = ml[at];
      const float w = exp2f(e.x - mx);  // 0 for a piece without a key
      l = fmaf(w, e.y, l);
      const float* src = p.split_o + at * T::kD + lane * kPer;
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[i] = fmaf(w, src[i], acc[i]);
    }
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  uint16_t* out = static_cast<uint16_t*>(p.out) + c.b * p.out_stride_b + static_cast<std::int64_t>(row) * p.out_stride_s +
                  c.h * p.out_stride_h + lane * kPer;
#pragma unroll
  for (int i = 0; i < kPer; i += 2)
    *reinterpret_cast<uint32_t*>(out + i) = pack_half2<T::kBf16>(acc[i] * inv, acc[i + 1] * inv);
  if (p.lse != nullptr && lane == 0)
    p.lse[c.b * p.lse_stride_b + c.h * p.lse_stride_h + row * p.lse_stride_s] = row_lse<T>(p, c, row, mx, l);
}

}  // namespace diffattn::sage
