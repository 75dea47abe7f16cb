#pragma once
// TMA descriptors and the launch of one Hopper kernel instantiation (traits T). Included by the
// dispatch ladder in flash_hopper.cu and by the development harness, which times tile variants.

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_fwd_hopper.cuh"
#include "kernels/cuda/flash/flash_hopper.h"
#include "kernels/cuda/flash/packed_order.h"
#include "kernels/cuda/workspace_pool.h"
#include "kernels/sparse/compact_keys.h"
#include "kernels/sparse/key_walk.h"

namespace diffattn::flash {
namespace hopper_detail {


using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver entry point is fetched through the runtime so the library need not link libcuda.
inline EncodeTiledFn encode_tiled_fn() {
  static EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult query{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query) !=
            cudaSuccess ||
        query != cudaDriverEntryPointSuccess)
      ptr = nullptr;
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

inline LaunchStatus fail(LaunchStatus::Code code, std::string message) { return {code, std::move(message)}; }

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

inline LaunchStatus make_map(CUtensorMap* map, const char* name, const void* base, bool bf16, int head_size,
                      std::int64_t rows, std::int64_t heads, std::int64_t batch, const std::int64_t (&stride)[3],
                      int box_rows) {
  EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr)
    return fail(LaunchStatus::kCudaError,
                "FLASH_ATTN: the CUDA driver does not provide cuTensorMapEncodeTiled (needs a CUDA 12+ driver); "
                "update the driver or select CUDNN_ATTN / TORCH_SDPA");
  if (!aligned16(base))
    return fail(LaunchStatus::kInvalidInput,
                std::string("FLASH_ATTN: ") + name + " data must be 16-byte aligned for TMA; pass an aligned tensor");
  for (int i = 0; i < 3; ++i) {
    if ((stride[i] * 2) % 16 != 0)
      return fail(LaunchStatus::kInvalidInput,
                  std::string("FLASH_ATTN: ") + name + " batch/sequence/head strides must be multiples of 8 elements "
                  "(16 bytes) for TMA; got strides (" + std::to_string(stride[0]) + ", " + std::to_string(stride[1]) +
                  ", " + std::to_string(stride[2]) + "); make the tensor contiguous first");
  }
  if (!fits_tma_coordinates(rows) || !fits_tma_coordinates(heads) || !fits_tma_coordinates(batch))
    return fail(LaunchStatus::kInvalidInput, std::string("FLASH_ATTN: ") + name + " extents exceed 2^31 rows");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_size), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // TMA strides are in bytes and exclude the innermost (contiguous) dimension.
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(stride[1] * 2), static_cast<cuuint64_t>(stride[2] * 2),
                                 static_cast<cuuint64_t>(stride[0] * 2)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                            const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cuTensorMapEncodeTiled failed for ") + name +
                                              " (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return {};
}

// The launch workspaces (split partials, packed key masks) come from diffattn's own pool
// (kernels/cuda/workspace_pool.h).
using cuda::workspace_pool;

// Packs a bool key mask [B, Skv] into bits, one word per 32 keys (one warp per word), zero past
// Skv and over the padding words the last key block may read.
template <int kWarps>
__global__ void pack_kv_mask_kernel(const std::uint8_t* mask, std::int64_t stride_b, std::int64_t stride_s,
                                    int seqlen_k, int words, std::uint32_t* bits) {
  const int w = blockIdx.x * kWarps + static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (w >= words) return;  // uniform per warp
  const int key = w * 32 + lane;
  const bool keep = key < seqlen_k && mask[blockIdx.y * stride_b + key * stride_s] != 0;
  const std::uint32_t word = __ballot_sync(0xffffffffu, keep);
  if (lane == 0) bits[static_cast<std::int64_t>(blockIdx.y) * words + w] = word;
}

// The first key from `pos` on whose bit is `kept` (words * 32 if none): the warp reads 32 words a
// step. Bits are zero past Skv, so a dropped key is always found at Skv.
__device__ __forceinline__ int find_key(const std::uint32_t* bits, int words, int pos, bool kept, int lane) {
  const int w0 = pos >> 5;
  for (int base = w0; base < words; base += 32) {
    const int w = base + lane;
    std::uint32_t x = 0;
    if (w < words) {
      x = bits[w];
      if (!kept) x = ~x;
      if (w == w0) x &= ~0u << (pos & 31);
    }
    const unsigned hit = __ballot_sync(0xffffffffu, x != 0);
    if (hit != 0) {
      const int l = __ffs(static_cast<int>(hit)) - 1;
      const std::uint32_t xl = __shfl_sync(0xffffffffu, x, l);
      return (base + l) * 32 + __ffs(static_cast<int>(xl)) - 1;
    }
  }
  return words * 32;
}

