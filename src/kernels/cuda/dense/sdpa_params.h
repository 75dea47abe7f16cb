#pragma once
// Everything a TORCH_SDPA CUDA kernel reads, in plain types: pointers, element strides and sizes.
// Built once per call from an AttentionProblem (sdpa_plan.h); the kernels never see a TensorView.

#include <cstdint>

#include "diffattn/dtype.h"

namespace diffattn::cuda {

struct SdpaParams {
  DType dtype = DType::kBFloat16;  // q, k, v and out share it
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;                    // natural-log LSE, or null
  const std::uint8_t* mask = nullptr;      // bool keep-mask (1 byte per element), or null
  const std::int32_t* cu_seqlens_q = nullptr;  // [batch + 1] when varlen, else null
  const std::int32_t* cu_seqlens_k = nullptr;

  // Element strides. For varlen problems the batch strides are 0 and rows are offset by cu_seqlens.
  std::int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0, q_col_stride = 1;
  std::int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0, k_col_stride = 1;
  std::int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0, v_col_stride = 1;
  std::int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0, o_col_stride = 1;
  // The keep-mask element for (batch, query head, query row, key) is at
  // mask[b*mask_batch_stride + h*mask_head_stride + i*mask_row_stride + j*mask_col_stride];
  // broadcast dimensions (and the rows of a key-padding mask) have stride 0.
  std::int64_t mask_batch_stride = 0, mask_head_stride = 0, mask_row_stride = 0, mask_col_stride = 0;
  std::int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 1;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int seqlen_q = 0;   // max over the batch when varlen
  int seqlen_kv = 0;  // max over the batch when varlen
  int head_dim = 0;
  int head_dim_v = 0;
  float scale = 1.0f;
  float scale_log2 = 1.0f;  // scale * log2(e): exp2 replaces exp
  bool causal = false;      // top-left aligned: key j is visible to query i when j <= i

  // Block-sparse key lists, read by the listed instantiations only (sdpa_block_sparse.cu): the key
  // tiles of query tile t of (b, hq) are bs_indices[bs_offsets[r] .. bs_offsets[r + 1]) with
  // r = (b * heads_q + hq) * query tiles + t (kernels/sparse/block_sparse_layout.h). bs_tile_rows,
  // when set, holds each tile's valid leading rows: keys past them are never attended.
  const std::int32_t* bs_offsets = nullptr;
  const std::int32_t* bs_indices = nullptr;
  const std::int32_t* bs_tile_rows = nullptr;
};

}  // namespace diffattn::cuda
