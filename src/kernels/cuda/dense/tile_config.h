#pragma once
// Head-dimension buckets and tile shapes of the tensor-core SDPA kernel, as plain functions so
// that the choices are testable without a GPU. The instantiations in sdpa_instances.h follow
// these tables: change both together.

#include <array>
#include <cstddef>

namespace diffattn::cuda {

// Head dimensions compiled for the tensor-core path; a head dimension is padded up to the
// smallest bucket that holds it (zero-filled on load, padded columns never written).
inline constexpr std::array<int, 7> kCompiledHeadDims = {32, 64, 96, 128, 160, 192, 256};
inline constexpr int kMaxTensorCoreHeadDim = 256;
// Head dimensions up to this run on the SIMT path (any dtype, any strides).
inline constexpr int kMaxGenericHeadDim = 512;

// The smallest compiled bucket >= head_dim, or 0 when none holds it.
constexpr int head_dim_bucket(int head_dim) {
  if (head_dim <= 0) return 0;
  for (int bucket : kCompiledHeadDims) {
    if (head_dim <= bucket) return bucket;
  }
  return 0;
}

struct TileConfig {
  int block_m = 0;  // query rows per thread block: 16 per m-tile, m_tiles per warp
  int m_tiles = 1;  // m16 tiles per warp: two share each K/V fragment load, halving shared-memory reads
  int block_n = 0;  // keys per pipeline stage
  int warps = 0;
  bool q_in_registers = false;  // Q fragments stay in registers across key tiles
};

// Keys per tile shrink as the head grows so that the score and output accumulators fit in the
// 255 registers a thread may hold; two m16 tiles per warp halve the shared-memory reads of K and V
// per FLOP wherever their accumulators fit. Measured on an H200, bf16, S=16384 (bench/results/
// gpu-2026-11-29-sdpa-probe*.log): hd128 279 -> 314 TFLOP/s with two m-tiles and 32 keys; hd64
// 268 -> 302 with two m-tiles and 64 keys; hd256 best with one m-tile and 32 keys (259); 8 warps
// lost to 4 everywhere.
constexpr TileConfig tile_config_for_bucket(int bucket) {
  TileConfig c;
  c.warps = 4;
  c.m_tiles = bucket <= 128 ? 2 : 1;
  c.block_m = 16 * c.warps * c.m_tiles;
  c.block_n = bucket <= 64 ? 64 : 32;
  c.q_in_registers = bucket * c.m_tiles <= 128;
  return c;
}

// Head sizes and list tiles of the block-sparse walk's instantiations (sdpa_block_sparse*.cu).
inline constexpr std::array<int, 2> kListedHeadDims = {64, 128};
inline constexpr std::array<int, 2> kListTiles = {64, 128};

// The block-sparse walk (FLASH_ATTN's block-sparse kernel on Ampere/Ada) runs one CTA per query
// tile of the lists: 128-row tiles take the dense tile of the bucket (4 warps of two m16 tiles),
// 64-row tiles (FASTVIDEO_VSA's cubes) four warps of one m16 tile. Keys per block follow the dense
// rule, so every list tile is a whole number of key blocks. 0 block_m: no such tiling.
constexpr TileConfig block_sparse_tile_config(int bucket, int list_tile) {
  TileConfig c = tile_config_for_bucket(bucket);
  if (list_tile == 128 && c.block_m == 128) return c;
  if (list_tile == 64) {
    c.m_tiles = 1;
    c.block_m = 16 * c.warps;
    c.q_in_registers = bucket <= 128;
    return c;
  }
  return TileConfig{};
}

// Shared-memory row pitch in elements: 16 extra bytes per row put the 8 rows that one ldmatrix
// reads in 8 different bank groups.
constexpr int smem_row_pitch(int bucket) { return bucket + 8; }

// Q tile plus double-buffered K and V tiles.
constexpr std::size_t tile_smem_bytes(const TileConfig& c, int bucket, int elem_bytes) {
  const std::size_t pitch = static_cast<std::size_t>(smem_row_pitch(bucket));
  return (static_cast<std::size_t>(c.block_m) + 4u * static_cast<std::size_t>(c.block_n)) * pitch *
         static_cast<std::size_t>(elem_bytes);
}

constexpr int ceil_div(long long a, int b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace diffattn::cuda
