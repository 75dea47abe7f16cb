#include "backends/flash_attn/flash_attn_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"

namespace diffattn {

namespace {

// A layer declares its heads and head size; a call with other sizes belongs to another layer.
Status check_matches_layer(const BackendInit& init, const AttentionProblem& problem) {
  const auto heads = problem.q.size(2), kv_heads = problem.k.size(2), head_size = problem.q.size(3);
  if (init.num_heads > 0 && heads != init.num_heads)
    return InvalidInput("FLASH_ATTN was created for " + std::to_string(init.num_heads) + " query heads but q " +
                        problem.q.shape_string() + " has " + std::to_string(heads) +
                        "; create the backend with the layer's head count");
  if (init.num_kv_heads > 0 && kv_heads != init.num_kv_heads)
    return InvalidInput("FLASH_ATTN was created for " + std::to_string(init.num_kv_heads) + " KV heads but k " +
                        problem.k.shape_string() + " has " + std::to_string(kv_heads) +
                        "; create the backend with the layer's KV head count");
  if (init.head_size > 0 && head_size != init.head_size)
    return InvalidInput("FLASH_ATTN was created for head size " + std::to_string(init.head_size) + " but q " +
                        problem.q.shape_string() + " has " + std::to_string(head_size) +
                        "; create the backend with the layer's head size");
  return Status::Ok();
}

}  // namespace

Status FlashAttnBackend::forward(const AttentionProblem& problem, void* stream) {
  DIFFATTN_RETURN_IF_ERROR(validate_problem(problem));
  DIFFATTN_RETURN_IF_ERROR(check_matches_layer(init_, problem));
  AttentionProblem call = problem;
  if (!call.scale) call.scale = init_.scale;
  call.causal = call.causal || init_.causal;
  return flash::run_flash_attn_cuda(call, stream);
}

Result<std::unique_ptr<Backend>> create_flash_attn_backend(const BackendInit& init) {
#if !DIFFATTN_HAVE_CUDA
  (void)init;
  return Unavailable("FLASH_ATTN needs diffattn's CUDA kernels, and this build has none (nvcc was not found when it "
                     "was built); rebuild with the CUDA toolkit installed or select TORCH_SDPA");
#else
  if (init.num_heads < 0 || init.num_kv_heads < 0 || init.head_size < 0)
    return InvalidInput("FLASH_ATTN needs non-negative head counts and head size, got num_heads=" +
                        std::to_string(init.num_heads) + ", num_kv_heads=" + std::to_string(init.num_kv_heads) +
                        ", head_size=" + std::to_string(init.head_size));
  if (init.head_size > 0 && !flash::is_supported_head_size(init.head_size))
    return Unsupported("FLASH_ATTN has no kernel for head size " + std::to_string(init.head_size) + " (compiled: " +
                       flash::supported_head_sizes_text() + "); select TORCH_SDPA for this layer");
  return std::unique_ptr<Backend>(std::make_unique<FlashAttnBackend>(init));
#endif
}

}  // namespace diffattn
