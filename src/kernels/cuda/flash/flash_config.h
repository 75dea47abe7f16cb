#pragma once
// Tile sizes and launch heuristics of the FLASH_ATTN kernels, as plain functions: the kernels
// instantiate from them and the CPU tests check them without a GPU.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/strings.h"

namespace diffattn::flash {

// The head sizes FLASH_ATTN compiles: the one list that the dispatch ladder (flash_hopper.cu), the
// checks and the backend's capabilities (backends/flash_attn/descriptor.cc) read.
inline constexpr std::array<int, 5> kHeadSizes = {64, 96, 128, 192, 256};

constexpr bool is_supported_head_size(int head_size) {
  return std::find(kHeadSizes.begin(), kHeadSizes.end(), head_size) != kHeadSizes.end();
}

// "64, 96, 128, 192, 256": for messages that reject other head sizes.
inline std::string supported_head_sizes_text() {
  return join(kHeadSizes, ", ", "", [](int d) { return std::to_string(d); });
}

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct HopperTile {
  int block_m;              // query rows per CTA tile (64 per consumer warpgroup)
  int block_n;              // key rows per pipeline stage
  int stages;               // depth of the K/V shared-memory ring
  int consumer_warpgroups;
  bool staged_epilogue = false;  // output through its own shared-memory buffer, 16-byte stores
  bool issue_in_turn = false;    // consumer warpgroups take turns issuing their GEMMs
  bool tma_store = false;        // the staged epilogue stores through TMA (unpacked batches)
  bool overlap = true;           // a consumer overlaps its softmax with its own next products
  bool row_sum_by_mma = false;   // P V also sums P's rows (V plus a constant tile of ones; hd64)
  bool early_exp = false;        // exponentials against the running max, the block max alongside
};

inline constexpr int kHopperSmemLimit = 227 * 1024;  // opt-in dynamic shared memory per block on sm_90

// Above this many keys per row, hd96/hd128 use 176-key tiles (fewer row reductions and barrier
// round trips per key); shorter rows keep 128 so that 512-token cross-attention needs no ragged tile.
inline constexpr std::int64_t kLongKvThreshold = 8192;

constexpr bool is_long_kv(std::int64_t seqlen_k) { return seqlen_k > kLongKvThreshold; }

// The key-tile family of a problem: 128-key tiles with the staged epilogue, 176-key tiles with
// turn-taking (long rows), or, at hd128, 192-key tiles where the keys fill them almost exactly, or
// 128-key tiles on three consumer warpgroups that each run a block's Q K^T, softmax and P V in
// order (kInOrder, below).
enum class KeyTiles { kShort, kLong, kWide, kInOrder };

// 192-key tiles beat both others at hd128 when at most 1.5 % of the last tile is padding, from
// 4096 keys on (H200: Flux, Wan, HunyuanVideo-1.5, 16k squares); a ragged last tile costs more
// than the wider tile saves (docs/backends/flash_attn.md, "The Hopper kernel").
inline constexpr std::int64_t kWideMinKeys = 4096;

constexpr bool fills_wide_tiles(std::int64_t seqlen_k) {
  const std::int64_t padding = ceil_div(seqlen_k, 192) * 192 - seqlen_k;
  return seqlen_k >= kWideMinKeys && 200 * padding <= 3 * seqlen_k;
}

constexpr KeyTiles key_tiles(int head_size, std::int64_t seqlen_k) {
  if (head_size == 128 && fills_wide_tiles(seqlen_k)) return KeyTiles::kWide;
  return is_long_kv(seqlen_k) ? KeyTiles::kLong : KeyTiles::kShort;
}

// Wider key tiles amortise the softmax's row reductions; hd192/hd256 keep narrower tiles so two
// stages of K and V still fit next to the Q tile. hd64 is bound by the exponentials as much as by
// the tensor cores, so it runs three consumer warpgroups (192 query rows) to keep more softmax work
// in flight (SD3 +17 % on an H200). Its row sums come out of the P V product (eight more
// columns, of ones) instead of one add per score, which saves issue slots the softmax is bound
// by (+4-7 %; docs/backends/flash_attn.md, "What was learned").
constexpr HopperTile hopper_base_tile(int head_size, KeyTiles keys) {
  const bool long_kv = keys == KeyTiles::kLong;
  switch (head_size) {
    case 64: return {192, 128, 2, 3, false, false, false, true, /*row_sum_by_mma=*/true};
    case 96: return {128, long_kv ? 176 : 128, 2, 2};
    case 128:
      if (keys == KeyTiles::kInOrder) return {192, 128, 2, 3, false, false, false, /*overlap=*/false};
      return {128, keys == KeyTiles::kWide ? 192 : long_kv ? 176 : 128, 2, 2};
    case 192: return {128, 96, 2, 2};
    case 256: return {128, 80, 2, 2};
    default: return {0, 0, 0, 0};
  }
}

// Shared memory a tile needs: Q plus `stages` K and V buffers (and the O buffer of a staged
// epilogue, Q-sized; the tile of ones of row sums by the P V product, as large as the V stages),
// each padded to 64-column chunks of 128 bytes (the TMA/wgmma swizzle width), the mbarriers, and
// 1024 bytes of alignment slack.
constexpr int hopper_smem_bytes(const HopperTile& tile, int head_size, int elem_bytes = 2) {
  const int chunk_cols = 128 / elem_bytes;
  const int padded = (head_size + chunk_cols - 1) / chunk_cols * chunk_cols;
  const int q = tile.block_m * padded * elem_bytes;
  const int kv = 2 * tile.stages * tile.block_n * padded * elem_bytes;
  const int o = tile.staged_epilogue ? q : 0;
  const int ones = tile.row_sum_by_mma ? kv / 2 : 0;
  const int barriers = (2 + 4 * tile.stages) * 8;
  return q + kv + o + ones + barriers + 1024;
}

// The staged epilogue wherever its buffer fits: 16-byte coalesced stores beat 4-byte stores from
// the accumulators on short rows (H200: Flux 577 vs 567, 512-token cross 467 vs 450, SD3 hd64 392
// vs 370 TFLOP/s); 176-key hd128 tiles and hd192/hd256 have no room and store from registers.
//
// Consumers take turns issuing their GEMMs on the 176-key tiles of long rows, so one group's
// softmax overlaps the other's products: +0.4 to +4 % on long rows (H200); on 128-key tiles and
// at hd64/hd256 it made no difference or lost up to 1.4 %.
//
// A staged output block leaves through TMA stores, issued by one thread while the warpgroup goes
// on to its next tile: cross-attention with 512 keys +7 %, 4k squares +3 %, Flux +2 %, SD3 hd64
// +1.5 %, long rows unchanged (H200, against the 16-byte-store epilogue).
//
// Early exponentials (taken against the running maximum while the block's maximum is found, the
// rare block whose maximum grew fixing them up) on the two-group 128-key hd128 tiles: 4k square
// +2.5 %, 512-key cross-attention with 4608 rows +4 % (H200). Where
// three groups share the registers the extra live values spill (in-order hd128 5-6 % slower, hd64
// 2-5 % slower on squares), and 192-key tiles spill too (not timed).
constexpr HopperTile hopper_tile(int head_size, KeyTiles keys) {
  HopperTile tile = hopper_base_tile(head_size, keys);
  tile.issue_in_turn = tile.consumer_warpgroups == 2 && tile.block_n == 176;
  tile.early_exp = head_size == 128 && tile.consumer_warpgroups == 2 && tile.block_n == 128;
  HopperTile staged = tile;
  staged.staged_epilogue = true;
  staged.tma_store = true;
  if (tile.block_m > 0 && hopper_smem_bytes(staged, head_size) <= kHopperSmemLimit) return staged;
  return tile;
}

// Block-sparse attention (a key-tile list per query tile) runs a 128 x 128 tile at every head size
// it compiles: the lists' tiles are the kernel's, kBlockM query rows by kBlockN keys. hd128 takes its
// short-row tile (a tile visits only its listed blocks, so the wide and in-order families' gains on
// long rows do not apply); hd64 takes two consumer groups instead of its dense tile's three, so that
// both head sizes share one 128 x 128 tiling and a caller's lists do not depend on the head size.
inline constexpr std::array<int, 2> kBlockSparseHeadSizes = {64, 128};

constexpr bool is_block_sparse_head_size(int head_size) {
  return std::find(kBlockSparseHeadSizes.begin(), kBlockSparseHeadSizes.end(), head_size) !=
         kBlockSparseHeadSizes.end();
}

inline std::string block_sparse_head_sizes_text() {
  return join(kBlockSparseHeadSizes, ", ", "", [](int d) { return std::to_string(d); });
}

inline constexpr int kBlockSparseTile = 128;

constexpr HopperTile block_sparse_tile(int head_size) {
  if (!is_block_sparse_head_size(head_size)) return HopperTile{0, 0, 0, 0};
  if (head_size == 128) return hopper_tile(head_size, KeyTiles::kShort);
  HopperTile tile{kBlockSparseTile, kBlockSparseTile, 2, 2};
  tile.staged_epilogue = true;
  tile.tma_store = true;
  tile.row_sum_by_mma = true;
  return tile;
}

// The small tiling: 64-row query tiles and 64-key tiles, the video backends' cubes and patches,
// run by the one-warpgroup walk below, not by the flash kernel's tiles.
inline constexpr int kBlockSparseSmallTile = 64;

// The one-warpgroup walk of block-sparse lists (listed_walk_hopper.cuh): 64 query rows per CTA
// walking their tile's list, the depths of its K and V rings, and the CTAs it asks to keep
// resident per SM. The SM's CTAs hide each other's softmax and loads, so residency beats ring
// depth. It runs every 64 x 64 list, and the 128 x 128 lists at hd64; the flash kernel's tiles
// run hd128's 128 x 128 lists (93-97 % of dense FLASH_ATTN's TFLOP/s there) and dense masks.
// Measured on an H200 (docs/backends/sparse.md; bench/results/small-tile-2026-12-04-h200/):
//  - 64 x 64: three CTAs at hd128 and four at hd64, against two with double K and V rings (hd128
//    21-27 % slower) or four hd128 CTAs, which leave 128 registers a thread, too few (ptxas spills
//    and serialises the wgmma). Within a CTA block n - 1's P V runs under block n's softmax; the
//    rings that serve that order best: hd128 one K and two V buffers (2-3 % faster than one of
//    each, 4-10 % faster than two K and one V), hd64 two K and one V (3-5 % faster than one of
//    each and than one K and two V). Against the flash kernel's two-group walk these lists ran on
//    before: 0.78-0.84 of dense FLASH_ATTN's TFLOP/s at hd128 against 0.50-0.57.
//  - 128 x 128 at hd64: three CTAs, one K and two V buffers, 13-19 % faster than the flash
//    kernel's two-group 128 x 128 tile (0.79-0.96 of dense on the 16k square and SD3's shape
//    against 0.69-0.82; two K and one V, or one of each, 3-6 % slower on the 16k square).
//  - 64 x 64, Q K^T's A operand from registers for Q's first 64 columns (hd128; all of Q at
//    hd64), against all of Q from shared memory in one job (bench/results/vsa-qregs-2026-12-06-h200/):
//    the walk on random lists at 720p 2.6 % faster at density 0.125 and level at 1, the 16k hd64
//    square 2 % faster at density 1 and level at 0.125; FASTVIDEO_VSA end to end 1.7 % (720p) and
//    4.5 % (480p) faster. All of Q in registers at hd128 leaves ptxas too few registers at three
//    CTAs (it spills and serialises the wgmma). DIFFATTN_WALK_Q_REGISTER_CHUNKS=0 builds the
//    walk without it, for such A/B runs.
struct ListWalk {
  int k_bufs = 0, v_bufs = 0, ctas_per_sm = 0;
  int block_n = 0;  // the lists' tiles: block_n query rows by block_n keys
  // Q K^T takes this many 64-column chunks of Q from registers (loaded once from the CTA's Q
  // tile), the rest from shared memory for every key block.
  int q_register_chunks = 0;
};

#ifndef DIFFATTN_WALK_Q_REGISTER_CHUNKS
#define DIFFATTN_WALK_Q_REGISTER_CHUNKS 1
#endif
inline constexpr int kWalkQRegisterChunks = DIFFATTN_WALK_Q_REGISTER_CHUNKS;

// The walk for lists of `tile` x `tile` at `head_size`, or ctas_per_sm == 0 where the flash
// kernel's tiles run them.
constexpr ListWalk list_walk(int head_size, int tile) {
  if (!is_block_sparse_head_size(head_size)) return {};
  if (tile == kBlockSparseSmallTile)
    return head_size == 128 ? ListWalk{1, 2, 3, tile, std::min(kWalkQRegisterChunks, 2)}
                            : ListWalk{2, 1, 4, tile, std::min(kWalkQRegisterChunks, 1)};
  if (tile == kBlockSparseTile && head_size == 64) return ListWalk{1, 2, 3, tile};
  return {};
}

inline constexpr int kHopperSmemPerSm = 228 * 1024;  // shared memory of one sm_90 SM, all its CTAs together
inline constexpr int kSmemReservedPerCta = 1024;     // of which the system keeps this much per resident CTA

// Shared memory of one CTA of the walk: the 64-row Q tile and the K and V rings (block_n rows each),
// in 64-column chunks of 128-byte rows, their mbarriers, and 1024 bytes of alignment slack.
constexpr int list_walk_smem_bytes(int head_size, const ListWalk& walk) {
  const int chunks = (head_size + 63) / 64;
  const int buffers = 1 + walk.k_bufs + walk.v_bufs;
  return chunks * 64 * 128 + (walk.k_bufs + walk.v_bufs) * chunks * walk.block_n * 128 + buffers * 8 + 1024;
}

constexpr std::int64_t num_m_blocks(std::int64_t seqlen_q, const HopperTile& tile) {
  return ceil_div(seqlen_q, tile.block_m);
}

constexpr std::int64_t num_tiles(std::int64_t batch, std::int64_t heads_q, std::int64_t m_blocks) {
  return batch * heads_q * m_blocks;
}

// At hd128 three consumer warpgroups (192 query rows) that run each key block's products and
// softmax in order, the other two groups keeping the tensor cores busy meanwhile, beat two
// groups that overlap their own softmax with their next products (H200, timed interleaved):
// from 8192 query rows they win or tie on every shape measured (long video rows +3-5 %, 512-key
// cross-attention +7 %). On shorter rows they win where the keys are long and the 192-row tiles
// fill at least three waves of the SMs (Flux +3-4 %, Flux with a padded prompt +16 %); with fewer
// tiles or short keys the 128-row tiles tie or win. Causal calls, whose tiles differ in length and
// are not split, win from 16k rows (+19 %) but lose below (4k with 24 heads -23 %), so they take
// the in-order groups from 16384 rows only. The rule is measured, not modelled
// (docs/backends/flash_attn.md, "Choices that are measured, not modelled").
inline constexpr std::int64_t kInOrderMinRows = 8192;
inline constexpr std::int64_t kInOrderCausalMinRows = 16384;
inline constexpr std::int64_t kInOrderShortMinRows = 3072;
inline constexpr std::int64_t kInOrderShortMinKeys = 2048;
inline constexpr std::int64_t kInOrderShortMinWaves = 3;

// `batch_heads` is batch x query heads (packed batches: the sequence count, with the longest
// sequence as seqlen_q).
constexpr bool prefers_in_order(int head_size, std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t batch_heads,
                                int sm_count, bool causal) {
  if (head_size != 128) return false;
  if (causal) return seqlen_q >= kInOrderCausalMinRows;
  if (seqlen_q >= kInOrderMinRows) return true;
  const std::int64_t tiles = batch_heads * num_m_blocks(seqlen_q, hopper_tile(head_size, KeyTiles::kInOrder));
  return seqlen_q >= kInOrderShortMinRows && seqlen_k >= kInOrderShortMinKeys &&
         tiles >= kInOrderShortMinWaves * sm_count;
}

// The family a launch uses: the in-order groups where they win, else the key-count families.
constexpr KeyTiles choose_key_tiles(int head_size, std::int64_t seqlen_q, std::int64_t seqlen_k,
                                    std::int64_t batch_heads, int sm_count, bool causal) {
  if (prefers_in_order(head_size, seqlen_q, seqlen_k, batch_heads, sm_count, causal)) return KeyTiles::kInOrder;
  return key_tiles(head_size, seqlen_k);
}

// A dense keep-mask runs the listed walk (dense_mask.cu builds the lists for this tile): at hd128
// the in-order three-group tile (192 query rows) where an unmasked call of the shape would take it
// and every head shares the mask, else block_sparse_tile's 128 x 128. A 192-row tile keeps a key
// block when any of its rows keeps a key of it. On a mask shared by the heads (prompt padding,
// token-level patterns) that costs little and the three groups win as they do unmasked: FLUX.1's
// prompt padding as a [1, 1, Sq, Skv] mask 0.402 -> 0.387 ms, 1.15x -> 1.11x the unmasked call on
// the real keys (H100). A per-head mask is more likely a pattern of its own per head, and on one
// that follows 128-row blocks (FLUX.1, half the blocks of each head emptied at random) the
// 192-row tiles walk a third more blocks: 0.496 -> 0.662 ms. `in_order` -1 is this rule, 0 and 1
// force either tile (A/B runs and tests).
constexpr HopperTile dense_mask_tile(int head_size, std::int64_t seqlen_q, std::int64_t seqlen_k,
                                     std::int64_t batch_heads, int sm_count, bool mask_per_head, int in_order = -1) {
  const bool rule = !mask_per_head && prefers_in_order(head_size, seqlen_q, seqlen_k, batch_heads, sm_count,
                                                       /*causal=*/false);
  const bool take = head_size == 128 && (in_order < 0 ? rule : in_order == 1);
  return take ? hopper_tile(head_size, KeyTiles::kInOrder) : block_sparse_tile(head_size);
}

// A non-causal key mask runs the compact walk (flash_fwd_hopper.cuh, KeyWalk::kCompact), which
// holds each batch's count of kept keys across the products: on the 192-key hd128 tile that made
// ptxas spill 36 bytes (at its 168 registers, where the unmasked kernel uses all 168), so a
// key-masked call takes the 176-key tile instead. Causal key masks keep the live-bits walk.
constexpr bool compact_walk_fits(int head_size, int block_n) { return !(head_size == 128 && block_n == 192); }

constexpr KeyTiles key_masked_tiles(int head_size, KeyTiles keys, bool key_masked, bool causal) {
  return key_masked && !causal && !compact_walk_fits(head_size, hopper_tile(head_size, keys).block_n) ? KeyTiles::kLong
                                                                                                       : keys;
}

// One persistent CTA per SM, never more CTAs than tiles.
constexpr int persistent_grid(std::int64_t tiles, int sm_count) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(tiles, sm_count)));
}

