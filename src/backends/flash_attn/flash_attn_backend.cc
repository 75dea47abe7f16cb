#include "backends/flash_attn/flash_attn_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/run_flash_attn.h"

namespace diffattn {

// The layer checked and completed the call (Attention::forward); the kernels check what they need.
Status FlashAttnBackend::forward(const AttentionProblem& problem, void* stream) {
  return flash::run_flash_attn_cuda(problem, stream);
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
