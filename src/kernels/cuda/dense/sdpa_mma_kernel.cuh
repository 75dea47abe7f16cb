#pragma once
// The tensor-core TORCH_SDPA kernel (fp16/bf16): FlashAttention-2-style tiling with mma.sync
// m16n8k16, ldmatrix, cp.async double buffering of K and V, and an online softmax kept in
// registers with fp32 accumulation. Each warp owns 16 or 32 query rows (one or two m16 tiles that
// share every K and V fragment load); a block walks all key tiles
// of one (batch, head, query tile). Tiles on a mask, causal or sequence boundary take the masked
// path; all others skip the per-element checks.
// kListTile > 0 is the block-sparse walk (FLASH_ATTN's block-sparse kernel on Ampere/Ada): query
// and key tiles of kListTile rows, the CTA's query tile being one list tile, and the CTA walks the
// kBlockN-key blocks of the key tiles its list names (SdpaParams::bs_*), in list order; keys past
// a padded tile's valid rows are masked. Not causal, masked or packed (the host refuses those).

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/dense/mma_utils.cuh"
#include "kernels/cuda/dense/sdpa_params.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {

template <typename T, int kD, int kBlockN, int kWarps, int kMTiles>
struct MmaTile {
  static constexpr int kWarpRows = 16 * kMTiles;  // query rows per warp
  static constexpr int kBlockM = kWarpRows * kWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kPitch = smem_row_pitch(kD);
  static constexpr bool kQInRegs = kD * kMTiles <= 128;  // the rule of tile_config_for_bucket
  static constexpr int kChunks = kD / 8;         // 16-byte chunks per row
  static constexpr int kNTiles = kBlockN / 8;    // n8 blocks of the score tile
  static constexpr int kDTiles = kD / 8;         // n8 blocks of the output tile
  static constexpr int kKSteps = kD / 16;        // k16 steps of Q.K^T
  static constexpr int kPSteps = kBlockN / 16;   // k16 steps of P.V
  static constexpr std::size_t kSmemBytes =
      static_cast<std::size_t>(kBlockM + 4 * kBlockN) * kPitch * sizeof(T);
  static_assert(kD % 16 == 0 && kBlockN % 16 == 0, "tiles are built from m16n8k16 steps");
};

// Copies `kRows` rows of up to kD columns into shared memory; rows >= rows_valid and columns
// >= cols_valid are zero-filled.
template <typename Tile, int kRows, typename T>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, std::int64_t row_stride, int rows_valid,
                                          int cols_valid, int tid) {
  constexpr int kTotal = kRows * Tile::kChunks;
  constexpr int kIters = (kTotal + Tile::kThreads - 1) / Tile::kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int idx = it * Tile::kThreads + tid;
    if (kTotal % Tile::kThreads == 0 || idx < kTotal) {
      const int row = idx / Tile::kChunks;
      const int col = (idx % Tile::kChunks) * 8;
      const bool valid = row < rows_valid && col < cols_valid;
      const T* src = valid ? gmem + row * row_stride + col : gmem;
      cp_async_16(smem + row * Tile::kPitch + col, src, valid);
    }
  }
}

