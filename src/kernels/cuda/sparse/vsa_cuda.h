#pragma once
// FASTVIDEO_VSA on CUDA views (sm_80 to sm_90): the CPU path's algorithm (kernels/cpu/vsa_cpu.h) on the
// caller's stream. Q, K and V are gathered into padded 4x4x4 cube order and pooled per cube; the
// coarse branch attends over cube means and picks each query cube's top-k key cubes (float32
// scores: near-ties may order differently from the CPU's float64); the fine branch is the
// block-sparse kernel over those cubes (64 x 64 tiles, each cube's valid tokens as its tile rows;
// Hopper's on sm_90, the mma.sync walk on sm_80..sm_89, or that walk anywhere when `kernel` asks);
// out = fine + coarse * gate with a gate, else fine.

#include <cstdint>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sparse/block_sparse_layout.h"

namespace diffattn {

// `problem` has passed the layer's checks and lives on a CUDA device: float16 or bfloat16, head
// sizes 64 or 128 with D = Dv, its video geometry without text tokens, no mask, cu_seqlens, causal
// flag or lse; `topk` in 1..cubes (check_vsa_topk). `stream` is a cudaStream_t; every launch and
// allocation is ordered on it, with no host copy unless `selected` is given, so a call can be
// captured into a CUDA graph. Everything that can be checked is checked before anything runs, and
// out is written only after every earlier step was launched. `selected`, when given, receives the
// chosen key cubes (query and key tiles are cubes, tile_rows their valid tokens); filling it waits
// for the stream. `coarse_score_bytes` bounds the coarse branch's scores per pass over the heads
// (0: vsa::kCoarseScoreBytes; tests pass less to run a pass per head). In a build without CUDA
// this returns kUnavailable.
Status run_fastvideo_vsa_cuda(const AttentionProblem& problem, std::int64_t topk, void* stream,
                              BlockSparseLayout* selected = nullptr,
                              flash::BlockSparseKernel kernel = flash::BlockSparseKernel::kForDevice,
                              std::int64_t coarse_score_bytes = 0);

}  // namespace diffattn
