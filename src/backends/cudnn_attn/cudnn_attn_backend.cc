// CUDNN_ATTN: cuDNN's fused flash attention through the cuDNN graph API.

#include <memory>
#include <string>
#include <vector>

#include "backends/cudnn_attn/cudnn_attn_checks.h"
#include "backends/cudnn_attn/cudnn_sdpa_runner.h"
#include "backends/factories.h"
#include "common/reason.h"
#include "kernels/cuda/sdpa_cuda.h"

namespace diffattn {
namespace {

class CudnnAttnBackend final : public Backend {
 public:
  explicit CudnnAttnBackend(bool explicit_choice) : explicit_choice_(explicit_choice) {}

  std::string_view name() const override { return "CUDNN_ATTN"; }

  Status forward(const AttentionProblem& problem, void* stream) override {
    const ProblemShape shape = problem.shape();
    // cuDNN FMHA has no kernel for one key or none; an automatic choice runs TORCH_SDPA's kernel.
    if (!cudnn_attn::check_kv_length_above_one(shape.seqlen_kv) || explicit_choice_) {
      std::vector<std::string> reasons = cudnn_attn::problem_reasons(shape);
      if (auto packed = cudnn_attn::check_packed_offsets_fit_int32(problem)) reasons.push_back(*packed);
      if (!reasons.empty()) return Unsupported(reasons_text(reasons));
      return cudnn_attn::run_cudnn_sdpa(problem, stream);
    }
    return run_sdpa_cuda(problem, stream);
  }

 private:
  bool explicit_choice_;
};

}  // namespace

Result<std::unique_ptr<Backend>> create_cudnn_attn_backend(const BackendInit& init) {
  if (!DIFFATTN_HAVE_CUDA) {
    return Unavailable("CUDNN_ATTN needs a diffattn build with CUDA and cuDNN 9 (nvcc was not found when this "
                       "one was built); select TORCH_SDPA or rebuild with the CUDA toolkit installed");
  }
  return std::unique_ptr<Backend>(std::make_unique<CudnnAttnBackend>(init.explicit_choice));
}

}  // namespace diffattn