template <typename T, int kD, int kBlockN, int kWarps, int kMTiles, int kListTile = 0>
__global__ void __launch_bounds__(32 * kWarps) sdpa_mma_kernel(const SdpaParams p) {
  using Tile = MmaTile<T, kD, kBlockN, kWarps, kMTiles>;
  constexpr bool kListed = kListTile > 0;
  static_assert(!kListed || (kListTile == Tile::kBlockM && kListTile % kBlockN == 0),
                "a listed CTA is one list tile of query rows, and walks whole key blocks of each listed tile");
  using Mma = MmaOp<T>;
  constexpr int kBlockM = Tile::kBlockM;
  constexpr int kPitch = Tile::kPitch;
  constexpr int kMT = kMTiles;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kPitch;
  T* sV = sK + 2 * kBlockN * kPitch;

  // Longest (causal) query tiles first, so the tail of the grid is short.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int hq = blockIdx.y;
  const int b = blockIdx.z;
  const int hkv = hq / (p.heads_q / p.heads_kv);

  int q_start = 0, kv_start = 0, seqlen_q = p.seqlen_q, seqlen_kv = p.seqlen_kv;
  if (p.cu_seqlens_q != nullptr) {
    q_start = p.cu_seqlens_q[b];
    seqlen_q = p.cu_seqlens_q[b + 1] - q_start;
    kv_start = p.cu_seqlens_k[b];
    seqlen_kv = p.cu_seqlens_k[b + 1] - kv_start;
  }
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + (q_start + m0) * p.q_row_stride +
               hq * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + kv_start * p.k_row_stride +
               hkv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + kv_start * p.v_row_stride +
               hkv * p.v_head_stride;

  // The key blocks this CTA walks: every kBlockN keys up to the causal limit, or the blocks of the
  // listed key tiles. key_start(t) is block t's first key; keys of block t from key_end(t) on are
  // not attended (the sequence's end, or a padded tile's padding rows).
  constexpr int kPerListTile = kListed ? kListTile / kBlockN : 1;
  // The listed walk has neither (the host refuses them): known here, their registers go.
  const bool causal = !kListed && p.causal;
  const bool has_mask = !kListed && p.mask != nullptr;
  const std::int32_t* list = nullptr;
  int n_tiles = 0;
  if constexpr (kListed) {
    const std::int64_t q_tiles = (seqlen_q + kListTile - 1) / kListTile;
    const std::int64_t row = (static_cast<std::int64_t>(b) * p.heads_q + hq) * q_tiles + m0 / kListTile;
    const int begin = p.bs_offsets[row];
    list = p.bs_indices + begin;
    n_tiles = (p.bs_offsets[row + 1] - begin) * kPerListTile;
  } else {
    const int n_end = causal ? min(seqlen_kv, m0 + kBlockM) : seqlen_kv;
    n_tiles = n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;
  }
  auto key_start = [&](int t) {
    if constexpr (kListed) return list[t / kPerListTile] * kListTile + (t % kPerListTile) * kBlockN;
    else return t * kBlockN;
  };
  auto key_end = [&](int t) {
    if constexpr (kListed) {
      const int tile = list[t / kPerListTile];
      const int rows = p.bs_tile_rows != nullptr ? p.bs_tile_rows[tile] : kListTile;
      return min(seqlen_kv, tile * kListTile + rows);
    } else {
      return seqlen_kv;
    }
  };

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  load_tile<Tile, kBlockM>(sQ, q, p.q_row_stride, seqlen_q - m0, p.head_dim, tid);
  if (n_tiles > 0)
    load_tile<Tile, kBlockN>(sK, k + key_start(0) * p.k_row_stride, p.k_row_stride, key_end(0) - key_start(0),
                             p.head_dim, tid);
  cp_async_commit();
  if (n_tiles > 0)
    load_tile<Tile, kBlockN>(sV, v + key_start(0) * p.v_row_stride, p.v_row_stride, key_end(0) - key_start(0),
                             p.head_dim_v, tid);
  cp_async_commit();

  float o[kMT][Tile::kDTiles][4];
  float row_max[kMT][2], row_sum[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int d = 0; d < Tile::kDTiles; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  std::uint32_t qf[Tile::kQInRegs ? kMT : 1][Tile::kQInRegs ? Tile::kKSteps : 1][4];

  const int warp_row0 = warp * Tile::kWarpRows;  // first row of this warp in the block
  const T* sQ_warp = sQ + (warp_row0 + lane % 16) * kPitch + (lane / 16) * 8;
  const float sl2 = p.scale_log2;
  // This thread's rows of the keep-mask (null: no mask, or a row past the sequence end).
  const std::uint8_t* mask_rows[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = m0 + warp_row0 + mt * 16 + lane / 4 + 8 * r;
      mask_rows[mt][r] = has_mask && i < seqlen_q
                             ? p.mask + b * p.mask_batch_stride + hq * p.mask_head_stride + i * p.mask_row_stride
                             : nullptr;
    }
  }

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t & 1;
    const T* sKs = sK + stage * kBlockN * kPitch;
    const T* sVs = sV + stage * kBlockN * kPitch;
    cp_async_wait<1>();
    __syncthreads();
    if constexpr (Tile::kQInRegs) {
      if (t == 0) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int kk = 0; kk < Tile::kKSteps; ++kk) ldmatrix_x4(qf[mt][kk], sQ_warp + mt * 16 * kPitch + kk * 16);
      }
    }
    if (t + 1 < n_tiles) {
      load_tile<Tile, kBlockN>(sK + (stage ^ 1) * kBlockN * kPitch, k + key_start(t + 1) * p.k_row_stride,
                               p.k_row_stride, key_end(t + 1) - key_start(t + 1), p.head_dim, tid);
    }
    cp_async_commit();

    float s[kMT][Tile::kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < Tile::kNTiles; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < Tile::kKSteps; ++kk) {
      std::uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Tile::kQInRegs) {
          a[mt][0] = qf[mt][kk][0]; a[mt][1] = qf[mt][kk][1]; a[mt][2] = qf[mt][kk][2]; a[mt][3] = qf[mt][kk][3];
        } else {
          ldmatrix_x4(a[mt], sQ_warp + mt * 16 * kPitch + kk * 16);
        }
      }