// Wave quantisation: a persistent grid runs `tiles` equal tiles in ceil(tiles / sm_count) waves, so
// a last wave of `tail` tiles leaves the other SMs idle (Flux's 864 tiles on 132 SMs: 6.5 waves
// cost 7). Instead the tail tiles' key blocks are laid end to end as one stream, cut into
// `segments` equal runs, one per CTA: a run covers the end of one tile and the start of the next
// (or more, when runs are longer than tiles), each such piece writes its unnormalised partial
// output, and the last piece of a tile to finish merges them. The plan compares the tail's time
// in key blocks: a whole tile costs its blocks plus about one block of prologue and epilogue; a
// run its blocks plus about two blocks per piece (prologue, partial write, merge) and a quarter
// block per extra partial a merge may read. Runs are at least two blocks long and a tile is cut
// into at most about kMaxTailSplits pieces, which bounds the partial buffers.
struct TailSplit {
  std::int64_t split_begin;  // tiles before this index run whole; the tail's key blocks form the stream
  std::int64_t stream_blocks = 0;  // tail tiles times key blocks per tile
  int segments = 0;          // runs the stream is cut into (0: no split)
  int segment_items = 0;     // work items per run: the most tiles a run can touch
  int max_pieces = 1;        // the most pieces a tail tile is cut into (stride of the partials)
  std::int64_t items = 0;    // work items: whole tiles, then segment_items per run
};

