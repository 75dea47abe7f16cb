#pragma once
// FASTVIDEO_VSA (video sparse attention, FastVideo) on the CPU. Tokens are reordered into padded
// 4x4x4 cubes (kernels/sparse/vsa_cubes.h); the coarse branch mean-pools Q, K and V over each
// cube's valid tokens and attends over cubes (float64 sums); each query cube keeps the `topk` key
// cubes of highest coarse score (ties: the lower cube index); the fine branch is block-sparse
// attention over those cubes by the dense CPU kernel (run_block_sparse_cpu). The result is
// fine + coarse * gate with a gate, else fine alone, so that topk = every cube is dense attention.

#include <cstdint>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/block_sparse_layout.h"

namespace diffattn {

// `problem` has passed the layer's checks, lives on the CPU and carries its video geometry; it has
// no mask, cu_seqlens, causal flag or lse. `topk` must be in 1..cubes (check_vsa_topk). Nothing is
// written to out unless the call succeeds. `selected`, when given, receives the chosen key cubes
// (query and key tiles are cubes, in cube order).
Status run_fastvideo_vsa_cpu(const AttentionProblem& problem, std::int64_t topk,
                             BlockSparseLayout* selected = nullptr);

}  // namespace diffattn
