#pragma once
// FlashAttention forward for Hopper (sm_90a). One persistent CTA per SM: warpgroup 0 is the
// producer (one thread issues TMA loads of Q and a kStages-deep K/V ring, all completing on
// mbarriers) and gives its registers away; the other two or three warpgroups are consumers, each
// owning 64 query rows of the tile. A consumer computes S = Q K^T with wgmma from shared
// memory and O += P V with P kept in registers; it issues the next tile's Q K^T and the current
// P V before running softmax, so the exponentials overlap the tensor cores. Q is handed back after
// the tile's last Q K^T so the next tile's Q loads under the tail; output is stored from registers
// or, where shared memory has room, through an O buffer with 16-byte stores. The tiles of a last
// partial wave may run as pieces along the keys whose partial outputs the last piece merges.

#include <cstddef>
#include <cstdint>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_params.h"
#include "kernels/cuda/flash/hopper_ptx.cuh"
#include "kernels/cuda/flash/wgmma_ops.cuh"

namespace diffattn::flash {

struct FlashTmaMaps {
  CUtensorMap q, k, v;  // 4-D maps over (D, S, H, B) with 64-column boxes and 128-byte swizzle
  CUtensorMap o;        // the output, 64 x 64 boxes, for the TMA-store epilogue (when p.out_tma)
  CUtensorMap kg, vg;   // the compact walk's gathered keys and values (FlashParams::kv_block_rows)
  static constexpr int kCopyMaps = 3;  // kg is k's map kCopyMaps maps on, vg v's
};
inline constexpr std::size_t kCopyMapsBytes = FlashTmaMaps::kCopyMaps * sizeof(CUtensorMap);
static_assert(offsetof(FlashTmaMaps, kg) - offsetof(FlashTmaMaps, k) == kCopyMapsBytes &&
                  offsetof(FlashTmaMaps, vg) - offsetof(FlashTmaMaps, v) == kCopyMapsBytes,
              "the producer finds the gathered copies' maps by offset");

template <int kD_, int kBlockN_, int kStages_, bool kBf16_, int kConsumers_ = 2, bool kStagedEpilogue_ = false,
          bool kIssueInTurn_ = false, bool kTmaStore_ = false, bool kOverlap_ = true, bool kRowSumByMma_ = false,
          bool kEarlyExp_ = false, int kPolyEvery_ = 0>
struct HopperTraits {
  // A consumer overlaps its softmax with its own products (the next block's Q K^T and the
  // previous block's P V in flight together). Without it each block runs Q K^T, softmax, P V in
  // order, holding no second score tile, and the other warpgroups fill the tensor cores.
  static constexpr bool kOverlap = kOverlap_;
  // The staged epilogue hands the output block to TMA stores (one thread issues them; the
  // warpgroup moves on while they drain) instead of storing it with its own 16-byte stores.
  static constexpr bool kTmaStore = kTmaStore_ && kStagedEpilogue_;
  // Consumer warpgroups issue their GEMMs in turn (named barriers 4..6), so that one group's
  // softmax runs while another's products occupy the tensor cores.
  static constexpr bool kIssueInTurn = kIssueInTurn_;
  // The output block goes through its own shared-memory buffer to 16-byte coalesced stores
  // (where shared memory has room for it) instead of 4-byte stores from the accumulators.
  static constexpr bool kStagedEpilogue = kStagedEpilogue_;
  // The P V product also sums each row of P: V gains eight columns of ones (a constant tile that
  // follows the V stages), so the row sums come out of the tensor cores in fp32 instead of one
  // add per score. hd64 only (its value tile is one 64-column chunk).
  static constexpr bool kRowSumByMma = kRowSumByMma_;
  // Once a row has a maximum, its exponentials are taken against that running maximum while the
  // block's own maximum is found alongside (different pipes), instead of after it; the rare block
  // whose maximum grew rescales its exponentials (or, after a jump past the fp32 range, recomputes
  // its scores from shared memory, so K and Q are handed back after the softmax).
  static constexpr bool kEarlyExp = kEarlyExp_;
  // Every kPolyEvery-th exponential of a row (0: none) is computed on the FMA pipe by a cubic
  // (ptx::exp2_fma) instead of on the MUFU unit, which at hd64 is as busy as the tensor cores.
  static constexpr int kPolyEvery = kPolyEvery_;
  static constexpr int kD = kD_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kBf16 = kBf16_;
  static constexpr int kConsumers = kConsumers_;  // consumer warpgroups, 64 query rows each
  static constexpr int kBlockM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kChunks = (kD + 63) / 64;  // 64-column (128-byte) swizzle chunks
  static constexpr int kQChunkBytes = kBlockM * 128;
  static constexpr int kKVChunkBytes = kBlockN * 128;
  static constexpr int kQBytes = kChunks * kQChunkBytes;
  static constexpr int kKVBytes = kChunks * kKVChunkBytes;
  static constexpr int kKOffset = kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kOnesOffset = kVOffset + kStages * kKVBytes;
  static constexpr int kOnesBytes = kRowSumByMma ? kStages * kKVBytes : 0;
  static constexpr int kOOffset = kOnesOffset + kOnesBytes;
  static constexpr int kOBytes = kStagedEpilogue ? kQBytes : 0;
  static constexpr int kBarrierOffset = kOOffset + kOBytes;
  static constexpr int kNumBarriers = 2 + 4 * kStages;
  // +1024: the dynamic shared-memory base is only 16-byte aligned; swizzled tiles need 1024.
  static constexpr int kSmemBytes = kBarrierOffset + kNumBarriers * 8 + 1024;
  // The register file (64K) split between one producer and kConsumers consumer warpgroups.
  // setmaxnreg can only hand out what the CTA got at launch: kThreads times the per-thread count
  // the launch bounds allow (a multiple of 8).
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  static_assert(kConsumers == 2 || kConsumers == 3, "two or three consumer warpgroups");
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= kThreads * ((65536 / kThreads) & ~7),
                "register budget exceeded");
  static_assert(kBlockN % 16 == 0 && kD % 16 == 0, "wgmma needs multiples of 16");
  static_assert(!kRowSumByMma || kD == 64, "row sums through the P V product need hd64");
  static constexpr int kPVN = kD + (kRowSumByMma ? 8 : 0);  // columns of the P V product
  // Packed batches take their tiles in the launcher's order (packed_order.h) through one more load
  // in the decode. The producers of the hd256 and 176-key tiles, two-group tiles whose decode also
  // carries the tail split's, have no register for it under their 24 (ptxas spilled 24-32 bytes):
  // their packed launches take the tiles of the grid of the maxima in turn.
  static constexpr bool kPackedOrder = !(kConsumers == 2 && (kD == 256 || kBlockN == 176));
  static_assert(kSmemBytes <= 227 * 1024, "tile does not fit in shared memory");
};

// How a tile walks its key blocks: every block in order; the walk the launcher wrote for a packed
// key mask (p.kv_walk: blocks of the kept runs, which may start at any key, or the key blocks that
// keep a key), skipping padding; or the blocks its block-sparse list names (p.bs_offsets /
// p.bs_indices). In the listed walk a tile's position n runs over its list and the key block at n
// is list[n]; in the live-bits walk position n is entry n of the batch's walk; otherwise the
// position is the block. The compact walk (non-causal key masks) is the plain walk over the
// batch's kept keys in compact order (p.kv_count, p.kv_block_rows): only its producer differs, in
// where a block's rows come from.
enum class KeyWalk { kEvery, kLiveBits, kListed, kCompact };