inline constexpr int kMaxTailSplits = 16;

// The run that holds stream block b: the last run whose first block is at most b (run i starts
// at floor(i * blocks / segments)). The plan keeps (blocks + 1) * segments below 2^31, so the
// kernel does this in 32-bit integers.
template <class I>
constexpr I tail_run_of(I blocks, I segments, I b) {
  return ((b + 1) * segments + blocks - 1) / blocks - 1;
}

// Piece `k` of run `run`: the k-th tail tile the run touches (tile < 0: the run touches fewer),
// its key blocks [n_begin, n_end), and which of the tile's `pieces` pieces it is.
struct TailPiece {
  int tile;
  int n_begin, n_end;
  int piece, pieces;
};

template <class I>
constexpr TailPiece tail_piece(I blocks, I segments, I n_blocks, I run, I k) {
  const I s0 = run * blocks / segments, s1 = (run + 1) * blocks / segments;
  const I tile = s0 / n_blocks + k;
  if (tile * n_blocks >= s1) return {-1, 0, 0, 0, 0};
  const I first = tail_run_of(blocks, segments, tile * n_blocks);
  const I last = tail_run_of(blocks, segments, (tile + 1) * n_blocks - 1);
  return {static_cast<int>(tile), static_cast<int>(std::max<I>(s0 - tile * n_blocks, 0)),
          static_cast<int>(std::min<I>(s1 - tile * n_blocks, n_blocks)), static_cast<int>(run - first),
          static_cast<int>(last - first + 1)};
}

