#pragma once
// SAGE_ATTN: diffattn's 8-bit attention (INT8 Q*K^T with K smoothing, FP8 or 16-bit P*V), on the
// CPU implementation for CPU views and the CUDA kernels for CUDA views.

#include <string_view>

#include "diffattn/backend.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn {

class SageAttnBackend final : public Backend {
 public:
  explicit SageAttnBackend(sage::PvMode pv) : pv_(pv) {}
  std::string_view name() const override { return "SAGE_ATTN"; }
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  sage::PvMode pv_;
};

}  // namespace diffattn
