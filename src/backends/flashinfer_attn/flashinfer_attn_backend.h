#pragma once
// FLASHINFER_ATTN: FlashInfer's batch-prefill semantics (packed ragged batches, boolean masks per
// batch or per head, key padding, causal, GQA, LSE) on diffattn's own kernels, with the QK16/V8
// mode of its quant block (docs/backends/flashinfer.md). CPU views run the CPU kernels; CUDA views
// run FLASH_ATTN's kernels (kernels/cuda/flash/run_flash_attn.h, run_masked_cuda), dense masks on
// the Hopper kernel's listed walk. The QK16/V8 mode has no CUDA kernel yet and is refused there.

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