// The plan for `segments` runs over a tail of `tail` tiles: the most tiles a run touches, the
// most pieces of a tile, and the cost of the longest run in quarter key blocks.
constexpr TailSplit tail_runs(std::int64_t tiles, std::int64_t tail, std::int64_t n_blocks, std::int64_t segments,
                              std::int64_t* cost) {
  const std::int64_t blocks = tail * n_blocks;
  TailSplit plan{tiles - tail, blocks, static_cast<int>(segments), 0, 1};
  for (std::int64_t run = 0; run < segments; ++run) {
    const std::int64_t s0 = run * blocks / segments, s1 = (run + 1) * blocks / segments;
    plan.segment_items = std::max<int>(plan.segment_items, static_cast<int>((s1 - 1) / n_blocks - s0 / n_blocks + 1));
  }
  for (std::int64_t tile = 0; tile < tail; ++tile) {
    const std::int64_t pieces = tail_run_of(blocks, segments, (tile + 1) * n_blocks - 1) -
                                tail_run_of(blocks, segments, tile * n_blocks) + 1;
    plan.max_pieces = std::max<int>(plan.max_pieces, static_cast<int>(pieces));
  }
  plan.items = plan.split_begin + segments * plan.segment_items;
  *cost = 4 * ceil_div(blocks, segments) + 8 * plan.segment_items + (plan.max_pieces - 1);
  return plan;
}

