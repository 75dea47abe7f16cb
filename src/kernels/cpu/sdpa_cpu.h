#pragma once
// TORCH_SDPA on the CPU: exact attention by tiled online softmax with fp32 accumulation,
// multithreaded over (batch, head, query block), vectorised for the CPU it runs on.

#include <cstdint>
#include <optional>
#include <string_view>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/sparse/block_sparse_layout.h"

namespace diffattn {

enum class CpuIsa { kPortable, kAvx2, kAvx512 };

std::string_view cpu_isa_name(CpuIsa isa);  // "portable", "avx2", "avx512"
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);
// Whether this build holds the kernel for `isa` and this CPU can run it.
bool cpu_isa_available(CpuIsa isa);
// The fastest available kernel, unless DIFFATTN_CPU_ISA names a slower available one.
CpuIsa default_cpu_isa();

// `problem` has passed validate_problem and lives on the CPU. Fully masked rows (and rows with no
// keys) produce zeros and LSE -inf. Inputs whose scores or output sums could pass float32's range
// are refused with kInvalidInput (check_scores_fit_float32) instead of returning zeros.
Status run_sdpa_cpu(const AttentionProblem& problem);
// The same with a chosen kernel; kUnsupported when this CPU or build cannot run it.
Status run_sdpa_cpu(const AttentionProblem& problem, CpuIsa isa);

// Block-sparse attention by the same kernel: each query tile of `layout` attends only to its listed
// key tiles (rows whose tiles are all dropped give zeros and LSE -inf). With every tile listed and
// k_tile 64 (the dense key tile) the result is run_sdpa_cpu's, bit for bit. The layout must match
// the problem (check_block_sparse_layout); packed batches (cu_seqlens) are refused. With tile_rows,
// the padding rows of out and lse are left as they were.
Status run_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout);
Status run_block_sparse_cpu(const AttentionProblem& problem, const BlockSparseLayout& layout, CpuIsa isa);

// V as FP8 E4M3 in place of problem.v's values: codes indexed like a [B, Skv, Hkv, Dv] tensor with
// `strides`, and one scale per (sequence, kv head, channel), [sequences, Hkv, Dv] (sequences: B, or
// the packed batch's). The output is softmax(Q K^T) (codes) times the scales (kernels/cpu/fp8_v_cpu.h).
struct Fp8ValuesView {
  const std::uint8_t* codes = nullptr;
  std::int64_t strides[4] = {};
  const float* scales = nullptr;
};
Status run_sdpa_cpu(const AttentionProblem& problem, const Fp8ValuesView& v, CpuIsa isa);

}  // namespace diffattn
