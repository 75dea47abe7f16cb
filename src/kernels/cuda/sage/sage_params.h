#pragma once
// What SAGE_ATTN's CUDA kernels read: the caller's views, the quantized copies the quantization
// kernels write into the launch workspace, and their scales. Plain data, host and device.

#include <cstdint>

namespace diffattn::sage {

struct SageParams {
  // The caller's tensors ([B, S, H, D], head dimension contiguous; strides in elements).
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  std::int64_t q_stride_b = 0, q_stride_s = 0, q_stride_h = 0;
  std::int64_t k_stride_b = 0, k_stride_s = 0, k_stride_h = 0;
  std::int64_t v_stride_b = 0, v_stride_s = 0, v_stride_h = 0;
  void* out = nullptr;
  std::int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;
  float* lse = nullptr;  // optional [B, Hq, Sq], natural log
  std::int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;
  const std::uint8_t* kv_mask = nullptr;  // optional bool keep-mask [B, Skv]
  std::int64_t mask_stride_b = 0, mask_stride_s = 0;

  // Whether q, k, v allow 8-byte loads of four elements (base 8-byte aligned, strides multiples of 4).
  bool vec_q = false, vec_k = false, vec_v = false;

  int batch = 0, heads_q = 0, heads_kv = 0;
  int seqlen_q = 0, seqlen_k = 0;
  int head_size = 0;
  float scale_log2 = 0.f;  // softmax scale times log2(e), folded into Q before quantization
  bool causal = false;
  bool bf16 = true;

  // The attention kernel quantizes Q itself (sage_fwd_hopper.cuh, kFusedQ): no Q pass, and q_int8
  // and q_scale are not allocated. q is then 16-byte aligned with strides of whole 8 elements.
  bool fused_q = false;

  // The workspace (see run_sage_attn.cu for its layout).
  std::int8_t* q_int8 = nullptr;  // [B, Hq, Sq, D]
  float* q_scale = nullptr;       // [B, Hq, q_groups]
  float* q_shift = nullptr;       // [B, Hq, Sq]: q' . mean(K) per row, added back into the LSE
  std::int8_t* k_int8 = nullptr;  // [B, Hkv, Skv, D], smoothed
  float* k_scale = nullptr;       // [B, Hkv, k_groups]
  std::uint8_t* v_e4m3 = nullptr; // [B, Hkv, D, kv_padded]: V transposed, keys permuted within 32 (see sage_quant.cu)
  float* v_scale = nullptr;       // [B, Hkv, D]: amax / 448
  float* k_sum_parts = nullptr;   // [B, Hkv, stat_chunks, D]: sums of valid keys per chunk
  float* v_amax_parts = nullptr;  // [B, Hkv, stat_chunks, D]
  int* valid_parts = nullptr;     // [B, stat_chunks]: valid keys per chunk
  float* k_mean = nullptr;        // [B, Hkv, D]: K's channel means over the valid keys
  float* v_amax = nullptr;        // [B, Hkv, D]: V's channel maxima over the valid keys
  int q_groups = 0, k_groups = 0, kv_padded = 0, stat_chunks = 0;

  // The attention kernel's tiles, and its work items (sage_config.h, sage_tail_split): the whole
  // tiles [0, split_begin), then split_pieces pieces of each later tile, whose partial outputs go to
  // split_o ([item - split_begin][row of the tile][D], scaled by V's scales, not yet divided by the
  // row sum) and split_ml ((running max, row sum) per row) for sage_merge_kernel. split_begin ==
  // num_tiles: none.
  int num_m_blocks = 0, num_tiles = 0;
  int num_items = 0, split_begin = 0, split_pieces = 1;
  float* split_o = nullptr;
  float* split_ml = nullptr;

  // Block-sparse key lists of the listed kernels (kernels/sparse/block_sparse_layout.h, CSR over
  // (batch, query head, query tile) of kBlockM = kKvBlock rows): the key blocks of row r are
  // bs_indices[bs_offsets[r] .. bs_offsets[r + 1]); bs_tile_rows, when set, each tile's valid rows.
  const std::int32_t* bs_offsets = nullptr;
  const std::int32_t* bs_indices = nullptr;
  const std::int32_t* bs_tile_rows = nullptr;

  // The key walk, last so that the fields before keep their offsets in the kernels' parameter
  // block (moving them perturbed ptxas's register allocation in kernels that never read these).
  // With kv_mask, in the Hopper kernel's non-causal, unlisted launches (run_sage_attn.cu): each
  // batch's key blocks that keep a key, in order, kv_walk_count[b] of them, as entries of two ints
  // from kv_walk[2 * b * kv_walk_stride] (kernels/sparse/key_walk.h's aligned walk of kKvBlock-key
  // blocks): the block's first key, and its length with bit 16 set where the block also drops a
  // key (only those blocks read the mask). The blocks the walk leaves out would add nothing: every
  // score of theirs is -inf, so the result has the same bits as a walk over every block.
  const std::int32_t* kv_walk = nullptr;
  const int* kv_walk_count = nullptr;
  int kv_walk_stride = 0;
  // The mask's bits, which the walk's builder packs on the way ([B, kv_walk_words], bit j of word w:
  // key 32 w + j; zero past Skv): the blocks that drop a key read them.
  std::uint32_t* kv_walk_bits = nullptr;
  int kv_walk_words = 0;

  // K and V quantized inside the attention kernel (sage_config.h's sage_kv_in_kernel says when):
  // the K/V pass quantizes the (batch, kv head) pairs [0, kv_from) before the kernel, and the
  // attention kernel's producer warps 1-3 quantize the rest, an item each (a K group of kKGroup
  // keys, then a V block of kKvBlock keys: kv_head_items per pair, the first kv_k_items of them K
  // groups), in pair order, taken from the counter kv_next. kv_ready[pair] counts the pair's
  // finished items; the TMA thread waits for all of them before it loads the first tile of the
  // pair. v_inv holds 448 / V's channel maxima (the means kernel's), which the V items multiply by.
  // kv_ready null: every pair by the K/V pass.
  int* kv_ready = nullptr;
  int* kv_next = nullptr;
  float* v_inv = nullptr;  // [B, Hkv, D]
  int kv_from = 0, kv_head_items = 0, kv_k_items = 0;
};

// What messages call the kernels' two uses (kernel parameters carry no names).
inline constexpr char kSageName[] = "SAGE_ATTN";
inline constexpr char kQk16V8Name[] = "FLASHINFER_ATTN's QK16/V8 mode";

// Keys per chunk of the statistics pass (K's channel sums and V's channel maxima).
inline constexpr int kStatChunk = 128;

}  // namespace diffattn::sage
