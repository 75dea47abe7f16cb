#pragma once
// RAINFUSION_ATTN: training-free block-sparse video attention (RainFusion, arXiv 2505.21036 and
// 2512.24086) configured by the block_sparse block: the CPU implementation for CPU views
// (kernels/cpu/rainfusion_cpu.h), the CUDA path (sm_80 to sm_90, float16 and bfloat16;
// kernels/cuda/sparse/rainfusion_cuda.h) for CUDA views. Calls inside the dense step window, on
// skip_layers, or at sparsity 0 run exact dense attention: TORCH_SDPA's CPU kernel, or FLASH_ATTN's.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "diffattn/backend.h"
#include "diffattn/registry.h"

namespace diffattn {

// The one declaration of what RAINFUSION_ATTN runs: the descriptor publishes it and the attention
// layer holds every call to it.
Capabilities rainfusion_attn_capabilities();

// Why a call runs dense under `options` ("step 3 < start_step 5", ...), nullopt when it runs
// sparse; an error when the window or skip_layers need a step or layer index the call lacks.
Result<std::optional<std::string>> rainfusion_dense_reason(const BlockSparseSpec& options,
                                                           const std::optional<DenoisingStep>& step);

class RainfusionAttnBackend final : public Backend {
 public:
  RainfusionAttnBackend(BlockSparseSpec options, std::string role) : options_(std::move(options)), role_(std::move(role)) {}
  std::string_view name() const override { return "RAINFUSION_ATTN"; }
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  BlockSparseSpec options_;
  std::string role_;
  std::mutex logged_mu_;
  std::set<std::pair<std::int64_t, std::int64_t>> logged_;  // (layer, step) whose plan was logged
};

Result<std::unique_ptr<Backend>> create_rainfusion_attn_backend(const BackendInit& init);
Status validate_rainfusion_attn_options(const AttentionSpec& spec);

}  // namespace diffattn
