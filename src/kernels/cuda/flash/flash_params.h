#pragma once
// What the flash kernels read besides their TMA descriptors: sizes, the output and LSE views,
// the optional key-padding mask and packed variable-length offsets. Plain data, host and device.

#include <cstdint>

namespace diffattn::flash {

struct FlashParams {
  void* out = nullptr;                // [B, Sq, Hq, Dv], last dim contiguous, 4-byte aligned rows
  std::int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;  // elements
  bool out_vec16 = false;             // every row starts on 16 bytes: the staged epilogue stores 16 B
  bool out_tma = false;               // the staged epilogue stores through the output's TMA map

  float* lse = nullptr;               // optional [B, Hq, Sq] natural log
  std::int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;

  const std::uint8_t* kv_mask = nullptr;  // optional bool keep-mask [B, Skv]
  std::int64_t mask_stride_b = 0, mask_stride_s = 0;
  // kv_mask packed to bits by the launcher ([B, kv_bits_words], bit j of word w: key 32 w + j,
  // zero past Skv), so the kernel tests a key with one shift and skips blocks of padding; null
  // when the launcher could not take the workspace (the kernel then reads kv_mask itself).
  const std::uint32_t* kv_bits = nullptr;
  int kv_bits_words = 0;
  // Set with kv_bits, always: each batch's key walk, entries of two ints from
  // kv_walk[2 * (b * kv_walk_stride)] (kernels/sparse/key_walk.h): an entry's first key, and its
  // length (at most kBlockN) | 1 << 16 when the mask's bits decide its keys; {0, 0} after the last
  // entry, up to the stride (the key blocks of the tiling). Either the kept runs cut into blocks (no
  // bits), or the key blocks of the launch's tiling that keep a key (bits where they also drop
  // one), whichever has fewer entries; causal launches take the blocks.
  const std::int32_t* kv_walk = nullptr;
  int kv_walk_stride = 0;
  // Instead of kv_mask, kv_bits and kv_walk, in non-causal key-masked launches (the compact walk):
  // each batch's kept keys in the order of kernels/sparse/compact_keys.h, kv_count[b] of them, so
  // the kernel runs them as an unmasked call of that many keys. Position n's key block starts at key
  // row kv_block_rows[b * kv_block_rows_stride + n] of K and V when >= 0, else at row -1 - that of
  // the batch's gathered copy (FlashTmaMaps::kg / vg).
  const std::int32_t* kv_count = nullptr;
  const std::int32_t* kv_block_rows = nullptr;
  int kv_block_rows_stride = 0;

  // Optional block-sparse key lists on the device (kernels/sparse/block_sparse_layout.h, CSR):
  // query tile m of (b, h) visits the key blocks bs_indices[bs_offsets[r] .. bs_offsets[r + 1]),
  // r = (b * heads_q + h) * num_m_blocks + m, strictly ascending. The layout's tiles are the
  // kernel's (kBlockM query rows, kBlockN keys); causal, packed and key-masked launches are refused
  // with lists. A split tail tile's pieces take equal shares of its list's positions. A tile with an
  // empty list writes zeros and LSE -inf.
  // With per-group lists (64-row query tiles, one per consumer warpgroup) r counts those tiles:
  // r = (b * heads_q + h) * bs_q_tiles + t. bs_tile_rows (optional, Sq = Skv): the valid leading
  // rows of each tile; keys past them are never attended.
  const int* bs_offsets = nullptr;
  const int* bs_indices = nullptr;
  const int* bs_tile_rows = nullptr;
  int bs_q_tiles = 0;  // query tiles per (b, h) of the lists; set by the launcher
  // Optional, 64 x 64 lists with tile rows on the one-warpgroup walk: the lists segmented
  // (kernels/sparse/segmented_key_blocks.h, four words a block). CTA x of (b, h) takes query block
  // bs_query_blocks[4 x ..] and walks the bs_block_counts[i] key blocks from bs_blocks[4 *
  // bs_block_first[i] ..], i = (b * heads_q + h) * bs_query_ctas + x, instead of bs_indices.
  // The packed CTAs (those from bs_query_wholes on) walk the union of up to four lists: they run
  // first in each (b, h), so that no long CTA is left for the grid's last wave.
  const std::int32_t* bs_query_blocks = nullptr;
  int bs_query_ctas = 0, bs_query_wholes = 0;
  const std::int32_t* bs_block_first = nullptr;
  const std::int32_t* bs_block_counts = nullptr;
  const std::int32_t* bs_blocks = nullptr;
  // Lists shared across batches or heads (a broadcast dense mask): the list of tile m of (b, h) is
  // r = b * bs_stride_b + h * bs_stride_h + m. Negative: the launcher sets heads_q * bs_q_tiles and
  // bs_q_tiles (one list per (b, h)).
  int bs_stride_b = -1, bs_stride_h = -1;
  // Dense keep-masks on the listed walk (one list per tile over its blocks that keep a key):
  // bs_partial[e] is nonzero when list entry e's block also drops a key, so the kernel reads
  // row_bits there; blocks that keep every key are not masked. Bit j of word w of query row i of
  // (b, h) keeps key 32 w + j: row_bits[b * row_bits_stride_b + h * row_bits_stride_h + i *
  // row_bits_words + w], strides in words (0 for a broadcast dimension), zero past Skv up to whole
  // key blocks. Not with per-group lists.
  const std::uint8_t* bs_partial = nullptr;
  const std::uint32_t* row_bits = nullptr;
  std::int64_t row_bits_stride_b = 0, row_bits_stride_h = 0;
  int row_bits_words = 0;

  const int* cu_seqlens_q = nullptr;  // optional packed batches: [B + 1] offsets
  const int* cu_seqlens_k = nullptr;
  // Packed batches of more than one sequence: the tile of the batch x heads x num_m_blocks grid that
  // each slot (work item) takes, or -1, in the order of packed_order.h (written by the launcher).
  // Null: slot i takes tile i.
  const int* packed_tiles = nullptr;

  int batch = 0, heads_q = 0, heads_kv = 0;
  int seqlen_q = 0, seqlen_k = 0;     // per batch, or the maxima when packed
  int head_size = 0;
  float scale_log2 = 0.f;             // softmax scale times log2(e): scores go through exp2
  bool causal = false;

  int num_m_blocks = 0;
  int num_tiles = 0;                  // num_m_blocks * batch * heads_q

  // Tail split (flash_config.h, plan_tail_split): the key blocks of the tiles from split_begin on
  // form one stream of split_blocks blocks cut into split_segments runs; work item split_begin +
  // k * split_segments + r is the k-th tile piece of run r. num_items counts whole tiles plus
  // those items. A piece publishes its partial output and row state in split_partials (room for
  // split_max_pieces per tile) and counts itself in split_arrivals (zeroed before the launch); the
  // last piece of a warp's rows merges them.
  int split_begin = 0;
  int split_segments = 0;  // 0: every tile runs whole
  int split_max_pieces = 1;
  int split_blocks = 0;  // the plan keeps (split_blocks + 1) * split_segments below 2^31
  int num_items = 0;
  float* split_partials = nullptr;
  int* split_arrivals = nullptr;
};

}  // namespace diffattn::flash
