#pragma once
// Plain data handed from SAGE_ATTN's CPU driver (sage_cpu.cc) to the per-instruction-set builds of
// its tile kernel (sage_tile_impl.h): the operands already quantized, as floats, so the kernels
// need nothing from the rest of the library.

#include <cstddef>
#include <cstdint>

namespace diffattn::cpu {

// The most rows an item's buffers hold: block_q rounded up to a micro-kernel's rows (at most 16).
inline constexpr int kSageTileMaxRows = 256;

// What P is rounded to before it multiplies V.
enum class PRounding : std::uint8_t {
  kE4m3,  // E4M3 of p * 448; the row sum adds the rounded values / 448 (SAGE_ATTN's FP8 P*V)
  kBf16,  // bfloat16 of p; the row sum adds p (the accurate mode on bfloat16 inputs)
  kF16,   // float16 of p; the row sum adds p (the accurate mode on float16 inputs)
};

struct SageTileParams {
  // Q as floats, [B, Hq, Sq, D]: INT8 codes (q_scales set) or the 16-bit values (q_scales null).
  const float* q = nullptr;
  const float* q_scales = nullptr;  // [B, Hq, Sq]: one scale per row; nullptr: scores times score_scale
  // K as floats (invalid keys 0) in panels of the kernel's panel_keys keys, transposed:
  // [B, Hkv, ceil(Skv / panel_keys), D, panel_keys], keys past Skv 0, and
  // its scales, one per k_group keys.
  const float* k_panels = nullptr;
  const float* k_scales = nullptr;  // [B, Hkv, ceil(Skv / k_group)]; nullptr with q_scales
  const float* v = nullptr;         // [B, Hkv, Skv, Dv]: decoded E4M3 codes or the 16-bit values
  const std::uint8_t* valid = nullptr;  // [B, Skv]: 1 keeps the key
  std::int64_t heads_q = 0, heads_kv = 0, sq = 0, skv = 0, d = 0, dv = 0;
  int k_group = 64;    // keys per K scale
  int kv_block = 128;  // keys per online-softmax block (and per sparse tile)
  int block_q = 64;    // the most query rows of one item; at most kSageTileMaxRows - 16
  float score_scale = 1.0f;
  bool causal = false;
  PRounding rounding = PRounding::kE4m3;

  // Block-sparse lists of kv_block x kv_block tiles (kernels/sparse/block_sparse_layout.h): the
  // item's query tile visits indices[offsets[r] .. offsets[r + 1]), r = (b * heads_q + h) * q_tiles
  // + q_begin / kv_block; tile_rows (may be null) bounds each key tile's valid rows. nullptr: every
  // key block.
  const std::int32_t* sparse_offsets = nullptr;
  const std::int32_t* sparse_indices = nullptr;
  const std::int32_t* sparse_tile_rows = nullptr;
  std::int64_t sparse_q_tiles = 0;
};

// A block of at most block_q query rows of one (batch, head).
struct SageItem {
  std::int64_t batch = 0, head = 0, q_begin = 0, q_rows = 0;
};

// The item's unnormalised output o [block_q, dv] (in units of the rounded P times V), running
// maxima m and sums l [block_q], for the driver to normalise and store.
struct SageTileKernel {
  const char* isa = "portable";
  int panel_keys = 8;  // keys per K panel (a divisor of kv_block)
  std::size_t (*workspace_floats)(const SageTileParams&) = nullptr;
  void (*run)(const SageTileParams&, const SageItem&, float* workspace, float* o, float* m, float* l) = nullptr;
};

SageTileKernel portable_sage_tile_kernel();
SageTileKernel avx2_sage_tile_kernel();
SageTileKernel avx512_sage_tile_kernel();

}  // namespace diffattn::cpu