// Whether key block n of kBlockN keys keeps any key, and every one of its keys before Skv.
template <int kBlockN>
__device__ __forceinline__ void block_keeps(const std::uint32_t* bits, int seqlen_k, int n, bool& any, bool& all) {
  const int lo = n * kBlockN, hi = min((n + 1) * kBlockN, seqlen_k);
  any = false, all = true;
  for (int w = lo >> 5; w <= (hi - 1) >> 5; ++w) {
    std::uint32_t in = ~0u;  // the bits of this word that lie inside [lo, hi)
    if (w == lo >> 5) in &= ~0u << (lo & 31);
    if (w == (hi - 1) >> 5 && (hi & 31) != 0) in &= (1u << (hi & 31)) - 1;
    const std::uint32_t word = bits[w] & in;
    any = any || word != 0;
    all = all && word == in;
  }
}

// Each batch's key walk (FlashParams::kv_walk; kernels/sparse/key_walk.h is its CPU oracle) from
// the packed bits, one warp per batch: the aligned blocks that keep a key are counted, then the
// kept runs' blocks (stopping once they are more), and the kind with fewer entries is written.
// The scans are chains of dependent reads, so they read the batch's bits from shared memory when
// they fit (`in_smem`, dynamic shared memory of words * 4 bytes). With `mask` the block first packs
// the batch's bytes itself, every warp a word at a time, into shared memory and all_bits (the one
// launch of a key mask that fits); then its first warp walks. Without, all_bits holds the bits
// (pack_kv_mask_kernel) and one warp copies and walks them. `counts`, when set, gets each batch's
// number of entries (SAGE_ATTN's tiles split their key blocks by it).
//
// It may run as a dependent launch beside the kernel before it (SAGE_ATTN launches it after its
// statistics pass, whose memory it does not touch): it waits for that kernel before it exits, so
// that a kernel waiting for this one also waits for the one before. Launched plainly, the wait
// returns at once.
template <int kBlockN>
__global__ void key_walk_kernel(std::uint32_t* all_bits, int words, int seqlen_k, int stride, bool aligned_only,
                                bool in_smem, std::int32_t* all_walk,
                                const std::uint8_t* mask, std::int64_t mask_stride_b, std::int64_t mask_stride_s,
                                int* counts = nullptr) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for the walk
  extern __shared__ std::uint32_t smem_bits[];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::uint32_t* bits = all_bits + static_cast<std::int64_t>(blockIdx.x) * words;
  if (mask != nullptr) {
    const std::uint8_t* m = mask + blockIdx.x * mask_stride_b;
    std::uint32_t* out = all_bits + static_cast<std::int64_t>(blockIdx.x) * words;
    for (int w = static_cast<int>(threadIdx.x) / 32; w < words; w += static_cast<int>(blockDim.x) / 32) {
      const int key = w * 32 + lane;
      const bool keep = key < seqlen_k && m[key * mask_stride_s] != 0;
      const std::uint32_t word = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) smem_bits[w] = out[w] = word;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    bits = smem_bits;
  } else if (in_smem) {
    for (int w = lane; w < words; w += 32) smem_bits[w] = __ldg(bits + w);
    __syncwarp();
    bits = smem_bits;
  }
  int2* walk = reinterpret_cast<int2*>(all_walk) + static_cast<std::int64_t>(blockIdx.x) * stride;
  const int blocks = (seqlen_k + kBlockN - 1) / kBlockN;
  int aligned = 0;
  for (int base = 0; base < blocks; base += 32) {
    bool any = false, all = false;
    if (base + lane < blocks) block_keeps<kBlockN>(bits, seqlen_k, base + lane, any, all);
    aligned += __popc(__ballot_sync(0xffffffffu, any));
  }
  int pieces = 0;
  if (!aligned_only) {
    for (int pos = 0; pieces <= aligned;) {
      const int start = find_key(bits, words, pos, true, lane);
      if (start >= seqlen_k) break;
      const int end = min(find_key(bits, words, start, false, lane), seqlen_k);
      pieces += (end - start + kBlockN - 1) / kBlockN;
      pos = end;
    }
  }
  const bool runs = !aligned_only && pieces <= aligned;
  int written = 0;
  if (runs) {
    for (int pos = 0;;) {
      const int start = find_key(bits, words, pos, true, lane);
      if (start >= seqlen_k) break;
      const int end = min(find_key(bits, words, start, false, lane), seqlen_k);
      const int next = find_key(bits, words, end, true, lane);  // the next run's first key
      const int np = (end - start + kBlockN - 1) / kBlockN;
      for (int i = lane; i < np; i += 32) {
        const int key0 = start + i * kBlockN;
        const int len = min(kBlockN, end - key0);
        walk[written + i] = make_int2(key0, len | (partial_run_reads_bits(key0, len, next, kBlockN) ? 1 << 16 : 0));
      }
      written += np;
      pos = end;
    }
  } else {
    for (int base = 0; base < blocks; base += 32) {
      const int n = base + lane;
      bool any = false, all = false;
      if (n < blocks) block_keeps<kBlockN>(bits, seqlen_k, n, any, all);
      const unsigned live = __ballot_sync(0xffffffffu, any);
      if (any) {
        const int len = min(kBlockN, seqlen_k - n * kBlockN);
        walk[written + __popc(live & ((1u << lane) - 1))] = make_int2(n * kBlockN, len | (all ? 0 : 1 << 16));
      }
      written += __popc(live);
    }
  }
  // The positions after the last entry hold {0, 0}: a zero length ends the walk, so the kernel
  // needs no count (one load per block, not two in a row).
  for (int i = written + lane; i < blocks; i += 32) walk[i] = make_int2(0, 0);
  if (counts != nullptr && lane == 0) counts[blockIdx.x] = written;
  cuda::wait_for_prior_kernel();
}