#pragma unroll
      for (int n = 0; n < Tile::kNTiles; n += 2) {
        std::uint32_t bk[4];
        const int mat = lane / 8;
        ldmatrix_x4(bk, sKs + (n * 8 + (mat / 2) * 8 + lane % 8) * kPitch + kk * 16 + (mat % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(s[mt][n], a[mt], bk[0], bk[1]);
          Mma::run(s[mt][n + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    const int n0 = key_start(t);
    const int n_limit = key_end(t);
    const bool needs_mask = has_mask || n0 + kBlockN > n_limit || (causal && n0 + kBlockN - 1 > m0);
    if (needs_mask) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < Tile::kNTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = m0 + warp_row0 + mt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
            const int j = n0 + n * 8 + (lane % 4) * 2 + (e & 1);
            const std::uint8_t* mask_row = mask_rows[mt][e / 2];
            bool keep = j < n_limit && !(causal && j > i);
            if (keep && mask_row != nullptr) keep = mask_row[j * p.mask_col_stride] != 0;
            if (!keep) s[mt][n][e] = -INFINITY;
          }
    }

    // Online softmax: rescale the running output by exp2(m_old - m_new), scale folded in.
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_max[mt][r];
#pragma unroll
        for (int n = 0; n < Tile::kNTiles; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_scaled = mx == -INFINITY ? 0.f : mx * sl2;
        const float alpha = fast_exp2(row_max[mt][r] * sl2 - m_scaled);
        row_max[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < Tile::kNTiles; ++n) {
          s[mt][n][2 * r] = fast_exp2(fmaf(s[mt][n][2 * r], sl2, -m_scaled));
          s[mt][n][2 * r + 1] = fast_exp2(fmaf(s[mt][n][2 * r + 1], sl2, -m_scaled));
          sum += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
        }
        row_sum[mt][r] = row_sum[mt][r] * alpha + sum;
#pragma unroll
        for (int d = 0; d < Tile::kDTiles; ++d) {
          o[mt][d][2 * r] *= alpha;
          o[mt][d][2 * r + 1] *= alpha;
        }
      }

    std::uint32_t pf[kMT][Tile::kPSteps][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < Tile::kPSteps; ++kk) {
        pf[mt][kk][0] = Mma::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pf[mt][kk][1] = Mma::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pf[mt][kk][2] = Mma::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pf[mt][kk][3] = Mma::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }

    cp_async_wait<1>();
    __syncthreads();
    if (t + 1 < n_tiles) {
      load_tile<Tile, kBlockN>(sV + (stage ^ 1) * kBlockN * kPitch, v + key_start(t + 1) * p.v_row_stride,
                               p.v_row_stride, key_end(t + 1) - key_start(t + 1), p.head_dim_v, tid);
    }
    cp_async_commit();

#pragma unroll
    for (int kk = 0; kk < Tile::kPSteps; ++kk) {
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; d += 2) {
        std::uint32_t bv[4];
        const int mat = lane / 8;
        ldmatrix_x4_trans(bv, sVs + (kk * 16 + (mat % 2) * 8 + lane % 8) * kPitch + (d + mat / 2) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(o[mt][d], pf[mt][kk], bv[0], bv[1]);
          Mma::run(o[mt][d + 1], pf[mt][kk], bv[2], bv[3]);
        }
      }
    }
  }

  // Epilogue: normalise, stage the warp's rows in its own rows of sQ, write 16-byte chunks.
  cp_async_wait<0>();
  __syncthreads();
  T* sO = sQ + warp_row0 * kPitch;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = row_sum[mt][r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const float inv = total > 0.f ? 1.f / total : 0.f;
      const int row = mt * 16 + lane / 4 + 8 * r;
#pragma unroll
      for (int d = 0; d < Tile::kDTiles; ++d) {
        *reinterpret_cast<std::uint32_t*>(sO + row * kPitch + d * 8 + (lane % 4) * 2) =
            Mma::pack(o[mt][d][2 * r] * inv, o[mt][d][2 * r + 1] * inv);
      }
      const int i = m0 + warp_row0 + row;
      if (p.lse != nullptr && lane % 4 == 0 && i < seqlen_q) {
        const float lse =
            total > 0.f ? (row_max[mt][r] * sl2 + __log2f(total)) * 0.69314718055994531f : -INFINITY;
        p.lse[b * p.lse_batch_stride + hq * p.lse_head_stride + (q_start + i) * p.lse_row_stride] = lse;
      }
    }
  __syncwarp();
  T* out = static_cast<T*>(p.out) + b * p.o_batch_stride + (q_start + m0 + warp_row0) * p.o_row_stride +
           hq * p.o_head_stride;
  const int rows_valid = seqlen_q - m0 - warp_row0;
#pragma unroll
  for (int idx = lane; idx < Tile::kWarpRows * Tile::kChunks; idx += 32) {
    const int row = idx / Tile::kChunks;
    const int col = (idx % Tile::kChunks) * 8;
    if (row < rows_valid && col < p.head_dim_v) {
      *reinterpret_cast<uint4*>(out + row * p.o_row_stride + col) =
          *reinterpret_cast<const uint4*>(sO + row * kPitch + col);
    }
  }
}

}  // namespace diffattn::cuda
