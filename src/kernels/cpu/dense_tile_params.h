#pragma once
// Plain data handed from the dispatcher to the per-instruction-set tile kernels: raw pointers,
// element strides and sizes, so the kernels need nothing from the rest of the library.

#include <cstddef>
#include <cstdint>

namespace diffattn::cpu {

enum class ElemType : std::uint8_t { kF32, kF16, kBF16 };

struct DenseTileParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;                 // nullptr: not requested
  const std::uint8_t* mask = nullptr;   // nullptr: no mask; nonzero keeps the key
  // nullptr: V is in `elem`. Otherwise V holds FP8 E4M3 codes (one byte each, at v_stride) and this
  // their scales, [sequence, kv head, channel]: P*V runs on the codes and the output row is scaled.
  const float* v_scale = nullptr;
  ElemType elem = ElemType::kF32;

  // Element strides in [batch, seq, head, dim] order (lse: [batch, head, seq]).
  std::int64_t q_stride[4] = {}, k_stride[4] = {}, v_stride[4] = {}, out_stride[4] = {};
  std::int64_t lse_stride[3] = {};
  // Mask strides in [batch, head, query, key] order; broadcast dimensions have stride 0, so a
  // key-padding mask [B, Skv] is {s0, 0, 0, s1}.
  std::int64_t mask_stride[4] = {};

  std::int64_t heads_q = 0, heads_kv = 0, head_size = 0, head_size_v = 0;
  float scale_log2 = 0.0f;  // softmax scale times log2(e): the kernels work in base 2
  bool causal = false;

  int block_q = 128;  // query rows per work item
  int block_k = 64;   // keys per tile

  // Block-sparse attention (kernels/sparse/block_sparse_layout.h): query tile t of (batch b, head h)
  // visits the key tiles sparse_indices[sparse_offsets[r]] .. [sparse_offsets[r + 1] - 1], ascending,
  // with r = (b * heads_q + h) * sparse_q_tiles + t; a query tile is one work item of block_q rows
  // and key tile j holds keys [j * block_k, (j + 1) * block_k). nullptr: every key tile.
  const std::int32_t* sparse_offsets = nullptr;
  const std::int32_t* sparse_indices = nullptr;
  std::int64_t sparse_q_tiles = 0;
  const std::int32_t* sparse_tile_rows = nullptr;  // nullptr: every key of a tile is valid
};

// One unit of parallel work: a block of query rows of one head of one sequence.
struct WorkItem {
  std::int64_t batch = 0;      // index into the batch dimension of q/k/v/out/lse
  std::int64_t mask_batch = 0; // the sequence: index into the mask's batch dimension and v_scale's
  std::int64_t head = 0;       // query head
  std::int64_t q_begin = 0;    // first query row (sequence index in q/out)
  std::int64_t q_rows = 0;
  std::int64_t q_local = 0;    // position of q_begin within its sequence (causal, dense mask)
  std::int64_t kv_begin = 0;   // first key row of the sequence in k/v
  std::int64_t kv_len = 0;     // keys of the sequence
};

// The entry points of one instruction-set build of the kernel.
struct TileKernel {
  const char* isa = "portable";
  std::size_t (*workspace_floats)(const DenseTileParams&) = nullptr;
  // `workspace` holds workspace_floats(params) floats, 64-byte aligned, owned by one thread.
  void (*run)(const DenseTileParams&, const WorkItem&, float* workspace) = nullptr;
};

TileKernel portable_tile_kernel();
TileKernel avx2_tile_kernel();
TileKernel avx512_tile_kernel();

}  // namespace diffattn::cpu