struct TileCoord {
  int b, h, m_block;
  int q_row0;      // first query row of the tile in the (packed) sequence dimension
  int kv_row0;     // first key row of this batch in the sequence dimension
  int tma_batch;   // batch coordinate of the TMA maps (0 when packed)
  int seqlen_q, seqlen_k;
  int n_blocks;
  bool skip;
  // The key blocks this work item covers: all of them, or one piece of a split tail tile.
  int n_begin, n_end;
  int splits, piece;  // splits == 1: a whole tile
  int split_tile;     // index among the split tiles (their partials and arrival counters)
  int list_first;      // the listed walk: where this tile's ascending key blocks (n_blocks of them)
                       // start in p.bs_indices (and its partial flags in p.bs_partial)
};

// The key block at position n of tile c's walk.
template <KeyWalk kWalk>
__device__ __forceinline__ int key_block(const FlashParams& p, const TileCoord& c, int n) {
  if constexpr (kWalk == KeyWalk::kListed) {
    return __ldg(p.bs_indices + c.list_first + n);
  } else {
    return n;
  }
}

// Entry n of batch b's key walk (FlashParams::kv_walk): its first key and its length | bits << 16.
__device__ __forceinline__ int2 walk_entry(const FlashParams& p, int b, int n) {
  return __ldg(reinterpret_cast<const int2*>(p.kv_walk) + static_cast<int64_t>(b) * p.kv_walk_stride + n);
}

// The first key row (within the batch) that position n of tile c's walk loads.
template <class T, KeyWalk kWalk>
__device__ __forceinline__ int walk_key0(const FlashParams& p, const TileCoord& c, int n) {
  if constexpr (kWalk == KeyWalk::kLiveBits) {
    return walk_entry(p, c.b, n).x;
  } else {
    return key_block<kWalk>(p, c, n) * T::kBlockN;
  }
}

// kWalk: the kernel's walk. Only kEvery launches are packed (masks do not combine with cu_seqlens)
// and only kListed launches have lists, so each kernel compiles only its own branch: the producer
// decodes under 24 or 32 registers, and one more branch there made ptxas spill (T::kPackedOrder).
template <class T, KeyWalk kWalk>
__device__ __forceinline__ TileCoord decode_tile(const FlashParams& p, int tile) {
  TileCoord c;
  if constexpr (kWalk == KeyWalk::kEvery && T::kPackedOrder) {
    if (p.packed_tiles != nullptr) {  // a packed batch in its order (packed_order.h): the slot's tile
      tile = __ldg(p.packed_tiles + tile);
      if (tile < 0) {
        c.skip = true;
        return c;
      }
    }
  }
  int m = tile % p.num_m_blocks;
  const int bh = tile / p.num_m_blocks;
  c.h = bh % p.heads_q;
  c.b = bh / p.heads_q;
  if (p.causal) m = p.num_m_blocks - 1 - m;  // longest rows first
  c.m_block = m;
  if (p.cu_seqlens_q != nullptr) {
    const int q0 = p.cu_seqlens_q[c.b], k0 = p.cu_seqlens_k[c.b];
    c.seqlen_q = p.cu_seqlens_q[c.b + 1] - q0;
    c.seqlen_k = p.cu_seqlens_k[c.b + 1] - k0;
    c.q_row0 = q0 + m * T::kBlockM;
    c.kv_row0 = k0;
    c.tma_batch = 0;
  } else {
    c.seqlen_q = p.seqlen_q;
    c.seqlen_k = p.seqlen_k;
    c.q_row0 = m * T::kBlockM;
    c.kv_row0 = 0;
    c.tma_batch = c.b;
  }
  if constexpr (kWalk == KeyWalk::kCompact) c.seqlen_k = __ldg(p.kv_count + c.b);  // the kept keys
  c.skip = m * T::kBlockM >= c.seqlen_q;
  int kv_end = c.seqlen_k;
  if (p.causal) kv_end = min(kv_end, (m + 1) * T::kBlockM);
  c.n_blocks = kv_end > 0 ? (kv_end + T::kBlockN - 1) / T::kBlockN : 0;
  c.list_first = 0;
  if constexpr (kWalk == KeyWalk::kListed) {
    // Block-sparse: the tile's list (causal and packed launches are refused; decode_item cuts a split
    // tile's list into its pieces).
    const int r = c.b * p.bs_stride_b + c.h * p.bs_stride_h + m;
    const int first = __ldg(p.bs_offsets + r);
    c.list_first = first;
    c.n_blocks = __ldg(p.bs_offsets + r + 1) - first;
  }
  c.n_begin = 0;
  c.n_end = c.n_blocks;
  c.splits = 1;
  c.piece = 0;
  c.split_tile = 0;
  return c;
}

// Work item `item` of the persistent loop: whole tiles first, then the pieces of the tail's runs
// (a run's pieces k = 0, 1, ... are split_segments items apart, so with one run per CTA each CTA
// takes its own run's pieces in order). Items of runs that touch fewer tiles are skipped.
template <class T, KeyWalk kWalk>
__device__ __forceinline__ TileCoord decode_item(const FlashParams& p, int item) {
  if (item < p.split_begin || p.split_segments == 0) return decode_tile<T, kWalk>(p, item);
  const int j = item - p.split_begin;
  const int n_blocks = (p.seqlen_k + T::kBlockN - 1) / T::kBlockN;
  const TailPiece tp = tail_piece<int>(p.split_blocks, p.split_segments, n_blocks, j % p.split_segments, j / p.split_segments);
  if (tp.tile < 0) {
    TileCoord none{};
    none.skip = true;
    return none;
  }
  TileCoord c = decode_tile<T, kWalk>(p, p.split_begin + tp.tile);
  c.splits = tp.pieces;
  c.piece = tp.piece;
  c.split_tile = tp.tile;
  c.n_begin = tp.n_begin;
  c.n_end = tp.n_end;
  if constexpr (kWalk == KeyWalk::kCompact) {  // pieces are planned on Skv's blocks; batches keep fewer
    c.n_end = min(c.n_end, c.n_blocks);
    c.n_begin = min(c.n_begin, c.n_end);
  }
  if constexpr (kWalk == KeyWalk::kListed) {
    // Pieces are planned on Skv's blocks; a list names fewer, so each piece takes the same share of
    // its tile's list (adjacent pieces meet at the same position, so the list is covered once).
    c.n_begin = static_cast<int>(static_cast<int64_t>(c.n_begin) * c.n_blocks / n_blocks);
    c.n_end = static_cast<int>(static_cast<int64_t>(c.n_end) * c.n_blocks / n_blocks);
  }
  return c;
}

