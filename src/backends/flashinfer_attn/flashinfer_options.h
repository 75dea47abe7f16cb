#pragma once
// FLASHINFER_ATTN's options: its quant block (dtype_qk, dtype_vo, flashinfer_backend) read into a
// mode, and the checks of those values. Config-time checks of the block (dtype names, block sizes)
// are config/quant_block.cc's; this is the backend's value set and what it means here.

#include <optional>
#include <string>

#include "diffattn/config.h"
#include "diffattn/dtype.h"
#include "diffattn/platform.h"
#include "diffattn/status.h"

namespace diffattn {

// quant.flashinfer_backend. On CUDA fa2 is the Ampere-class kernel (sm_80+), fa3 the Hopper one
// (sm_90), auto picks by architecture; cute-dsl and trtllm-gen are FlashInfer's Blackwell kernels.
// On the CPU fa2, fa3 and auto all run the CPU kernel.
enum class FlashInferVariant { kAuto, kFa2, kFa3, kCuteDsl, kTrtllmGen };

struct FlashInferMode {
  FlashInferVariant variant = FlashInferVariant::kAuto;
  bool fp8_v = false;                  // QK16/V8: quant.dtype_vo == "fp8_e4m3"
  std::optional<DType> dtype_qk;       // the 16-bit dtype q and k must have, when set
  std::optional<DType> dtype_vo;       // the 16-bit dtype v must have, when set (not fp8_e4m3)
};

// Value sets of the seeds' FlashInfer backend: dtype_qk in {float16, bfloat16}, dtype_vo in
// {float16, bfloat16, fp8_e4m3}, flashinfer_backend in {auto, fa2, fa3, cute-dsl, trtllm-gen};
// no extra keys.
Status validate_flashinfer_options(const AttentionSpec& spec);

// The mode of a validated spec (the defaults when there is none, as for a platform default).
FlashInferMode flashinfer_mode(const std::optional<AttentionSpec>& spec);

// Whether `variant` can run on `platform`: cute-dsl needs Blackwell (compute capability 10.0 or
// newer), trtllm-gen datacenter Blackwell (10.x); on CUDA fa3 needs Hopper (9.x), fa2 sm_80 or newer.
Status check_variant_on_platform(FlashInferVariant variant, const PlatformInfo& platform);

}  // namespace diffattn
