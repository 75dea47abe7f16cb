#pragma once
// FLASHINFER_ATTN: FlashInfer's batch-prefill semantics (packed ragged batches, boolean masks per
// batch or per head, key padding, causal, GQA, LSE) on diffattn's own kernels, with the QK16/V8
// mode of its quant block (docs/backends/flashinfer.md). The CPU kernel runs CPU views; the CUDA
// kernels are not in this build yet, so CUDA views are refused with what to select instead.

#include <string>
#include <string_view>
#include <vector>

#include "backends/flashinfer_attn/flashinfer_options.h"
#include "diffattn/backend.h"
#include "diffattn/registry.h"

namespace diffattn {

extern const char kFlashInferNoCudaKernels[];

// What descriptor.cc declares, read again by forward: the layer checks shapes, not capabilities.
Capabilities flashinfer_capabilities();
std::vector<std::string> flashinfer_problem_reasons(const ProblemShape& problem);  // beyond the capabilities

class FlashInferAttnBackend final : public Backend {
 public:
  explicit FlashInferAttnBackend(FlashInferMode mode) : mode_(mode) {}
  std::string_view name() const override { return "FLASHINFER_ATTN"; }
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  FlashInferMode mode_;
};

}  // namespace diffattn
