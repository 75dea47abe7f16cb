#include "backends/torch_sdpa/torch_sdpa_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/sdpa_cuda.h"

namespace diffattn {

// The layer checked and completed the call (Attention::forward).
Status TorchSdpaBackend::forward(const AttentionProblem& problem, void* stream) {
  if (problem.q.device.kind == DeviceKind::kCuda) return run_sdpa_cuda(problem, stream);
  return run_sdpa_cpu(problem);
}

Result<std::unique_ptr<Backend>> create_torch_sdpa_backend(const BackendInit& init) {
  if (init.num_heads < 0 || init.num_kv_heads < 0 || init.head_size < 0)
    return InvalidInput("TORCH_SDPA needs non-negative head counts and head size, got num_heads=" +
                        std::to_string(init.num_heads) + ", num_kv_heads=" + std::to_string(init.num_kv_heads) +
                        ", head_size=" + std::to_string(init.head_size));
  return std::unique_ptr<Backend>(std::make_unique<TorchSdpaBackend>(init));
}

}  // namespace diffattn