// Packs p.kv_mask into a workspace from the workspace pool (see FlashParams::kv_bits). Without the
// workspace the kernel reads the byte mask itself: slower, same result.
template <class T>
LaunchStatus pack_mask(FlashParams& p, cudaStream_t stream, void** workspace) {
  // More sequences than a grid's y extent: the kernel reads the byte mask.
  if (p.kv_mask == nullptr || p.batch > 65535) return {};
  // Key blocks end at most kBlockN - 1 keys past Skv.
  const int words = (p.seqlen_k + T::kBlockN + 31) / 32 + 1;
  cudaMemPool_t pool = workspace_pool();
  void* ws = nullptr;
  const int blocks = static_cast<int>(ceil_div(p.seqlen_k, T::kBlockN));
  const std::size_t bits_bytes = (static_cast<std::size_t>(p.batch) * words * 4 + 255) / 256 * 256;
  const std::size_t walk_bytes = (static_cast<std::size_t>(p.batch) * blocks * 8 + 255) / 256 * 256;
  const std::size_t bytes = bits_bytes + walk_bytes;
  if (pool == nullptr || cudaMallocFromPoolAsync(&ws, bytes, pool, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  constexpr int kWarps = 8;
  auto* bits = static_cast<std::uint32_t*>(ws);
  auto* walk = reinterpret_cast<std::int32_t*>(static_cast<char*>(ws) + bits_bytes);
  // One launch packs and walks where the bits fit in shared memory (48 KB: keys up to about
  // 393k); longer masks are packed by a grid of their own first.
  if (words <= 12 * 1024) {
    key_walk_kernel<T::kBlockN><<<p.batch, 32 * kWarps, words * 4, stream>>>(
        bits, words, p.seqlen_k, blocks, p.causal, true, walk, p.kv_mask, p.mask_stride_b, p.mask_stride_s);
  } else {
    pack_kv_mask_kernel<kWarps><<<dim3((words + kWarps - 1) / kWarps, p.batch), 32 * kWarps, 0, stream>>>(
        p.kv_mask, p.mask_stride_b, p.mask_stride_s, p.seqlen_k, words, bits);
    key_walk_kernel<T::kBlockN><<<p.batch, 32, 0, stream>>>(bits, words, p.seqlen_k, blocks, p.causal, false, walk,
                                                           nullptr, 0, 0);
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(ws, stream);
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cannot pack the key mask: ") + cudaGetErrorString(e));
  }
  *workspace = ws;
  p.kv_bits = static_cast<const std::uint32_t*>(ws);
  p.kv_bits_words = words;
  p.kv_walk = walk;
  p.kv_walk_stride = blocks;
  return {};
}

// The 16-byte pieces [p0, p1) of a batch's gathered copies (piece q: row q / row_pieces of the
// copy, head and 16 bytes within it), taken from key row (q / row_pieces + key_shift) of K and V,
// or zeros when key_shift < 0. Thread t of the batch's `threads` takes the pieces q = t modulo
// `threads`, four at a time, so that their loads are in flight together (one at a time, a warp
// a row, the copy took 16-23 us for FLUX.1's 77 rows on an H100). Piece indices fit 32 bits: a
// batch's copy holds at most kCompactCopyLimit / 32 pieces.
__device__ __forceinline__ void copy_key_pieces(int p0, int p1, int key_shift, const uint4* k, const uint4* v,
                                                std::int64_t k_ss, std::int64_t k_sh, std::int64_t v_ss,
                                                std::int64_t v_sh, int chunks, int row_pieces, uint4* kg, uint4* vg,
                                                int t, int threads) {
  constexpr int kBatch = 4;
  for (int q = p0 + ((t - p0) % threads + threads) % threads; q < p1; q += kBatch * threads) {
    uint4 kx[kBatch], vx[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int qq = q + u * threads;
      kx[u] = vx[u] = make_uint4(0u, 0u, 0u, 0u);
      if (qq < p1 && key_shift >= 0) {
        const std::int64_t key = qq / row_pieces + key_shift;
        const int w = qq % row_pieces, h = w / chunks, c = w % chunks;
        kx[u] = __ldg(k + key * k_ss + h * k_sh + c);
        vx[u] = __ldg(v + key * v_ss + h * v_sh + c);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int qq = q + u * threads;
      if (qq < p1) kg[qq] = kx[u], vg[qq] = vx[u];
    }
  }
}

// The compact walk of each batch's key mask (FlashParams::kv_count / kv_block_rows;
// kernels/sparse/compact_keys.h is its CPU oracle) and the gathered copy of the keys and values
// that are not in whole blocks of their runs. Grid (G, B), kWarps warps a CTA: every CTA packs its
// batch's mask into shared memory (words * 4 bytes; bits zero from Skv on), kWords words a warp at
// a time, and every warp walks the kept runs itself (two for a padded prompt), so no CTA waits for
// another. The batch's G CTAs copy each run's rest into the copy (copy_key_pieces) and zero the
// copy's rows after the last up to its block's end, so that the keys the last block masks meet
// zero values. The batch's first warp writes the block rows and the count. Strides in 16-byte units.
template <int kBlockN, int kWarps>
__global__ void compact_keys_kernel(const std::uint8_t* mask, std::int64_t mask_stride_b, std::int64_t mask_stride_s,
                                    int seqlen_k, int words, const uint4* k, const uint4* v, std::int64_t k_sb,
                                    std::int64_t k_ss, std::int64_t k_sh, std::int64_t v_sb, std::int64_t v_ss,
                                    std::int64_t v_sh, int heads_kv, int chunks, int rows_stride,
                                    std::int32_t* block_rows, std::int32_t* count, uint4* kg, uint4* vg,
                                    std::int64_t copy_rows) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for the plan and the copies
  extern __shared__ std::uint32_t bits[];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int b = blockIdx.y;
  const std::uint8_t* m = mask + b * mask_stride_b;
  constexpr int kWords = 16;  // their loads in flight together (a word at a time: 8 dependent rounds for FLUX.1)
  for (int w0 = warp; w0 < words; w0 += kWarps * kWords) {
    bool keep[kWords];
#pragma unroll
    for (int u = 0; u < kWords; ++u) {
      const int key = (w0 + u * kWarps) * 32 + lane;
      keep[u] = key < seqlen_k && m[key * mask_stride_s] != 0;
    }
#pragma unroll
    for (int u = 0; u < kWords; ++u) {
      const int w = w0 + u * kWarps;
      const std::uint32_t word = __ballot_sync(0xffffffffu, keep[u]);
      if (lane == 0 && w < words) bits[w] = word;
    }
  }
  __syncthreads();
  const bool first_warp = blockIdx.x == 0 && warp == 0;
  const int threads = static_cast<int>(gridDim.x * blockDim.x);
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int row_pieces = heads_kv * chunks;
  const uint4* kb = k + b * k_sb;
  const uint4* vb = v + b * v_sb;
  uint4* kgb = kg + b * copy_rows * row_pieces;
  uint4* vgb = vg + b * copy_rows * row_pieces;
  std::int32_t* rows = block_rows + static_cast<std::int64_t>(b) * rows_stride;
  int whole_blocks = 0, gathered = 0;
  for (int pos = 0;;) {
    const int start = find_key(bits, words, pos, true, lane);
    if (start >= seqlen_k) break;
    const int end = min(find_key(bits, words, start, false, lane), seqlen_k);
    const int whole = (end - start) / kBlockN;
    if (first_warp)
      for (int i = lane; i < whole; i += 32) rows[whole_blocks + i] = start + i * kBlockN;
    const int rest = start + whole * kBlockN;  // keys [rest, end) go to rows from `gathered` on
    copy_key_pieces(gathered * row_pieces, (gathered + end - rest) * row_pieces, rest - gathered, kb, vb, k_ss, k_sh,
                    v_ss, v_sh, chunks, row_pieces, kgb, vgb, t, threads);
    whole_blocks += whole;
    gathered += end - rest;
    pos = end;
  }
  const int gathered_blocks = (gathered + kBlockN - 1) / kBlockN;
  if (first_warp) {
    for (int i = lane; i < gathered_blocks; i += 32) rows[whole_blocks + i] = gathered_block_row(i * kBlockN);
    if (lane == 0) count[b] = whole_blocks * kBlockN + gathered;
  }
  copy_key_pieces(gathered * row_pieces, gathered_blocks * kBlockN * row_pieces, -1, kb, vb, k_ss, k_sh, v_ss, v_sh,
                  chunks, row_pieces, kgb, vgb, t, threads);
}

// The builder's launch (compact_mask's, and the test entry build_compact_keys_cuda's): up to 32
// CTAs of kCompactWarps warps a batch (two an SM for one batch), the packed mask in dynamic shared
// memory, at most kCompactMaxWords words (48 KB: about 393k keys). Element strides of (batch,
// sequence, head), multiples of 8 (make_map checks K's and V's).
inline constexpr int kCompactWarps = 16;
inline constexpr int kCompactMaxWords = 12 * 1024;
constexpr int compact_mask_words(int seqlen_k) { return seqlen_k / 32 + 1; }  // a zero bit after the last key

template <int kBlockN>
void launch_compact_keys(const std::uint8_t* mask, std::int64_t mask_stride_b, std::int64_t mask_stride_s, int batch,
                         int seqlen_k, const void* k, const std::int64_t (&k_stride)[3], const void* v,
                         const std::int64_t (&v_stride)[3], int heads_kv, int head_size, std::int32_t* block_rows,
                         std::int32_t* count, void* kg, void* vg, int sm_count, cudaStream_t stream) {
  const int words = compact_mask_words(seqlen_k);
  const std::int64_t blocks = ceil_div(seqlen_k, kBlockN);
  const int per_batch = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(32, 2 * sm_count / batch)));
  const auto in16 = [](std::int64_t elements) { return elements / 8; };
  compact_keys_kernel<kBlockN, kCompactWarps><<<dim3(per_batch, batch), 32 * kCompactWarps, words * 4, stream>>>(
      mask, mask_stride_b, mask_stride_s, seqlen_k, words, static_cast<const uint4*>(k), static_cast<const uint4*>(v),
      in16(k_stride[0]), in16(k_stride[1]), in16(k_stride[2]), in16(v_stride[0]), in16(v_stride[1]),
      in16(v_stride[2]), heads_kv, head_size / 8, static_cast<int>(blocks), block_rows, count,
      static_cast<uint4*>(kg), static_cast<uint4*>(vg), blocks * kBlockN);
}

