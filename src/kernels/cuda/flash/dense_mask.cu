// Dense keep-masks for the listed walk of the Hopper flash kernel (dense_mask.h): three launches on
// the call's stream. (1) the bytes of each query row become words of bits (16-byte loads where the
// rows allow, else one warp per word); (2) one
// warp per (query tile, key block) marks the block empty, partial or full from those words;
// (3) one CTA turns the marks into CSR lists, each thread over a run of consecutive tiles.

#include "kernels/cuda/flash/dense_mask.h"

#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "kernels/cuda/flash/flash_hopper_launch.cuh"
#include "kernels/cuda/workspace_pool.h"

namespace diffattn::flash {
namespace {

constexpr int kThreads = 256;
constexpr int kListThreads = 1024;
enum : std::uint8_t { kEmpty = 0, kPartial = 1, kFull = 2 };

__global__ void pack_rows_kernel(DenseMaskView m, int words, std::uint32_t* bits) {
  const std::int64_t total = m.batch * m.heads * static_cast<std::int64_t>(m.seqlen_q) * words;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t wi = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; wi < total;
       wi += warps) {  // uniform per warp
    std::int64_t t = wi;
    const int w = static_cast<int>(t % words);
    t /= words;
    const std::int64_t i = t % m.seqlen_q;
    t /= m.seqlen_q;
    const std::int64_t h = t % m.heads, b = t / m.heads;
    const int key = w * 32 + lane;
    const bool keep =
        key < m.seqlen_k && m.data[b * m.stride_b + h * m.stride_h + i * m.stride_i + key * m.stride_j] != 0;
    const std::uint32_t word = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) bits[wi] = word;
  }
}

// The same with 16 keys per thread, each read as one 16-byte load (rows start on 16 bytes, keys
// contiguous); a pair of neighbouring lanes makes one word. Chunks that run past Skv read bytes one
// at a time. One byte per score at a warp's 512 contiguous bytes per load, where the kernel above
// moves 32.
__device__ __forceinline__ std::uint32_t nonzero_nibble(std::uint32_t x) {
  const std::uint32_t m = __vcmpne4(x, 0u) & 0x01010101u;  // bit 8k: byte k is nonzero
  return (m | m >> 7 | m >> 14 | m >> 21) & 0xfu;
}

__global__ void pack_rows_vec_kernel(DenseMaskView m, int words, std::uint32_t* bits) {
  const std::int64_t per_row = 2 * static_cast<std::int64_t>(words);
  const std::int64_t chunks = m.batch * m.heads * static_cast<std::int64_t>(m.seqlen_q) * per_row;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x - lane; c0 < chunks;
       c0 += stride) {  // uniform per warp: the pairs below exchange through shuffles
    const std::int64_t c = c0 + lane;
    std::uint32_t v = 0;
    if (c < chunks) {
      std::int64_t t = c;
      const int key0 = static_cast<int>(t % per_row) * 16;
      t /= per_row;
      const std::int64_t i = t % m.seqlen_q;
      t /= m.seqlen_q;
      const std::int64_t h = t % m.heads, b = t / m.heads;
      const std::uint8_t* row = m.data + b * m.stride_b + h * m.stride_h + i * m.stride_i;
      if (key0 + 16 <= m.seqlen_k) {
        const uint4 x = __ldg(reinterpret_cast<const uint4*>(row + key0));
        v = nonzero_nibble(x.x) | nonzero_nibble(x.y) << 4 | nonzero_nibble(x.z) << 8 | nonzero_nibble(x.w) << 12;
      } else {
        for (int k = 0; k < 16 && key0 + k < m.seqlen_k; ++k) v |= (row[key0 + k] != 0 ? 1u : 0u) << k;
      }
    }
    const std::uint32_t hi = __shfl_down_sync(0xffffffffu, v, 1);
    if (c < chunks && (c & 1) == 0) bits[c >> 1] = v | hi << 16;
  }
}

// The bits of word w that stand for keys below Skv.
__device__ __forceinline__ std::uint32_t valid_bits(int w, int seqlen_k) {
  const int key0 = w * 32;
  if (key0 + 32 <= seqlen_k) return 0xffffffffu;
  if (key0 >= seqlen_k) return 0u;
  return (1u << (seqlen_k - key0)) - 1u;
}