// The next position of tile c's walk from n on (c.n_end if none), and whether its block keeps
// every one of its kBlockN keys. With a packed key mask the launcher wrote each batch's walk
// (FlashParams::kv_walk): the blocks of its kept runs, or its key blocks that keep a key, so padded
// prompts cost only their kept keys; without one every block is live, and it is full unless a byte
// mask must be read.
template <class T>
__device__ __forceinline__ int next_live_block(const FlashParams& p, const TileCoord& c, int n, bool& full) {
  if (p.kv_walk == nullptr) {
    full = p.kv_mask == nullptr;
    return n;
  }
  full = false;
  if (n >= c.n_end) return c.n_end;
  const int2 e = walk_entry(p, c.b, n);
  if (e.y == 0) return c.n_end;  // past the walk's last entry
  // Causal walks are the aligned kind (the launcher's choice), so their entries below the tile's
  // last key are the first ones.
  if (p.causal && e.x >= (c.m_block + 1) * T::kBlockM) return c.n_end;
  full = e.y == T::kBlockN;  // the whole block, no bits to read
  return n;
}

template <class T>
struct SmemLayout {
  uint8_t* base;
  __device__ uint8_t* q() const { return base; }
  __device__ uint8_t* k(int stage) const { return base + T::kKOffset + stage * T::kKVBytes; }
  __device__ uint8_t* v(int stage) const { return base + T::kVOffset + stage * T::kKVBytes; }
  __device__ uint8_t* o() const { return base + T::kOOffset; }
  __device__ uint8_t* ones() const { return base + T::kOnesOffset; }
  __device__ uint64_t* bar() const { return reinterpret_cast<uint64_t*>(base + T::kBarrierOffset); }
  __device__ uint64_t* q_full() const { return bar(); }
  __device__ uint64_t* q_empty() const { return bar() + 1; }
  __device__ uint64_t* k_full(int s) const { return bar() + 2 + s; }
  __device__ uint64_t* k_empty(int s) const { return bar() + 2 + T::kStages + s; }
  __device__ uint64_t* v_full(int s) const { return bar() + 2 + 2 * T::kStages + s; }
  __device__ uint64_t* v_empty(int s) const { return bar() + 2 + 3 * T::kStages + s; }
};