// The compact walk of a non-causal key mask (FlashParams::kv_count): its workspace from the pool
// (the block rows, the counts and the gathered copies of K and V, as large as K and V at most), the
// builder launch and the copies' TMA maps. Returns with p unchanged (the live-bits walk then takes
// the mask) when the mask is causal, packed or longer than the builder's shared memory, or its
// copies would pass kCompactCopyLimit bytes, or the pool has no room.
constexpr std::size_t kCompactCopyLimit = std::size_t{1} << 30;

// 0 builds the launcher without the compact walk (key masks take the live-bits walk), for A/B runs.
#ifndef DIFFATTN_COMPACT_KEY_WALK
#define DIFFATTN_COMPACT_KEY_WALK 1
#endif

// Tiles without a compact walk (flash_config.h, compact_walk_fits) take the live-bits walk.
template <class T>
constexpr bool kHasCompactWalk = compact_walk_fits(T::kD, T::kBlockN);

template <class T>
LaunchStatus compact_mask(FlashParams& p, const HopperArgs& args, FlashTmaMaps& maps, cudaStream_t stream,
                          void** workspace) {
  if (!kHasCompactWalk<T> || !DIFFATTN_COMPACT_KEY_WALK || p.kv_mask == nullptr || p.causal ||
      p.cu_seqlens_q != nullptr || p.batch > 65535)
    return {};
  if (compact_mask_words(p.seqlen_k) > kCompactMaxWords) return {};
  cudaMemPool_t pool = workspace_pool();
  if (pool == nullptr) return {};
  const std::int64_t blocks = ceil_div(p.seqlen_k, T::kBlockN), copy_rows = blocks * T::kBlockN;
  const std::size_t copy_bytes = static_cast<std::size_t>(p.batch) * copy_rows * p.heads_kv * T::kD * 2;
  if (2 * copy_bytes > kCompactCopyLimit) return {};
  const auto round = [](std::size_t n) { return (n + 255) / 256 * 256; };
  const std::size_t rows_bytes = round(static_cast<std::size_t>(p.batch) * blocks * 4);
  const std::size_t count_bytes = round(static_cast<std::size_t>(p.batch) * 4);
  void* ws = nullptr;
  if (cudaMallocFromPoolAsync(&ws, rows_bytes + count_bytes + 2 * round(copy_bytes), pool, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  auto* base = static_cast<char*>(ws);
  auto* rows = reinterpret_cast<std::int32_t*>(base);
  auto* count = reinterpret_cast<std::int32_t*>(base + rows_bytes);
  auto* kg = reinterpret_cast<uint4*>(base + rows_bytes + count_bytes);
  auto* vg = reinterpret_cast<uint4*>(base + rows_bytes + count_bytes + round(copy_bytes));
  const std::int64_t copy_stride[3] = {copy_rows * p.heads_kv * T::kD, std::int64_t{p.heads_kv} * T::kD, T::kD};
  LaunchStatus s = make_map(&maps.kg, "gathered k", kg, T::kBf16, T::kD, copy_rows, p.heads_kv, p.batch, copy_stride,
                            T::kBlockN);
  if (s.ok())
    s = make_map(&maps.vg, "gathered v", vg, T::kBf16, T::kD, copy_rows, p.heads_kv, p.batch, copy_stride,
                 T::kBlockN);
  if (!s.ok()) {
    (void)cudaFreeAsync(ws, stream);
    return s;
  }
  launch_compact_keys<T::kBlockN>(p.kv_mask, p.mask_stride_b, p.mask_stride_s, p.batch, p.seqlen_k, args.k,
                                  args.k_stride, args.v, args.v_stride, p.heads_kv, T::kD, rows, count, kg, vg,
                                  args.sm_count, stream);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(ws, stream);
    return fail(LaunchStatus::kCudaError,
                std::string("FLASH_ATTN: cannot compact the key mask: ") + cudaGetErrorString(e));
  }
  *workspace = ws;
  p.kv_count = count;
  p.kv_block_rows = rows;
  p.kv_block_rows_stride = static_cast<int>(blocks);
  p.kv_mask = nullptr;  // the kernel runs the kept keys unmasked
  return {};
}

// Writes a packed batch's order (packed_order.h): `order` gets the `batch` sequences by rank, then
// the prefix counts of their tiles; `tiles` the tile each of the launch's num_tiles slots takes, or
// -1. One block: each thread ranks its sequences, warp 0 sums the counts in rank order, 32 at a
// time, then every thread writes slots.
template <int kBlockM>
__global__ void packed_order_kernel(const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int heads,
                                    int num_m_blocks, bool causal, int grid, int* order, int* tiles) {
  cuda::allow_dependents_to_start();  // the attention kernel waits for the order
  int* start = order + batch;
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    const int j = packed_rank(cu_seqlens_k, batch, b);
    order[j] = b;
    start[j + 1] = packed_tile_count(cu_seqlens_q, b, heads, kBlockM);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    int carry = 0;
    if (lane == 0) start[0] = 0;
    for (int base = 1; base <= batch; base += 32) {
      const int i = base + lane;
      int v = i <= batch ? start[i] : 0;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (i <= batch) start[i] = carry + v;
      carry += __shfl_sync(0xffffffffu, v, 31);
    }
  }
  __syncthreads();
  const int slots = batch * heads * num_m_blocks;
  for (int slot = threadIdx.x; slot < slots; slot += blockDim.x)
    tiles[slot] = packed_slot_tile(order, cu_seqlens_q, batch, heads, kBlockM, num_m_blocks, causal, grid, slot);
}

