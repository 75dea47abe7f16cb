// Dense keep-masks for the listed walk of the Hopper flash kernel (dense_mask.h): a memset of the
// marks, then three launches on the call's stream. (1) Each query tile's rows, split over as many
// CTAs as keep the GPU busy, become words of bits (16-byte loads where the rows allow, else one warp
// per word), and each CTA marks the key blocks its rows keep a key of and drop a key of: bits in
// shared memory, then OR-ed into the tile's marks in global memory. (2) One CTA turns the marks
// into the lists' offsets (a count per tile, a block scan). (3) One warp per tile writes its list.
// The mask's bytes are read once; nothing walks a tile's blocks one load after another.

#include "kernels/cuda/flash/dense_mask.h"

#include <cuda_runtime.h>

#include <algorithm>

#include <cub/block/block_scan.cuh>

#include "kernels/cuda/flash/flash_hopper_launch.cuh"
#include "kernels/cuda/workspace_pool.h"

namespace diffattn::flash {
namespace {

constexpr int kThreads = 256;
constexpr int kListThreads = 1024;

// The bits of word w that stand for keys below Skv.
__device__ __forceinline__ std::uint32_t valid_bits(int w, int seqlen_k) {
  const int key0 = w * 32;
  if (key0 + 32 <= seqlen_k) return 0xffffffffu;
  if (key0 >= seqlen_k) return 0u;
  return (1u << (seqlen_k - key0)) - 1u;
}

// Bit k of the nibble: byte k of x is nonzero.
__device__ __forceinline__ std::uint32_t nonzero_nibble(std::uint32_t x) {
  const std::uint32_t m = __vcmpne4(x, 0u) & 0x01010101u;  // bit 8k: byte k is nonzero
  return (m | m >> 7 | m >> 14 | m >> 21) & 0xfu;
}

// Marks of one tile, n_words = ceil(k_blocks / 32) words each: `keeps` (a row of the tile keeps a
// key of the block) then `drops` (a row drops a key below Skv of it).
struct TileMarks {
  std::uint32_t* marks;  // shared: [keeps | drops]
  int n_words;
  __device__ __forceinline__ void mark(int nb, std::uint32_t v, std::uint32_t valid) const {
    const std::uint32_t bit = 1u << (nb & 31);
    volatile const std::uint32_t* seen = marks;  // set bits stay set: an old read costs an atomic, no more
    if (v != 0 && (seen[nb >> 5] & bit) == 0) atomicOr(&marks[nb >> 5], bit);
    if (v != valid && (seen[n_words + (nb >> 5)] & bit) == 0) atomicOr(&marks[n_words + (nb >> 5)], bit);
  }
};

// grid (tiles, splits): CTA (tile, s) packs rows [row0 + s * split_rows, + split_rows) of query tile
// `tile` (= (b * heads + h) * q_tiles + t) into `bits` (words per row) and ORs its marks into
// global_marks[tile * 2 * n_words ...] (zeroed before). kVec: rows start on 16 bytes with contiguous
// keys, a word a lane (a word that runs past Skv reads bytes one at a time); else one warp per word,
// a key per lane.
template <bool kVec>
__global__ void __launch_bounds__(kThreads) pack_and_mark_kernel(DenseMaskView m, int words, int q_tile, int k_tile,
                                                                 int q_tiles, int split_rows, std::uint32_t* bits,
                                                                 std::uint32_t* global_marks) {
  extern __shared__ std::uint32_t shared_marks[];
  const int k_blocks = words * 32 / k_tile, n_words = (k_blocks + 31) / 32;
  for (int i = threadIdx.x; i < 2 * n_words; i += kThreads) shared_marks[i] = 0;
  __syncthreads();
  const TileMarks marks{shared_marks, n_words};
  const std::int64_t tile = blockIdx.x;
  const int t = static_cast<int>(tile % q_tiles);
  const std::int64_t bh = tile / q_tiles, h = bh % m.heads, b = bh / m.heads;
  const int row0 = t * q_tile + static_cast<int>(blockIdx.y) * split_rows;
  const int rows = max(0, min(min(m.seqlen_q, (t + 1) * q_tile), row0 + split_rows) - row0);
  const std::uint8_t* base = m.data + b * m.stride_b + h * m.stride_h + row0 * m.stride_i;
  std::uint32_t* out = bits + (bh * m.seqlen_q + row0) * words;
  if constexpr (kVec) {
    // A word a lane: its 32 bytes in two 16-byte loads, kUnroll words a thread in flight (ncu,
    // FLUX.1's 509 MB per-head mask on an H100: 61 % of DRAM bandwidth with one 16-byte load a lane).
    constexpr int kUnroll = 4;
    const int total = rows * words, block_words = k_tile / 32;
    for (int w0 = threadIdx.x; w0 < total; w0 += kUnroll * kThreads) {
      uint4 x[kUnroll][2];
      std::uint32_t tail[kUnroll];  // the word of a row's last keys, read a byte at a time
      int word[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int wi = w0 + u * kThreads;
        x[u][0] = x[u][1] = make_uint4(0, 0, 0, 0);
        tail[u] = 0;
        word[u] = 0;
        if (wi < total) {
          const int r = wi / words;
          word[u] = wi - r * words;
          const int key0 = 32 * word[u];
          const std::uint8_t* row = base + r * m.stride_i;
          if (key0 + 32 <= m.seqlen_k) {
            x[u][0] = __ldg(reinterpret_cast<const uint4*>(row + key0));
            x[u][1] = __ldg(reinterpret_cast<const uint4*>(row + key0 + 16));
          } else {
            for (int j = 0; j < 32 && key0 + j < m.seqlen_k; ++j) tail[u] |= (row[key0 + j] != 0 ? 1u : 0u) << j;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int wi = w0 + u * kThreads;
        if (wi >= total) continue;
        const std::uint32_t v = tail[u] | nonzero_nibble(x[u][0].x) | nonzero_nibble(x[u][0].y) << 4 |
                                nonzero_nibble(x[u][0].z) << 8 | nonzero_nibble(x[u][0].w) << 12 |
                                nonzero_nibble(x[u][1].x) << 16 | nonzero_nibble(x[u][1].y) << 20 |
                                nonzero_nibble(x[u][1].z) << 24 | nonzero_nibble(x[u][1].w) << 28;
        out[wi] = v;
        marks.mark(word[u] / block_words, v, valid_bits(word[u], m.seqlen_k));
      }
    }
  } else {
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int total = rows * words, block_words = k_tile / 32;
    for (int wi = warp; wi < total; wi += kThreads / 32) {  // uniform per warp
      const int r = wi / words, w = wi - r * words, key = 32 * w + lane;
      const bool keep = key < m.seqlen_k && base[r * m.stride_i + key * m.stride_j] != 0;
      const std::uint32_t v = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) {
        out[wi] = v;
        marks.mark(w / block_words, v, valid_bits(w, m.seqlen_k));
      }
    }
  }
  __syncthreads();
  std::uint32_t* global = global_marks + tile * 2 * n_words;
  for (int i = threadIdx.x; i < 2 * n_words; i += kThreads)
    if (shared_marks[i] != 0) atomicOr(&global[i], shared_marks[i]);
}

// One CTA: offsets[r] = the listed blocks of tiles before r (a tile lists the blocks it keeps a key
// of), offsets[rows] their total.
__global__ void __launch_bounds__(kListThreads) offsets_kernel(const std::uint32_t* marks, std::int64_t rows,
                                                               int n_words, std::int32_t* offsets) {
  using Scan = cub::BlockScan<int, kListThreads>;  // the launcher keeps every count below 2^31
  __shared__ typename Scan::TempStorage scan;
  const std::int64_t chunk = (rows + kListThreads - 1) / kListThreads;
  const std::int64_t r0 = min(rows, chunk * threadIdx.x), r1 = min(rows, r0 + chunk);
  int count = 0;
  for (std::int64_t r = r0; r < r1; ++r)
    for (int j = 0; j < n_words; ++j) count += __popc(marks[r * 2 * n_words + j]);
  int at = 0, total = 0;
  Scan(scan).ExclusiveSum(count, at, total);
  for (std::int64_t r = r0; r < r1; ++r) {
    offsets[r] = at;
    for (int j = 0; j < n_words; ++j) at += __popc(marks[r * 2 * n_words + j]);
  }
  if (threadIdx.x == 0) offsets[rows] = total;
}

// One warp per tile: its kept blocks in ascending order, each flagged partial where a row drops one
// of its keys.
__global__ void __launch_bounds__(kThreads) fill_kernel(const std::uint32_t* marks, std::int64_t rows, int n_words,
                                                        const std::int32_t* offsets, std::int32_t* indices,
                                                        std::uint8_t* partial) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for the lists
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kThreads / 32;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32; r < rows; r += warps) {
    const std::uint32_t* keeps = marks + r * 2 * n_words;
    int at = offsets[r];
    for (int j = 0; j < n_words; ++j) {
      const std::uint32_t keep = keeps[j], drop = keeps[n_words + j];
      if ((keep >> lane) & 1u) {
        const int pos = at + __popc(keep & ((1u << lane) - 1u));
        indices[pos] = 32 * j + lane;
        partial[pos] = static_cast<std::uint8_t>((drop >> lane) & 1u);
      }
      at += __popc(keep);
    }
  }
}

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

DenseMaskStatus build_dense_mask_lists(const DenseMaskView& mask, int q_tile, int k_tile, void* stream_ptr,
                                       DenseMaskLists* out) {
  if (mask.data == nullptr || mask.seqlen_q <= 0 || mask.seqlen_k <= 0 || q_tile <= 0 || k_tile <= 0 ||
      k_tile % 32 != 0)
    return {false, "dense mask lists: need a mask, positive sequence lengths and key tiles of whole words"};
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  DenseMaskLists l;
  l.q_tiles = (mask.seqlen_q + q_tile - 1) / q_tile;
  l.k_blocks = (mask.seqlen_k + k_tile - 1) / k_tile;
  l.words = l.k_blocks * (k_tile / 32);
  const std::int64_t bh = mask.batch * mask.heads;
  const std::int64_t rows = bh * l.q_tiles, entries = rows * l.k_blocks;
  if (entries >= (std::int64_t{1} << 31))
    return {false, "dense mask lists: more than 2^31 (tile, key block) pairs; split the batch"};
  const int n_words = (l.k_blocks + 31) / 32;
  const std::size_t mark_bytes = static_cast<std::size_t>(rows) * 2 * n_words * 4;
  if (2 * n_words * 4 > 48 * 1024)
    return {false, "dense mask lists: more than 196608 key blocks in a row; split the keys"};
  const std::size_t sizes[] = {
      static_cast<std::size_t>(bh) * mask.seqlen_q * l.words * 4,  // row bits
      mark_bytes,                                                // each tile's keep and drop marks
      static_cast<std::size_t>(rows + 1) * 4,                    // offsets
      static_cast<std::size_t>(entries) * 4,                     // indices
      static_cast<std::size_t>(entries)};                        // partial
  std::size_t total = 0;
  for (std::size_t s : sizes) total += align256(s);
  void* ws = nullptr;
  cudaError_t e = cuda::workspace_alloc(&ws, total, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return {false, "dense mask lists: cannot allocate " + std::to_string(total >> 20) + " MiB on the device: " +
                       cudaGetErrorString(e)};
  }
  char* at[5];
  char* next = static_cast<char*>(ws);
  for (int i = 0; i < 5; ++i) {
    at[i] = next;
    next += align256(sizes[i]);
  }
  auto* bits = reinterpret_cast<std::uint32_t*>(at[0]);
  auto* marks = reinterpret_cast<std::uint32_t*>(at[1]);
  auto* offsets = reinterpret_cast<std::int32_t*>(at[2]);
  const int splits = mask_row_splits(rows, q_tile), split_rows = (q_tile + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((q_tile + split_rows - 1) / split_rows));
  const bool vec = mask.stride_j == 1 && reinterpret_cast<std::uintptr_t>(mask.data) % 16 == 0 &&
                   mask.stride_b % 16 == 0 && mask.stride_h % 16 == 0 && mask.stride_i % 16 == 0;
  const std::size_t smem = static_cast<std::size_t>(2 * n_words) * 4;
  e = cudaMemsetAsync(marks, 0, mark_bytes, stream);
  if (e == cudaSuccess) {
    if (vec)
      pack_and_mark_kernel<true><<<grid, kThreads, smem, stream>>>(mask, l.words, q_tile, k_tile, l.q_tiles, split_rows,
                                                                   bits, marks);
    else
      pack_and_mark_kernel<false><<<grid, kThreads, smem, stream>>>(mask, l.words, q_tile, k_tile, l.q_tiles,
                                                                    split_rows, bits, marks);
    offsets_kernel<<<1, kListThreads, 0, stream>>>(marks, rows, n_words, offsets);
    const std::int64_t fill_ctas = std::min<std::int64_t>((rows + kThreads / 32 - 1) / (kThreads / 32), 65535 * 16);
    fill_kernel<<<static_cast<unsigned>(fill_ctas), kThreads, 0, stream>>>(
        marks, rows, n_words, offsets, reinterpret_cast<std::int32_t*>(at[3]), reinterpret_cast<std::uint8_t*>(at[4]));
    e = cudaGetLastError();
  }
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(ws, stream);
    return {false, std::string("dense mask lists: launch failed: ") + cudaGetErrorString(e)};
  }
  l.workspace = ws;
  l.row_bits = bits;
  l.row_bits_stride_h = mask.heads > 1 ? static_cast<std::int64_t>(mask.seqlen_q) * l.words : 0;
  l.row_bits_stride_b = mask.batch > 1 ? mask.heads * static_cast<std::int64_t>(mask.seqlen_q) * l.words : 0;
  l.offsets = reinterpret_cast<const std::int32_t*>(at[2]);
  l.indices = reinterpret_cast<const std::int32_t*>(at[3]);
  l.partial = reinterpret_cast<const std::uint8_t*>(at[4]);
  l.list_stride_h = mask.heads > 1 ? l.q_tiles : 0;
  l.list_stride_b = mask.batch > 1 ? static_cast<int>(mask.heads * l.q_tiles) : 0;
  *out = l;
  return {};
}

}  // namespace diffattn::flash