// kWalk: which key blocks each tile loads (KeyWalk); the consumers walk alike.
template <class T, KeyWalk kWalk>
__device__ __forceinline__ void producer_loop(const FlashTmaMaps& maps, const FlashParams& p, const SmemLayout<T>& sm) {
  constexpr bool kSkip = kWalk == KeyWalk::kLiveBits;
  const int group = p.heads_q / p.heads_kv;
  int stage = 0;
  uint32_t phase = 0, q_phase = 0;
  for (int item = blockIdx.x; item < p.num_items; item += gridDim.x) {
    const TileCoord c = decode_item<T, kWalk>(p, item);
    if (c.skip) continue;
    ptx::mbar_wait(sm.q_empty(), q_phase ^ 1);
    q_phase ^= 1;
    ptx::mbar_arrive_expect_tx(sm.q_full(), T::kQBytes);
#pragma unroll
    for (int ch = 0; ch < T::kChunks; ++ch)
      ptx::tma_load_4d(sm.q() + ch * T::kQChunkBytes, &maps.q, sm.q_full(), ch * 64, c.q_row0, c.h, c.tma_batch);
    const int hkv = c.h / group;
    bool full;
    for (int n = kSkip ? next_live_block<T>(p, c, c.n_begin, full) : c.n_begin; n < c.n_end;
         n = kSkip ? next_live_block<T>(p, c, n + 1, full) : n + 1) {
      int row = c.kv_row0 + walk_key0<T, kWalk>(p, c, n);
      int copy = 0;  // 1: the block comes from the gathered copy (maps kg / vg, kCopyMaps maps on)
      if constexpr (kWalk == KeyWalk::kCompact) {
        row = __ldg(p.kv_block_rows + static_cast<int64_t>(c.b) * p.kv_block_rows_stride + n);
        copy = row < 0;
        if (copy) row = -1 - row;
      }
      const CUtensorMap* map_k = &maps.k + copy * FlashTmaMaps::kCopyMaps;
      const CUtensorMap* map_v = &maps.v + copy * FlashTmaMaps::kCopyMaps;
      ptx::mbar_wait(sm.k_empty(stage), phase ^ 1);
      ptx::mbar_arrive_expect_tx(sm.k_full(stage), T::kKVBytes);
#pragma unroll
      for (int ch = 0; ch < T::kChunks; ++ch)
        ptx::tma_load_4d(sm.k(stage) + ch * T::kKVChunkBytes, map_k, sm.k_full(stage), ch * 64, row, hkv,
                         c.tma_batch);
      ptx::mbar_wait(sm.v_empty(stage), phase ^ 1);
      ptx::mbar_arrive_expect_tx(sm.v_full(stage), T::kKVBytes);
#pragma unroll
      for (int ch = 0; ch < T::kChunks; ++ch)
        ptx::tma_load_4d(sm.v(stage) + ch * T::kKVChunkBytes, map_v, sm.v_full(stage), ch * 64, row, hkv,
                         c.tma_batch);
      if (++stage == T::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

template <bool kBf16>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (kBf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Per-thread softmax state for its two rows (r and r + 8 of the warp's 16).
struct RowState {
  float m[2];  // running max of raw scores
  float l[2];  // running sum of exp2
};

template <class T>
struct Consumer {
  static constexpr int kSAcc = T::kBlockN / 2;
  static constexpr int kOAcc = T::kD / 2;
  static constexpr int kPVAcc = T::kPVN / 2;  // the output, then (kRowSumByMma) the row sums
  static constexpr int kKSteps = T::kD / 16;        // Q K^T reduction steps
  static constexpr int kPVSteps = T::kBlockN / 16;  // P V reduction steps

  const FlashParams& p;
  const FlashTmaMaps& maps;
  const SmemLayout<T>& sm;
  int wg;      // which 64 query rows of the tile (0 .. kConsumers - 1)
  int tid;     // 0..127 within the warpgroup
  int lane, warp;

  // Descriptors of the Q tile (this warpgroup's rows) and of stage 0's K and V tiles; the others
  // are offsets from these (set by init_descriptors before run).
  uint64_t q_desc0 = 0, k_desc0 = 0, v_desc0 = 0;

  __device__ void init_descriptors() {
    q_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.q()) + wg * 64 * 128, 16, 1024);
    k_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.k(0)), 16, 1024);
    // V is [kv rows][D]: MN-major for the P V product; 64-column chunks are kKVChunkBytes apart.
    // With row sums the second chunk is the tile of ones that lies as far past each V stage.
    v_desc0 = ptx::make_smem_desc_sw128(ptx::smem_addr(sm.v(0)),
                                        T::kRowSumByMma ? T::kOnesBytes : T::kKVChunkBytes, 1024);
  }
  __device__ uint64_t q_desc(int kk) const {
    return ptx::smem_desc_advance(q_desc0, (kk / 4) * T::kQChunkBytes + (kk % 4) * 32);
  }
  __device__ uint64_t k_desc(uint64_t stage_desc, int kk) const {
    return ptx::smem_desc_advance(stage_desc, (kk / 4) * T::kKVChunkBytes + (kk % 4) * 32);
  }
  __device__ uint64_t v_desc(uint64_t stage_desc, int kk) const {
    return ptx::smem_desc_advance(stage_desc, kk * 16 * 128);
  }

  __device__ void issue_qk(float (&s)[kSAcc], int stage) const {
    const uint64_t k0 = ptx::smem_desc_advance(k_desc0, stage * T::kKVBytes);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      Wgmma<T::kBlockN>::template ss<T::kBf16>(s, q_desc(kk), k_desc(k0, kk), kk > 0 ? 1 : 0);
    }
  }

  // Hands the Q buffer back after its last read, so the next tile's Q may load.
  __device__ void release_q() const { release(sm.q_empty()); }
  __device__ void issue_pv(float (&o)[kPVAcc], const uint32_t (&pr)[T::kBlockN / 4], int stage) const {
    const uint64_t v0 = ptx::smem_desc_advance(v_desc0, stage * T::kKVBytes);
#pragma unroll
    for (int kk = 0; kk < kPVSteps; ++kk) {
      const uint32_t a[4] = {pr[4 * kk + 0], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
      Wgmma<T::kPVN>::template rs<T::kBf16>(o, a, v_desc(v0, kk), 1);
    }
  }

  // Turn-taking of GEMM issue between consumer warpgroups: wait for this group's turn, then hand
  // the turn to the next group once the products are issued. Group 0 starts; the last group's
  // final hand-over is taken by group 0 after its loop (finish_turns).
  static constexpr int kTurnBarrier = 4;  // 4 .. 6; the staged epilogue uses 1 .. 3
  __device__ void take_turn() const {
    if constexpr (T::kIssueInTurn) ptx::named_barrier_sync(kTurnBarrier + wg, 256);
  }
  __device__ void pass_turn() const {
    if constexpr (T::kIssueInTurn) ptx::named_barrier_arrive(kTurnBarrier + (wg + 1) % T::kConsumers, 256);
  }
  __device__ void start_turns() const {
    if constexpr (T::kIssueInTurn)
      if (wg == T::kConsumers - 1) ptx::named_barrier_arrive(kTurnBarrier, 256);
  }
  __device__ void finish_turns() const {
    if constexpr (T::kIssueInTurn)
      if (wg == 0) ptx::named_barrier_sync(kTurnBarrier, 256);
  }

  __device__ void release(uint64_t* bar) const {
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(bar);
  }

  // One past the last key of block n that may be attended: the tile's valid rows with block-sparse
  // tile rows (padded tiles), else the sequence's end (the compact walk: the batch's kept keys).
  __device__ int key_end(const TileCoord& c, int n) const {
    if (p.bs_tile_rows != nullptr) return n * T::kBlockN + __ldg(p.bs_tile_rows + n);
    return c.seqlen_k;
  }

  // What position n of the walk names: its key block, or in the live-bits walk the
  // position itself (whose walk entry the masking reads again, rather than holding it in registers
  // across the products).
  template <KeyWalk kWalk>
  __device__ int block_at(const TileCoord& c, int n) const {
    return key_block<kWalk>(p, c, n);
  }

  // Sets out-of-range, causal and key-padding positions to -inf. n: the walk item (block_at).
  // kWalk: only the listed walk reads a dense mask's bits, only the live-bits walk its entries and
  // the key mask's bits (each branch costs the other walks registers).
  template <KeyWalk kWalk>
  __device__ void apply_mask(float (&s)[kSAcc], const TileCoord& c, int n) const {
    const int row_base = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4;
    if constexpr (kWalk == KeyWalk::kListed) {
      if (p.row_bits != nullptr) {
        // A dense mask: this thread's two rows read their own words (a row past Sq reads row 0's;
        // it is never stored). Bits are zero past Skv, so the key end needs no compare.
        const uint32_t* bits = p.row_bits + c.b * p.row_bits_stride_b + c.h * p.row_bits_stride_h;
        const uint32_t* rows[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row_base + 8 * r;
          rows[r] = bits + static_cast<int64_t>(row < c.seqlen_q ? row : 0) * p.row_bits_words;
        }
        uint32_t word[2] = {0u, 0u};
#pragma unroll
        for (int j = 0; j < T::kBlockN / 8; ++j) {
          const int col0 = n * T::kBlockN + j * 8;
          if (T::kBlockN % 32 != 0 || j % 4 == 0) {
            word[0] = __ldg(rows[0] + (col0 >> 5));
            word[1] = __ldg(rows[1] + (col0 >> 5));
          }
          const int shift = (col0 & 31) + (lane % 4) * 2;
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (((word[e >> 1] >> (shift + (e & 1))) & 1u) == 0) s[j * 4 + e] = -INFINITY;
        }
        return;
      }
    }
    int key0 = n * T::kBlockN, end = 0;
    if constexpr (kWalk == KeyWalk::kLiveBits) {
      const int2 entry = walk_entry(p, c.b, n);  // read again here rather than held across the products
      key0 = entry.x;
      end = entry.x + (entry.y & 0xFFFF);
      if ((entry.y >> 16) != 0) {
        // An aligned block that also drops keys (or a run's last block whose bits are the run's,
        // key_walk.h's partial_run_reads_bits): its bits decide. It starts on a multiple of
        // kBlockN, so eight neighbouring keys never straddle a 32-bit word, and with tiles of whole
        // words each word covers four groups of eight: one warp-uniform load per 8 or 32 columns.
        const uint32_t* bits = p.kv_bits + static_cast<int64_t>(c.b) * p.kv_bits_words;
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < T::kBlockN / 8; ++j) {
          const int col0 = key0 + j * 8;
          if (T::kBlockN % 32 != 0 || j % 4 == 0) word = __ldg(bits + (col0 >> 5));
          const uint32_t kept = word >> ((col0 & 31) + (lane % 4) * 2);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col0 + (lane % 4) * 2 + (e & 1);
            const int row = row_base + (e >= 2 ? 8 : 0);
            bool keep = col < c.seqlen_k && ((kept >> (e & 1)) & 1u) != 0;
            if (p.causal) keep = keep && col <= row;
            if (!keep) s[j * 4 + e] = -INFINITY;
          }
        }
        return;
      }
    }
    if (p.kv_mask == nullptr) {
      // Only the keys past the end (and, causal, past the row): each of this thread's two rows keeps
      // a prefix of the block, so one compare against a per-row limit decides each value.
      int limit[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        limit[r] = kWalk == KeyWalk::kLiveBits ? end : key_end(c, n);
        if (p.causal) limit[r] = min(limit[r], row_base + 8 * r + 1);
        limit[r] -= key0 + (lane % 4) * 2;
      }
#pragma unroll
      for (int j = 0; j < T::kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (j * 8 + (e & 1) >= limit[e >> 1]) s[j * 4 + e] = -INFINITY;
      return;
    }
    // The byte mask: without a packed copy, or (live-bits walk) a block of a kept run that ends
    // before the block does (its keys before `end` are all kept; the next run's are not its own).
    // At hd64 the live-bits walk compares against `end` alone (no loads: SD3's key-padded calls 4-5 %
    // faster on an H200); at the other head sizes reading the bytes there keeps the live-bits kernels
    // free of spills (ptxas, measured on the 128- to 192-key tiles; without the loads the in-order
    // hd128 kernel spilled).
    const uint8_t* mask = p.kv_mask + c.b * p.mask_stride_b;
#pragma unroll
    for (int j = 0; j < T::kBlockN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = key0 + j * 8 + (lane % 4) * 2 + (e & 1);
        const int row = row_base + (e >= 2 ? 8 : 0);
        bool keep = col < (kWalk == KeyWalk::kLiveBits ? end : c.seqlen_k);
        if (p.causal) keep = keep && col <= row;
        if constexpr (kWalk != KeyWalk::kLiveBits || T::kD != 64)
          if (keep) keep = mask[col * p.mask_stride_s] != 0;
        if (!keep) s[j * 4 + e] = -INFINITY;
      }
    }
  }

  // `full`: the walk found every key of the item kept (the live-bits walk: a whole block without
  // bits, so only causal rows can cut it; it masks every causal block rather than read the entry
  // again here, which made ptxas spill 180 bytes on the 176-key tile).
  template <KeyWalk kWalk>
  __device__ bool needs_mask(const TileCoord& c, int n, bool full) const {
    if (!full) return true;
    if (p.kv_walk != nullptr) return p.causal;  // set in live-bits launches only
    if ((n + 1) * T::kBlockN > key_end(c, n)) return true;
    return p.causal && (n + 1) * T::kBlockN - 1 > c.m_block * T::kBlockM;
  }

  // Online softmax on one score tile: updates the row state and turns s into exp2 values in place.
  // The running maximum only moves when a row's maximum grew by more than kRescaleLog2 (in log2
  // units) somewhere in the warp: otherwise the old maximum stays, the exponentials are at most
  // 2^kRescaleLog2 and the output needs no rescaling. Returns whether it does (then alpha holds the
  // factors). Maxima and sums use kLanes independent partials so the reductions are not one long
  // dependent chain.
  static constexpr float kRescaleLog2 = 8.f;

  // Index in s of this thread's i-th value of row r (r = 0: lane/4, r = 1: lane/4 + 8).
  __device__ static constexpr int at(int i, int r) { return (i / 2) * 4 + 2 * r + (i % 2); }
  // 2^x for this thread's i-th value of a row: on the FMA pipe for every kPolyEvery-th value, on
  // the MUFU unit otherwise (i is a constant once the callers' loops are unrolled).
  __device__ static float exp2_col(int i, float x) {
    if constexpr (T::kPolyEvery > 0)
      if (i % T::kPolyEvery == T::kPolyEvery - 1) return ptx::exp2_fma(x);
    return ptx::exp2_approx(x);
  }
  // The maximum over the four threads that hold one row.
  __device__ static float quad_max(float m) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
    return fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
  }

  __device__ bool softmax(float (&s)[kSAcc], RowState& st, float (&alpha)[2]) const {
    constexpr int kCols = T::kBlockN / 4;  // values per row held by this thread
    constexpr int kLanes = 8;
    static_assert(kCols >= kLanes, "fewer values per row than reduction lanes");
    const float scale = p.scale_log2;
    float mx[2];
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float part[kLanes];
#pragma unroll
      for (int i = 0; i < kLanes; ++i) part[i] = s[at(i, r)];
#pragma unroll
      for (int i = kLanes; i < kCols; ++i) part[i % kLanes] = fmaxf(part[i % kLanes], s[at(i, r)]);
#pragma unroll
      for (int w = kLanes / 2; w > 0; w /= 2)
#pragma unroll
        for (int i = 0; i < w; ++i) part[i] = fmaxf(part[i], part[i + w]);
      mx[r] = fmaxf(quad_max(part[0]), st.m[r]);
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
      if constexpr (T::kRowSumByMma) {
#pragma unroll
        for (int i = 0; i < kCols; ++i) s[at(i, r)] = exp2_col(i, fmaf(s[at(i, r)], scale, -m_scaled));
      } else {
        float part[kLanes];
#pragma unroll
        for (int i = 0; i < kLanes; ++i) part[i] = 0.f;
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
          const float v = exp2_col(i, fmaf(s[at(i, r)], scale, -m_scaled));
          s[at(i, r)] = v;
          part[i % kLanes] += v;
        }
#pragma unroll
        for (int w = kLanes / 2; w > 0; w /= 2)
#pragma unroll
          for (int i = 0; i < w; ++i) part[i] += part[i + w];
        st.l[r] = rescale ? fmaf(st.l[r], alpha[r], part[0]) : st.l[r] + part[0];
      }
    }
    return rescale;
  }

  // Element (row, col) of a K-major tile in shared memory (64-column chunks of 128-byte rows, 128-byte
  // swizzle: the 16-byte unit index is XORed with the row within its 8-row atom).
  __device__ static float tile_elem(const uint8_t* tile, int chunk_bytes, int row, int col) {
    const int byte = (col % 64) * 2;
    const int unit = (byte / 16) ^ (row % 8);
    const uint16_t bits = *reinterpret_cast<const uint16_t*>(tile + (col / 64) * chunk_bytes + row * 128 + unit * 16 + byte % 16);
    if constexpr (T::kBf16) return __bfloat162float(__ushort_as_bfloat16(bits));
    else return __half2float(__ushort_as_half(bits));
  }

  // This thread's raw scores of the block in `stage`, recomputed from Q and K in shared memory with
  // scalar FMAs: only for the exponentials that a jump of the maximum past the fp32 range spoiled.
  __device__ void recompute_scores(float (&s)[kSAcc], int stage) const {
    const uint8_t* q = sm.q();
    const uint8_t* k = sm.k(stage);
    // A runtime loop over the values (s is written through a static select, so it stays in registers).
#pragma unroll 1
    for (int idx = 0; idx < kSAcc; ++idx) {
      const int j = idx / 4, e = idx % 4;
      const int row = wg * 64 + warp * 16 + lane / 4 + (e >= 2 ? 8 : 0);
      const int key = j * 8 + (lane % 4) * 2 + (e & 1);
      float acc = 0.f;
#pragma unroll 1
      for (int d = 0; d < T::kD; ++d)
        acc = fmaf(tile_elem(q, T::kQChunkBytes, row, d), tile_elem(k, T::kKVChunkBytes, key, d), acc);
#pragma unroll
      for (int t = 0; t < kSAcc; ++t)
        if (t == idx) s[t] = acc;
    }
  }

  // The softmax of a block once both rows of every thread in the warp have a finite running max:
  // exponentials against it, the block maximum found in the same pass. If no row grew by more
  // than kRescaleLog2 the exponentials stand (at most 2^kRescaleLog2); otherwise the warp moves to
  // the new maxima and multiplies its exponentials down, unless a jump reached kMaxEarlyJump
  // (exponentials may have overflowed): then this thread recomputes its scores and takes them again.
  static constexpr float kMaxEarlyJump = 120.f;
  template <KeyWalk kWalk>
  __device__ bool softmax_early(float (&s)[kSAcc], RowState& st, float (&alpha)[2], const TileCoord& c, int n,
                                bool full, int stage) const {
    constexpr int kCols = T::kBlockN / 4;
    constexpr int kLanes = 4;
    const float scale = p.scale_log2;
    float mx[2], sum[2] = {0.f, 0.f};
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float ms = st.m[r] * scale;
      float part[kLanes], acc[kLanes];
#pragma unroll
      for (int i = 0; i < kCols; ++i) {
        const float x = s[at(i, r)];
        part[i % kLanes] = i < kLanes ? x : fmaxf(part[i % kLanes], x);
        const float v = exp2_col(i, fmaf(x, scale, -ms));
        s[at(i, r)] = v;
        if constexpr (!T::kRowSumByMma) acc[i % kLanes] = i < kLanes ? v : acc[i % kLanes] + v;
      }
#pragma unroll
      for (int w = kLanes / 2; w > 0; w /= 2)
#pragma unroll
        for (int i = 0; i < w; ++i) {
          part[i] = fmaxf(part[i], part[i + w]);
          if constexpr (!T::kRowSumByMma) acc[i] += acc[i + w];
        }
      mx[r] = fmaxf(quad_max(part[0]), st.m[r]);
      grew = grew || (mx[r] - st.m[r]) * scale > kRescaleLog2;
      if constexpr (!T::kRowSumByMma) sum[r] = acc[0];
    }
    if (!__any_sync(0xffffffff, grew)) {
      st.l[0] += sum[0];
      st.l[1] += sum[1];
      return false;
    }
    const float jump0 = (mx[0] - st.m[0]) * scale, jump1 = (mx[1] - st.m[1]) * scale;
    if (jump0 < kMaxEarlyJump && jump1 < kMaxEarlyJump) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        alpha[r] = ptx::exp2_approx(-(r == 0 ? jump0 : jump1));
