#include "backends/torch_sdpa/torch_sdpa_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/sdpa_cuda.h"

namespace diffattn {

namespace {

// A layer declares its heads and head size; a call with other sizes belongs to another layer.
Status check_matches_layer(const BackendInit& init, const AttentionProblem& problem) {
  const auto heads = problem.q.size(2), kv_heads = problem.k.size(2), head_size = problem.q.size(3);
  if (init.num_heads > 0 && heads != init.num_heads)
    return InvalidInput("TORCH_SDPA was created for " + std::to_string(init.num_heads) + " query heads but q " +
                        problem.q.shape_string() + " has " + std::to_string(heads) +
                        "; create the backend with the layer's head count");
  if (init.num_kv_heads > 0 && kv_heads != init.num_kv_heads)
    return InvalidInput("TORCH_SDPA was created for " + std::to_string(init.num_kv_heads) + " KV heads but k " +
                        problem.k.shape_string() + " has " + std::to_string(kv_heads) +
                        "; create the backend with the layer's KV head count");
  if (init.head_size > 0 && head_size != init.head_size)
    return InvalidInput("TORCH_SDPA was created for head size " + std::to_string(init.head_size) + " but q " +
                        problem.q.shape_string() + " has " + std::to_string(head_size) +
                        "; create the backend with the layer's head size");
  return Status::Ok();
}

}  // namespace

Status TorchSdpaBackend::forward(const AttentionProblem& problem, void* stream) {
  DIFFATTN_RETURN_IF_ERROR(validate_problem(problem));
  DIFFATTN_RETURN_IF_ERROR(check_matches_layer(init_, problem));
  AttentionProblem call = problem;
  if (!call.scale) call.scale = init_.scale;
  call.causal = call.causal || init_.causal;
  if (call.q.device.kind == DeviceKind::kCuda) return run_sdpa_cuda(call, stream);
  return run_sdpa_cpu(call);
}

Result<std::unique_ptr<Backend>> create_torch_sdpa_backend(const BackendInit& init) {
  if (init.num_heads < 0 || init.num_kv_heads < 0 || init.head_size < 0)
    return InvalidInput("TORCH_SDPA needs non-negative head counts and head size, got num_heads=" +
                        std::to_string(init.num_heads) + ", num_kv_heads=" + std::to_string(init.num_kv_heads) +
                        ", head_size=" + std::to_string(init.head_size));
  return std::unique_ptr<Backend>(std::make_unique<TorchSdpaBackend>(init));
}

}  // namespace diffattn