// Orders a packed batch of more than one sequence (FlashParams::packed_tiles) with a workspace from
// the pool, for a persistent grid of `grid` CTAs. Without one the kernel takes the tiles of the
// batch x heads x num_m_blocks grid in turn: the same result, less evenly spread.
template <class T>
LaunchStatus order_packed(FlashParams& p, int grid, cudaStream_t stream, void** workspace) {
  if (!T::kPackedOrder || p.cu_seqlens_q == nullptr || p.batch < 2 || p.num_items != p.num_tiles) return {};
  cudaMemPool_t pool = workspace_pool();
  void* ws = nullptr;
  const std::size_t tiles_bytes = (static_cast<std::size_t>(p.num_tiles) * sizeof(int) + 255) / 256 * 256;
  const std::size_t bytes = tiles_bytes + (2 * static_cast<std::size_t>(p.batch) + 1) * sizeof(int);
  if (pool == nullptr || cudaMallocFromPoolAsync(&ws, bytes, pool, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  auto* tiles = static_cast<int*>(ws);
  auto* order = reinterpret_cast<int*>(static_cast<char*>(ws) + tiles_bytes);
  packed_order_kernel<T::kBlockM><<<1, 1024, 0, stream>>>(p.cu_seqlens_q, p.cu_seqlens_k, p.batch, p.heads_q,
                                                           p.num_m_blocks, p.causal, grid, order, tiles);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(ws, stream);
    return fail(LaunchStatus::kCudaError,
                std::string("FLASH_ATTN: cannot order the packed batch: ") + cudaGetErrorString(e));
  }
  *workspace = ws;
  p.packed_tiles = tiles;
  return {};
}

// Plans the tail split for p (uniform tiles only: no causal rows of unequal length, no packed
// batches) and takes its workspace, stream-ordered, from the workspace pool: the partials of each split
// tile's warps, then one zeroed arrival counter per warp. Without a workspace the kernel runs
// whole tiles, which gives the same result.
template <class T>
LaunchStatus plan_split(FlashParams& p, int sm_count, cudaStream_t stream, void** workspace) {
  if (p.causal || p.cu_seqlens_q != nullptr) return {};
  const TailSplit plan = plan_tail_split(p.num_tiles, sm_count, ceil_div(p.seqlen_k, T::kBlockN));
  if (plan.segments == 0) return {};
  const std::int64_t warp_slots = (p.num_tiles - plan.split_begin) * T::kConsumers * 4;
  const std::int64_t partial_bytes = warp_slots * plan.max_pieces * 32 * (T::kPVN / 2 + 4) * 4;
  const std::int64_t counter_bytes = (warp_slots * 4 + 255) / 256 * 256;
  cudaMemPool_t pool = workspace_pool();
  void* ws = nullptr;
  if (pool == nullptr || cudaMallocFromPoolAsync(&ws, counter_bytes + partial_bytes, pool, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  const cudaError_t e = cudaMemsetAsync(ws, 0, counter_bytes, stream);
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(ws, stream);
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cannot clear the split counters: ") +
                                              cudaGetErrorString(e));
  }
  *workspace = ws;
  p.split_begin = static_cast<int>(plan.split_begin);
  p.split_segments = plan.segments;
  p.split_max_pieces = plan.max_pieces;
  p.split_blocks = static_cast<int>(plan.stream_blocks);
  p.num_items = static_cast<int>(plan.items);
  p.split_arrivals = static_cast<int*>(ws);
  p.split_partials = reinterpret_cast<float*>(static_cast<char*>(ws) + counter_bytes);
  return {};
}

// The stream-ordered workspaces of one launch, handed back on the stream when the launch returns
// (after the kernel, when it was launched).
struct LaunchWorkspaces {
  cudaStream_t stream;
  void* split = nullptr;
  void* mask_bits = nullptr;
  void* order = nullptr;
  ~LaunchWorkspaces() {
    for (void* w : {split, mask_bits, order})
      if (w != nullptr) (void)cudaFreeAsync(w, stream);
  }
};

// Builds the TMA maps for `args` and launches the kernel of traits T. kListed: the block-sparse
// launch (args.params.bs_offsets set, tiles checked by the caller), which walks each tile's list
// and is never mask-packed; only that kernel is instantiated.
template <class T, bool kListed = false>
LaunchStatus launch_with_traits(const HopperArgs& args, cudaStream_t stream) {
  constexpr int kD = T::kD;
  constexpr bool kBf16 = T::kBf16;
  FlashParams p = args.params;
  p.out_vec16 = reinterpret_cast<std::uintptr_t>(p.out) % 16 == 0 && p.out_stride_b % 8 == 0 &&
                p.out_stride_s % 8 == 0 && p.out_stride_h % 8 == 0;
  p.num_m_blocks = static_cast<int>(ceil_div(p.seqlen_q, T::kBlockM));
  const std::int64_t tiles = num_tiles(p.batch, p.heads_q, p.num_m_blocks);
  if (tiles >= (std::int64_t{1} << 31))
    return fail(LaunchStatus::kInvalidInput, "FLASH_ATTN: more than 2^31 query tiles; split the batch");
  p.num_tiles = static_cast<int>(tiles);
  if (p.num_tiles == 0) return {};
  p.bs_q_tiles = p.num_m_blocks;
  if (p.bs_stride_h < 0) p.bs_stride_h = p.bs_q_tiles;
  if (p.bs_stride_b < 0) p.bs_stride_b = p.heads_q * p.bs_q_tiles;
  p.split_begin = p.num_tiles;
  p.split_segments = 0;
  p.num_items = p.num_tiles;

  FlashTmaMaps maps{};
  LaunchStatus s = make_map(&maps.q, "q", args.q, kBf16, kD, args.q_rows, p.heads_q, args.tma_batch, args.q_stride,
                            T::kBlockM);
  if (!s.ok()) return s;
  s = make_map(&maps.k, "k", args.k, kBf16, kD, args.kv_rows, p.heads_kv, args.tma_batch, args.k_stride, T::kBlockN);
  if (!s.ok()) return s;
  s = make_map(&maps.v, "v", args.v, kBf16, kD, args.kv_rows, p.heads_kv, args.tma_batch, args.v_stride, T::kBlockN);
  if (!s.ok()) return s;
  // TMA stores need unpacked batches (a packed tile's rows may run into the next sequence, which
  // the map cannot clip) and 16-byte rows; otherwise the kernel stores with its own instructions.
  p.out_tma = false;
  if constexpr (T::kTmaStore) {
    if (p.out_vec16 && p.cu_seqlens_q == nullptr) {
      const std::int64_t out_stride[3] = {p.out_stride_b, p.out_stride_s, p.out_stride_h};
      s = make_map(&maps.o, "out", p.out, kBf16, kD, p.seqlen_q, p.heads_q, p.batch, out_stride, 64);
      if (!s.ok()) return s;
      p.out_tma = true;
    }
  }

  LaunchWorkspaces workspaces{stream};
  void (*kernel)(FlashTmaMaps, FlashParams) = nullptr;
  if constexpr (kListed) {
    if (p.bs_offsets == nullptr || p.bs_indices == nullptr || p.causal || p.cu_seqlens_q != nullptr ||
        p.kv_mask != nullptr)
      return fail(LaunchStatus::kInvalidInput,
                  "FLASH_ATTN block-sparse: needs its key lists and takes no causal, packed or key-masked problem");
    if ((p.row_bits != nullptr) != (p.bs_partial != nullptr))
      return fail(LaunchStatus::kInvalidInput,
                  "FLASH_ATTN dense mask: needs both the mask bits and the partial-block flags, on the 128-key tiling");
    // A list is a tile's walk in positions; the tail's pieces take equal shares of it.
    if (args.tail_split) {
      s = plan_split<T>(p, args.sm_count, stream, &workspaces.split);
      if (!s.ok()) return s;
    }
    kernel = flash_fwd_hopper_kernel<T, KeyWalk::kListed>;
  } else {
    p.bs_offsets = nullptr;
    p.bs_indices = nullptr;
    p.bs_tile_rows = nullptr;
    p.packed_tiles = nullptr;
    if (args.tail_split) {
      s = plan_split<T>(p, args.sm_count, stream, &workspaces.split);
      if (!s.ok()) return s;
    }
    s = compact_mask<T>(p, args, maps, stream, &workspaces.mask_bits);
    if (!s.ok()) return s;
    if (p.kv_count == nullptr) {
      s = pack_mask<T>(p, stream, &workspaces.mask_bits);
      if (!s.ok()) return s;
    }
    s = order_packed<T>(p, persistent_grid(p.num_items, args.sm_count), stream, &workspaces.order);
    if (!s.ok()) return s;
    kernel = p.kv_bits != nullptr ? flash_fwd_hopper_kernel<T, KeyWalk::kLiveBits>
                                  : flash_fwd_hopper_kernel<T, KeyWalk::kEvery>;
    if constexpr (kHasCompactWalk<T>)
      if (p.kv_count != nullptr) kernel = flash_fwd_hopper_kernel<T, KeyWalk::kCompact>;
  }
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: cannot reserve shared memory: ") + cudaGetErrorString(e));
  const int grid = persistent_grid(p.num_items, args.sm_count);
  // A dependent launch: where the kernel before it is one of this call's (the mask's plan, the
  // packed order, a dense mask's lists), its prologue overlaps that kernel's end; it waits for that
  // kernel before it reads or writes global memory.
  e = cuda::launch_maybe_dependent(true, kernel, dim3(grid), dim3(T::kThreads), T::kSmemBytes, stream, maps, p);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(LaunchStatus::kCudaError, std::string("FLASH_ATTN: kernel launch failed: ") + cudaGetErrorString(e));
  return {};
}

}  // namespace hopper_detail
}  // namespace diffattn::flash