#pragma unroll
        for (int i = 0; i < kCols; ++i) s[at(i, r)] *= alpha[r];
        st.l[r] = (st.l[r] + sum[r]) * alpha[r];
        st.m[r] = mx[r];
      }
      return true;
    }
    recompute_scores(s, stage);
    if (needs_mask<kWalk>(c, n, full)) apply_mask<kWalk>(s, c, n);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float ms = mx[r] * scale;
      alpha[r] = ptx::exp2_approx(st.m[r] * scale - ms);
      float l = 0.f;
#pragma unroll
      for (int i = 0; i < kCols; ++i) {
        const float v = ptx::exp2_approx(fmaf(s[at(i, r)], scale, -ms));
        s[at(i, r)] = v;
        l += v;
      }
      st.l[r] = st.l[r] * alpha[r] + (T::kRowSumByMma ? 0.f : l);
      st.m[r] = mx[r];
    }
    return true;
  }

  // The softmax of one block: early exponentials where the traits ask for them and every row of the
  // warp already has a maximum, otherwise max first. Returns whether the output must be rescaled.
  template <KeyWalk kWalk>
  __device__ bool block_softmax(float (&s)[kSAcc], RowState& st, float (&alpha)[2], const TileCoord& c, int n,
                                bool full, int stage) const {
    if constexpr (T::kEarlyExp)
      if (__all_sync(0xffffffff, st.m[0] != -INFINITY && st.m[1] != -INFINITY))
        return softmax_early<kWalk>(s, st, alpha, c, n, full, stage);
    return softmax(s, st, alpha);
  }

  __device__ void convert_p(const float (&s)[kSAcc], uint32_t (&pr)[T::kBlockN / 4]) const {
#pragma unroll
    for (int i = 0; i < T::kBlockN / 4; ++i) pr[i] = pack2<T::kBf16>(s[2 * i], s[2 * i + 1]);
  }

  __device__ static void rescale_o(float (&o)[kPVAcc], const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < T::kPVN / 8; ++j) {
      o[j * 4 + 0] *= alpha[0];
      o[j * 4 + 1] *= alpha[0];
      o[j * 4 + 2] *= alpha[1];
      o[j * 4 + 3] *= alpha[1];
    }
  }

  // The full sum of row r (this thread's r-th row): from the P V product's ones block, or the
  // four threads' partial sums added.
  __device__ static float row_sum(const float (&o)[kPVAcc], const RowState& st, int r) {
    if constexpr (T::kRowSumByMma) return o[kOAcc + 2 * r];
    float l = st.l[r];
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    return l;
  }

  // Normalises the output rows into packed half pairs (packed[2 j + r] holds columns j*8 + (lane%4)*2
  // and +1 of row r) and writes the LSE. Reading the accumulators happens here, before the next
  // tile's first product may be issued into other registers.
  __device__ void finish_rows(const float (&o)[kPVAcc], const RowState& st, const TileCoord& c,
                              uint32_t (&packed)[kOAcc / 2]) const {
    const int64_t b_idx = p.cu_seqlens_q != nullptr ? 0 : c.b;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_sum(o, st, r);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4 + 8 * r;
      if (p.lse != nullptr && lane % 4 == 0 && row < c.seqlen_q) {
        const float lse = l > 0.f ? (st.m[r] * p.scale_log2 + __log2f(l)) * 0.69314718055994531f : -INFINITY;
        const int64_t s_idx = (p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[c.b] : 0) + row;
        p.lse[b_idx * p.lse_stride_b + c.h * p.lse_stride_h + s_idx * p.lse_stride_s] = lse;
      }
#pragma unroll
      for (int j = 0; j < T::kD / 8; ++j)
        packed[2 * j + r] = pack2<T::kBf16>(o[j * 4 + 2 * r] * inv, o[j * 4 + 2 * r + 1] * inv);
    }
  }

  // Stores the 64 x D output block of this warpgroup: 4-byte stores from registers, or through the
  // O buffer with 16-byte stores (the Q buffer was already handed back for the next tile).
  __device__ void store_rows(const uint32_t (&packed)[kOAcc / 2], const TileCoord& c) const {
    // A merged split tile is finished by single warps (whichever piece came last), so it cannot
    // use the staged path's warpgroup barriers.
    if (T::kStagedEpilogue && c.splits == 1) {
      store_staged(packed, c);
    } else {
      uint16_t* out = static_cast<uint16_t*>(p.out);
      const int64_t b_idx = p.cu_seqlens_q != nullptr ? 0 : c.b;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = c.m_block * T::kBlockM + wg * 64 + warp * 16 + lane / 4 + 8 * r;
        if (row >= c.seqlen_q) continue;
        uint16_t* dst = out + b_idx * p.out_stride_b + int64_t(c.q_row0 - c.m_block * T::kBlockM + row) * p.out_stride_s +
                        c.h * p.out_stride_h + (lane % 4) * 2;
#pragma unroll
        for (int j = 0; j < T::kD / 8; ++j) *reinterpret_cast<uint32_t*>(dst + j * 8) = packed[2 * j + r];
      }
    }
  }

  // Writes this warpgroup's 64 rows into the O buffer (128-byte swizzle, conflict-free) and stores
  // them with 16-byte accesses, a row's bytes contiguous across neighbouring threads.
  __device__ void store_staged(const uint32_t (&packed)[kOAcc / 2], const TileCoord& c) const {
    uint8_t* buf = sm.o();
    const bool tma = T::kTmaStore && p.out_tma;
    if (tma && tid == 0) ptx::bulk_wait_group_read0();  // the previous tile's TMA store has read the buffer
    ptx::named_barrier_sync(1 + wg, 128);  // the previous tile's reads of this buffer are done
    const int r_local = wg * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < T::kD / 8; ++j) {
      const int col = j * 8 + (lane % 4) * 2;
      const int ch = col / 64, byte = (col % 64) * 2;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rr = r_local + 8 * r;
        *reinterpret_cast<uint32_t*>(buf + ch * T::kQChunkBytes + rr * 128 + (byte ^ ((rr & 7) << 4))) = packed[2 * j + r];
      }
    }
    if (tma) ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1 + wg, 128);
    if (tma) {
      // Rows past the sequence's end are clipped by the map (only unpacked batches use it).
      if (tid == 0) {
#pragma unroll
        for (int ch = 0; ch < T::kChunks; ++ch)
          ptx::tma_store_4d(&maps.o, buf + ch * T::kQChunkBytes + wg * 64 * 128, ch * 64, c.q_row0 + wg * 64, c.h,
                            c.b);
        ptx::bulk_commit_group();
      }
      return;
    }
    constexpr int kVecPerRow = T::kD / 8;
    uint16_t* out = static_cast<uint16_t*>(p.out);
    const int64_t b_idx = p.cu_seqlens_q != nullptr ? 0 : c.b;
    const int row_limit = c.seqlen_q - c.m_block * T::kBlockM - wg * 64;
