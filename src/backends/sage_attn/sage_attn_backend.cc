#include "backends/sage_attn/sage_attn_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "backends/sage_attn/sage_options.h"
#include "kernels/cpu/sage_cpu.h"
#include "kernels/cuda/sage/run_sage_attn.h"

namespace diffattn {

// The layer checked and completed the call (Attention::forward); the kernels check what they need.
Status SageAttnBackend::forward(const AttentionProblem& problem, void* stream) {
  if (problem.q.device.kind == DeviceKind::kCuda) return sage::run_sage_attn_cuda(problem, pv_, stream);
  return sage::run_sage_attn_cpu(problem, pv_);
}

Result<std::unique_ptr<Backend>> create_sage_attn_backend(const BackendInit& init) {
  if (init.num_heads < 0 || init.num_kv_heads < 0 || init.head_size < 0)
    return InvalidInput("SAGE_ATTN needs non-negative head counts and head size, got num_heads=" +
                        std::to_string(init.num_heads) + ", num_kv_heads=" + std::to_string(init.num_kv_heads) +
                        ", head_size=" + std::to_string(init.head_size));
  if (init.spec) DIFFATTN_RETURN_IF_ERROR(validate_sage_options(*init.spec));
  DIFFATTN_ASSIGN_OR_RETURN(const sage::PvMode pv, sage_pv_mode(init.spec, init.platform));
  return std::unique_ptr<Backend>(std::make_unique<SageAttnBackend>(pv));
}

}  // namespace diffattn
