#pragma once
// The buffers of ParallelAttention for one call shape (private to the parallel layer).

#include <vector>

#include "parallel/device_memory.h"
#include "parallel/parallel_attention.h"

namespace diffattn::parallel {

// Buffers of one call shape, kept while calls keep that shape.
struct ParallelAttention::Workspace {
  ParallelCallShape shape;
  SequencePlan plan;
  std::int64_t text = 0, seq_q = 0, img0 = 0, text0 = 0;  // Sq = text + chunk; where image and text rows start
  std::int64_t hq = 0, hkv = 0, d = 0, dv = 0;            // per rank
  DeviceBuffer send_q, send_k, send_v, send_o, recv, send_t, recv_t;
  DeviceBuffer q_attn, k_attn, v_attn, out_attn, mask;    // ring 1: [text; image] keys, mask [B, text + C]
  DeviceBuffer kv[2], text_kv, acc, acc_lse, neg_inf, part, part_lse, block_masks;  // ring > 1
  bool needs_mask = false;
  std::vector<bool> block_masked;  // ring block i holds padded keys
};

}  // namespace diffattn::parallel