#pragma unroll 4
    for (int i = tid; i < 64 * kVecPerRow; i += 128) {
      const int row = i / kVecPerRow, col = (i % kVecPerRow) * 8;
      if (row >= row_limit) continue;
      const int rr = wg * 64 + row;
      const int ch = col / 64, byte = (col % 64) * 2;
      const uint4 v = *reinterpret_cast<const uint4*>(buf + ch * T::kQChunkBytes + rr * 128 + (byte ^ ((rr & 7) << 4)));
      uint16_t* dst = out + b_idx * p.out_stride_b + int64_t(c.q_row0 + wg * 64 + row) * p.out_stride_s +
                      c.h * p.out_stride_h + col;
      if (p.out_vec16) {
        *reinterpret_cast<uint4*>(dst) = v;
      } else {
        uint32_t* d4 = reinterpret_cast<uint32_t*>(dst);
        d4[0] = v.x, d4[1] = v.y, d4[2] = v.z, d4[3] = v.w;
      }
    }
  }

  // Publishes this piece's unnormalised output and row state for its warp's 16 rows, and counts
  // the piece in. The last piece to arrive reads every piece back (from L2, its own included) and
  // adds them in piece order, each rescaled to the common row maximum, so the sum does not depend on
  // which piece came last (every run gives the same bits); it returns true with the merged state,
  // the others false.
  // Partials are stored per lane in accumulator order, so each float4 holds o[4 i .. 4 i + 3]:
  // two columns of row r and two of row r + 8.
  __device__ bool merge_split(float (&o)[kPVAcc], RowState& st, const TileCoord& c) const {
    constexpr int kF4 = kPVAcc / 4 + 1;  // the output (and row sums), then (m0, m1, l0, l1)
    const int slot = (c.split_tile * T::kConsumers + wg) * 4 + warp;
    float4* part = reinterpret_cast<float4*>(p.split_partials) + int64_t(slot) * p.split_max_pieces * kF4 * 32 + lane;
    float4* mine = part + c.piece * kF4 * 32;
#pragma unroll
    for (int i = 0; i < kPVAcc / 4; ++i) __stcg(mine + i * 32, make_float4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]));
    __stcg(mine + (kF4 - 1) * 32, make_float4(st.m[0], st.m[1], st.l[0], st.l[1]));
    __threadfence();
    __syncwarp();
    int arrived = 0;
    if (lane == 0) arrived = atomicAdd(p.split_arrivals + slot, 1);
    arrived = __shfl_sync(0xffffffff, arrived, 0);
    if (arrived != c.splits - 1) return false;
    __threadfence();
    float mx[2] = {st.m[0], st.m[1]};
    for (int j = 0; j < c.splits; ++j) {
      if (j == c.piece) continue;
      const float4 ml = __ldcg(part + (j * kF4 + kF4 - 1) * 32);
      mx[0] = fmaxf(mx[0], ml.x);
      mx[1] = fmaxf(mx[1], ml.y);
    }
    const float scale = p.scale_log2;
    // A piece whose keys were all masked has max -inf and contributes nothing.
    auto factor = [&](float m, int r) { return m == -INFINITY ? 0.f : exp2f((m - mx[r]) * scale); };