__global__ void classify_kernel(const std::uint32_t* bits, int words, int seqlen_q, int seqlen_k, int q_tile,
                                int k_tile, std::int64_t tiles, int q_tiles, int k_blocks, std::uint8_t* flags) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  const int block_words = k_tile / 32;
  for (std::int64_t wi = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       wi < tiles * k_blocks; wi += warps) {
    const int nb = static_cast<int>(wi % k_blocks);
    const std::int64_t tile = wi / k_blocks;  // (bh, t)
    const int t = static_cast<int>(tile % q_tiles);
    const std::int64_t bh = tile / q_tiles;
    const int row_end = min(seqlen_q, (t + 1) * q_tile);
    bool any = false, all = true;
    for (int i = t * q_tile + lane; i < row_end; i += 32) {
      const std::uint32_t* row = bits + (bh * seqlen_q + i) * words;
      for (int w = nb * block_words; w < (nb + 1) * block_words; ++w) {
        const std::uint32_t v = row[w], valid = valid_bits(w, seqlen_k);
        any = any || v != 0;
        all = all && v == valid;
      }
    }
    any = __any_sync(0xffffffffu, any);
    all = __all_sync(0xffffffffu, all);
    if (lane == 0) flags[wi] = any ? (all ? kFull : kPartial) : kEmpty;
  }
}

__global__ void __launch_bounds__(kListThreads) lists_kernel(const std::uint8_t* flags, std::int64_t rows, int k_blocks,
                                                             std::int32_t* offsets, std::int32_t* indices,
                                                             std::uint8_t* partial) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for the lists
  using Scan = cub::BlockScan<int, kListThreads>;  // the launcher keeps every count below 2^31
  __shared__ typename Scan::TempStorage scan;
  const std::int64_t chunk = (rows + kListThreads - 1) / kListThreads;
  const std::int64_t r0 = min(rows, chunk * threadIdx.x), r1 = min(rows, r0 + chunk);
  int count = 0;
  for (std::int64_t i = r0 * k_blocks; i < r1 * k_blocks; ++i) count += flags[i] != kEmpty;
  int at = 0, total = 0;
  Scan(scan).ExclusiveSum(count, at, total);
  for (std::int64_t r = r0; r < r1; ++r) {
    offsets[r] = at;
    for (int nb = 0; nb < k_blocks; ++nb) {
      const std::uint8_t f = flags[r * k_blocks + nb];
      if (f == kEmpty) continue;
      indices[at] = nb;
      partial[at] = f == kPartial;
      ++at;
    }
  }
  if (threadIdx.x == 0) offsets[rows] = total;
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
  const std::size_t sizes[] = {
      static_cast<std::size_t>(bh) * mask.seqlen_q * l.words * 4,  // row bits
      static_cast<std::size_t>(entries),                         // flags
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
  auto* flags = reinterpret_cast<std::uint8_t*>(at[1]);
  const auto grid = [](std::int64_t warps) {
    return static_cast<unsigned>(std::min<std::int64_t>((warps + kThreads / 32 - 1) / (kThreads / 32), 65535 * 16));
  };
  const bool vec = mask.stride_j == 1 && reinterpret_cast<std::uintptr_t>(mask.data) % 16 == 0 &&
                   mask.stride_b % 16 == 0 && mask.stride_h % 16 == 0 && mask.stride_i % 16 == 0;
  if (vec) {
    const std::int64_t chunks = bh * mask.seqlen_q * 2 * static_cast<std::int64_t>(l.words);
    pack_rows_vec_kernel<<<grid((chunks + 31) / 32), kThreads, 0, stream>>>(mask, l.words, bits);
  } else {
    pack_rows_kernel<<<grid(bh * mask.seqlen_q * l.words), kThreads, 0, stream>>>(mask, l.words, bits);
  }
  classify_kernel<<<grid(entries), kThreads, 0, stream>>>(bits, l.words, mask.seqlen_q, mask.seqlen_k, q_tile, k_tile,
                                                          rows, l.q_tiles, l.k_blocks, flags);
  lists_kernel<<<1, kListThreads, 0, stream>>>(flags, rows, l.k_blocks, reinterpret_cast<std::int32_t*>(at[2]),
                                               reinterpret_cast<std::int32_t*>(at[3]),
                                               reinterpret_cast<std::uint8_t*>(at[4]));
  e = cudaGetLastError();
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