// Candidates: every even cut of each tail tile into s pieces that fits one wave (one piece per
// CTA; no run crosses a tile, so the cost has a closed form), and one run per CTA over the whole
// stream; the cheapest wins if it beats whole tiles. Host work stays small: one pass over the runs
// and tiles at most.
constexpr TailSplit plan_tail_split(std::int64_t tiles, int sm_count, std::int64_t n_blocks) {
  TailSplit none{tiles};
  none.items = tiles;
  if (tiles <= 0 || sm_count <= 0 || n_blocks < 4) return none;
  const std::int64_t tail = tiles % sm_count;
  if (tail == 0) return none;
  const std::int64_t blocks = tail * n_blocks;
  const std::int64_t min_run = std::max<std::int64_t>(2, ceil_div(n_blocks, kMaxTailSplits));
  const std::int64_t most = std::min<std::int64_t>(sm_count, blocks / min_run);
  if (most <= tail || (blocks + 1) * most >= (std::int64_t{1} << 31)) return none;
  TailSplit best = none;
  std::int64_t best_cost = 4 * (n_blocks + 1);  // a whole tile: its blocks plus one of prologue and epilogue
  for (std::int64_t s = 2; s * tail <= most; ++s) {
    const std::int64_t cost = 4 * ceil_div(n_blocks, s) + 8 + (s - 1);
    if (cost < best_cost) {
      best_cost = cost;
      best = TailSplit{tiles - tail, blocks, static_cast<int>(s * tail), 1, static_cast<int>(s)};
      best.items = best.split_begin + s * tail;
    }
  }
  if (most % tail != 0) {
    std::int64_t cost = 0;
    const TailSplit plan = tail_runs(tiles, tail, n_blocks, most, &cost);
    if (cost < best_cost) best = plan;
  }
  return best;
}

// The 4-D TMA maps address rows with 32-bit coordinates and at most 2^31 - 1 elements per dim.
constexpr bool fits_tma_coordinates(std::int64_t rows) { return rows > 0 && rows < (std::int64_t{1} << 31); }

}  // namespace diffattn::flash