#pragma unroll
    for (int i = 0; i < kPVAcc; ++i) o[i] = 0.f;
    st.l[0] = st.l[1] = 0.f;
    for (int j = 0; j < c.splits; ++j) {
      const float4 ml = __ldcg(part + (j * kF4 + kF4 - 1) * 32);
      const float f0 = factor(ml.x, 0), f1 = factor(ml.y, 1);
      st.l[0] = fmaf(ml.z, f0, st.l[0]);
      st.l[1] = fmaf(ml.w, f1, st.l[1]);
#pragma unroll
      for (int i = 0; i < kPVAcc / 4; ++i) {
        const float4 v = __ldcg(part + (j * kF4 + i) * 32);
        o[4 * i + 0] = fmaf(v.x, f0, o[4 * i + 0]);
        o[4 * i + 1] = fmaf(v.y, f0, o[4 * i + 1]);
        o[4 * i + 2] = fmaf(v.z, f1, o[4 * i + 2]);
        o[4 * i + 3] = fmaf(v.w, f1, o[4 * i + 3]);
      }
    }
    st.m[0] = mx[0];
    st.m[1] = mx[1];
    return true;
  }

  // The next work item this CTA runs (tiles past a sequence's end are skipped), or p.num_items.
  template <KeyWalk kWalk>
  __device__ int next_tile(int item) const {
    for (; item < p.num_items; item += gridDim.x)
      if (!decode_item<T, kWalk>(p, item).skip) return item;
    return p.num_items;
  }

  // kWalk: as in producer_loop. Without skipping the loop is the plain count over the tile's
  // positions (measured 2-6 % faster than the skipping loop on unmasked workloads on an H200); the
  // listed walk counts positions too and reads each position's key block from the list.
  template <KeyWalk kWalk>
  __device__ void run() const {
    constexpr bool kSkip = kWalk == KeyWalk::kLiveBits;
    int stage = 0;
    uint32_t phase = 0, q_phase = 0;
    start_turns();
    for (int tile = next_tile<kWalk>(blockIdx.x); tile < p.num_items;) {
      TileCoord c = decode_item<T, kWalk>(p, tile);
      float o[kPVAcc];
#pragma unroll
      for (int i = 0; i < kPVAcc; ++i) o[i] = 0.f;
      RowState st{{-INFINITY, -INFINITY}, {0.f, 0.f}};
      ptx::mbar_wait(sm.q_full(), q_phase);
      q_phase ^= 1;
      float s[kSAcc];
      uint32_t pr[T::kBlockN / 4];
      float alpha[2];
      int prev_stage = 0;
      uint32_t prev_phase = 0;
      bool full = p.kv_mask == nullptr;
      int n = kSkip ? next_live_block<T>(p, c, c.n_begin, full) : c.n_begin;
      const int n_first = n;
      if constexpr (!T::kOverlap) {
        while (n < c.n_end) {
          const int kb = block_at<kWalk>(c, n);
          if constexpr (kWalk == KeyWalk::kListed)
            if (p.bs_partial != nullptr) full = __ldg(p.bs_partial + c.list_first + n) == 0;
          ptx::mbar_wait(sm.k_full(stage), phase);
          take_turn();
          ptx::fence_operands(o);
          ptx::wgmma_fence();
          issue_qk(s, stage);
          ptx::wgmma_commit();
          // The next live block is found while the product runs (its walk entry's load is not on
          // the softmax's path), so Q can be handed back after its last read; whether that block
          // keeps every key is kept apart from this block's `full`.
          int next = n + 1;
          bool next_full = full;
          if constexpr (kSkip) next = next_live_block<T>(p, c, n + 1, next_full);
          ptx::wgmma_wait<0>();
          pass_turn();
          ptx::fence_operands(s);
          if constexpr (!T::kEarlyExp) release(sm.k_empty(stage));
          if (!T::kEarlyExp && next >= c.n_end) release_q();  // last read of Q: the next tile's may load
          if (needs_mask<kWalk>(c, kb, full)) apply_mask<kWalk>(s, c, kb);
          const bool rescale = block_softmax<kWalk>(s, st, alpha, c, kb, full, stage);
          if constexpr (T::kEarlyExp) {  // the softmax may have read K and Q again
            release(sm.k_empty(stage));
            if (next >= c.n_end) release_q();
          }
          if (rescale) rescale_o(o, alpha);
          convert_p(s, pr);
          ptx::mbar_wait(sm.v_full(stage), phase);
          take_turn();
          ptx::fence_operands(o);
          ptx::fence_operands(pr);
          ptx::wgmma_fence();
          issue_pv(o, pr, stage);
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          pass_turn();
          ptx::fence_operands(o);
          release(sm.v_empty(stage));
          if (++stage == T::kStages) {
            stage = 0;
            phase ^= 1;
          }
          n = next;
          full = next_full;
        }
        if (n_first >= c.n_end) release_q();
      } else {
        while (n < c.n_end) {
          const int kb = block_at<kWalk>(c, n);
          if constexpr (kWalk == KeyWalk::kListed)
            if (p.bs_partial != nullptr) full = __ldg(p.bs_partial + c.list_first + n) == 0;
          const bool first = n == n_first;
          if (!first) ptx::mbar_wait(sm.v_full(prev_stage), prev_phase);
          ptx::mbar_wait(sm.k_full(stage), phase);
          take_turn();
          ptx::fence_operands(o);
          ptx::fence_operands(pr);
          ptx::wgmma_fence();
          issue_qk(s, stage);
          ptx::wgmma_commit();
          if (!first) {
            issue_pv(o, pr, prev_stage);
            ptx::wgmma_commit();
          }
          if (!first) {
            ptx::wgmma_wait<1>();
          } else {
            ptx::wgmma_wait<0>();
          }
          pass_turn();
          ptx::fence_operands(s);
          if constexpr (!T::kEarlyExp) release(sm.k_empty(stage));
          if (!T::kEarlyExp && !kSkip && n == c.n_end - 1) release_q();  // last read of Q: the next tile's may load
          if (needs_mask<kWalk>(c, kb, full)) apply_mask<kWalk>(s, c, kb);
          const bool rescale = block_softmax<kWalk>(s, st, alpha, c, kb, full, stage);
          if constexpr (T::kEarlyExp) {  // the softmax may have read K and Q again
            release(sm.k_empty(stage));
            if (!kSkip && n == c.n_end - 1) release_q();
          }
          if (!first) {
            ptx::wgmma_wait<0>();
            ptx::fence_operands(o);
            release(sm.v_empty(prev_stage));
            if (rescale) rescale_o(o, alpha);
          }
          convert_p(s, pr);
          prev_stage = stage;
          prev_phase = phase;
          if (++stage == T::kStages) {
            stage = 0;
            phase ^= 1;
          }
          // (Reading the next walk entry before the waits instead, as the in-order loop does, made
          // SD3's key-padded hd64 calls 15 % slower on an H200; measured, not kept.)
          if constexpr (kSkip) {
            n = next_live_block<T>(p, c, n + 1, full);
            if (n >= c.n_end) release_q();  // that was the last read of Q
          } else {
            ++n;
          }
        }
        // Without a live block (every key masked) the rows finish as zeros with LSE -inf.
        const bool any_block = n_first < c.n_end;
        if (!any_block) release_q();
        if (any_block) {
          ptx::mbar_wait(sm.v_full(prev_stage), prev_phase);
          take_turn();
          ptx::fence_operands(o);
          ptx::fence_operands(pr);
          ptx::wgmma_fence();
          issue_pv(o, pr, prev_stage);
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          pass_turn();
          ptx::fence_operands(o);
          release(sm.v_empty(prev_stage));
        }
      }
      if (c.splits > 1 && !merge_split(o, st, c)) {
        tile = next_tile<kWalk>(tile + gridDim.x);
        continue;
      }
      uint32_t packed[kOAcc / 2];
      finish_rows(o, st, c, packed);
      store_rows(packed, c);
      tile = next_tile<kWalk>(tile + gridDim.x);
    }
    finish_turns();
    if (T::kTmaStore && p.out_tma && tid == 0) ptx::bulk_wait_group0();  // stores done before the CTA exits
  }
};

