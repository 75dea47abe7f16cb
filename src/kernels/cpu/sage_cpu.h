#pragma once
// SAGE_ATTN on the CPU: INT8 Q*K^T (K smoothed by its mean) and FP8 or input-dtype P*V, the same
// arithmetic as the CUDA kernels (kernels/sage/sage_quant.h), multithreaded over (batch, head,
// query block). It is SAGE_ATTN for CPU callers and the oracle the GPU kernels are tested against.

#include <optional>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/sage/sage_quant.h"
#include "kernels/sparse/block_sparse_layout.h"

namespace diffattn::sage {

// Which implementation runs. By default the tile kernel (kernels/cpu/sage_tile_impl.h) of the
// fastest instruction set here (DIFFATTN_CPU_ISA may name a slower one), or of `isa`; with
// `reference`, the plain loops that state the arithmetic, the tile kernel's oracle. Both compute the
// same quantized operands, scores and roundings of P; their sums differ in order only. Head sizes
// the tile kernel does not take (a value head size not a multiple of 16, or a head size past 1024)
// run the plain loops.
struct SageCpuKernel {
  bool reference = false;
  std::optional<CpuIsa> isa;
};

// `problem` has passed the layer's checks and lives on the CPU. Refuses (kUnsupported) dense masks,
// packed batches, dtypes other than fp16/bf16 and a value head size other than the query's, and (kInvalidInput) inputs whose quantization
// scales leave float32's range, before anything is written. Fully masked rows give 0 and LSE -inf.
// QkMode::k16 is the arithmetic of FLASHINFER_ATTN's QK16/V8 CUDA kernel (fp32 scores of the 16-bit
// q and k, then this P*V), its oracle in the GPU tests.
Status run_sage_attn_cpu(const AttentionProblem& problem, PvMode pv, QkMode qk = QkMode::kInt8,
                         SageCpuKernel which = {});

// The same arithmetic over block-sparse key lists (kernels/sparse/block_sparse_layout.h) of
// kKvBlock x kKvBlock tiles: the quantization over the whole sequences, then each query tile's
// online softmax over its listed key blocks in list order, keys past a padded tile's valid rows
// dropped (rows past them are not written). RAINFUSION_ATTN's 8-bit fine pass on the CPU and the
// oracle of run_sage_block_sparse_cuda. Not causal, masked or packed; the layout is checked first.
Status run_sage_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout, PvMode pv,
                                 SageCpuKernel which = {});

}  // namespace diffattn::sage