// kWalk: kLiveBits when the launcher packed a key mask (p.kv_bits) and blocks of padding are
// skipped, kListed for block-sparse lists. A kernel of its own each: with both loops in one kernel
// ptxas serialises every wgmma (C7514).
template <class T, KeyWalk kWalk>
__global__ void __launch_bounds__(T::kThreads, 1)
    flash_fwd_hopper_kernel(const __grid_constant__ FlashTmaMaps maps, const __grid_constant__ FlashParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  SmemLayout<T> sm{reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023))};
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    ptx::mbar_init(sm.q_full(), 1);
    ptx::mbar_init(sm.q_empty(), T::kConsumers * 4);  // one arrival per consumer warp
    for (int s = 0; s < T::kStages; ++s) {
      ptx::mbar_init(sm.k_full(s), 1);
      ptx::mbar_init(sm.v_full(s), 1);
      ptx::mbar_init(sm.k_empty(s), T::kConsumers * 4);  // one arrival per consumer warp
      ptx::mbar_init(sm.v_empty(s), T::kConsumers * 4);
    }
    ptx::fence_barrier_init();
    ptx::prefetch_tensor_map(&maps.q);
    ptx::prefetch_tensor_map(&maps.k);
    ptx::prefetch_tensor_map(&maps.v);
  }
  if constexpr (T::kRowSumByMma) {
    const uint32_t one2 = T::kBf16 ? 0x3F803F80u : 0x3C003C00u;  // two ones in bf16 / fp16
    uint4* ones = reinterpret_cast<uint4*>(sm.ones());
    for (int i = threadIdx.x; i < T::kOnesBytes / 16; i += T::kThreads) ones[i] = make_uint4(one2, one2, one2, one2);
    ptx::fence_proxy_async_smem();  // the products read the tile through the async proxy
  }
  cuda::wait_for_prior_kernel();  // a dependent launch (cuda/dependent_launch.cuh): nothing global before
  __syncthreads();
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x == 0) producer_loop<T, kWalk>(maps, p, sm);
  } else {
    ptx::setmaxnreg_inc<T::kConsumerRegs>();
    const int tid = threadIdx.x % 128;
    Consumer<T> consumer{p, maps, sm, warpgroup - 1, tid, tid % 32, tid / 32};
    consumer.init_descriptors();
    consumer.template run<kWalk>();
  }
#else
  __trap();  // built for an architecture without wgmma/TMA: the launcher never selects this
#endif
}

}  // namespace diffattn::flash
