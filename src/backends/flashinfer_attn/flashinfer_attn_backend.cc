#include "backends/flashinfer_attn/flashinfer_attn_backend.h"

#include <memory>
#include <string>

#include "backends/factories.h"
#include "kernels/cpu/fp8_v_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sage/run_sage_attn.h"

namespace diffattn {

const char kFlashInferNoCudaKernels[] =
    "FLASHINFER_ATTN's CUDA kernels are not part of this diffattn build for this GPU (they are FLASH_ATTN's, built "
    "for sm_80-sm_90); run it on CPU tensors, or select CUDNN_ATTN or TORCH_SDPA instead.";

namespace {

// quant.dtype_qk / dtype_vo name the 16-bit dtype an operand is computed in; the kernels take the
// call's dtype, so a call in another dtype is refused rather than silently run in it.
Status check_operand_dtype(const std::optional<DType>& wanted, DType got, const char* field, const char* operands) {
  if (!wanted || *wanted == got) return Status::Ok();
  return InvalidInput("FLASHINFER_ATTN has quant." + std::string(field) + "=" + std::string(dtype_name(*wanted)) +
                      " but " + operands + " are " + std::string(dtype_name(got)) + "; pass " + operands + " as " +
                      std::string(dtype_name(*wanted)) + " or change quant." + field);
}

// QK16/V8 on CUDA runs P*V on FP8 tensor cores: the Hopper kernel on sm_90 ('auto', 'fa3'), the
// Ada-class mma.sync kernel on sm_89 ('auto', 'fa2') and, with 'fa2', on sm_90 too; GPUs without
// FP8 tensor cores (sm_80-sm_87) are refused at creation.
Status check_fp8_v_on_platform(const FlashInferMode& mode, const PlatformInfo& platform) {
  if (!mode.fp8_v || platform.kind != PlatformKind::kCuda) return Status::Ok();
  if (platform.capability() < 89)
    return Unsupported("FLASHINFER_ATTN's QK16/V8 mode (quant.dtype_vo=fp8_e4m3) runs P*V on FP8 tensor cores (sm_89 "
                       "and newer), which " + platform.sm_string() + " does not have. Leave dtype_vo unset for 16-bit "
                       "V, or run on CPU tensors.");
  return Status::Ok();
}

// What QK16/V8's CUDA kernel takes beyond the layer's checks: padded batches with at most a
// key-padding mask (its V scales are per batch over the kept keys).
Status check_fp8_v_cuda_problem(const AttentionProblem& problem) {
  if (problem.is_varlen())
    return Unsupported("FLASHINFER_ATTN's QK16/V8 mode on CUDA takes padded batches, not packed variable-length ones; "
                       "pad the sequences and pass a key-padding mask, leave quant.dtype_vo unset for 16-bit V, or "
                       "run on CPU tensors");
  if (problem.mask_kind() == MaskKind::kDense)
    return Unsupported("FLASHINFER_ATTN's QK16/V8 mode on CUDA takes key-padding masks [B, Skv], not dense masks; "
                       "leave quant.dtype_vo unset for 16-bit V, or run on CPU tensors");
  return Status::Ok();
}

}  // namespace

// The layer checked and completed the call (Attention::forward), against the capabilities and
// flashinfer_problem_reasons too; what is left depends on the quant block's mode.
Status FlashInferAttnBackend::forward(const AttentionProblem& problem, void* stream) {
  if (mode_.variant == FlashInferVariant::kCuteDsl && problem.mask)
    return Unsupported("FLASHINFER_ATTN cute-dsl backend does not support custom masks. Select TORCH_SDPA or a "
                       "FlashInfer backend that accepts custom_mask.");
  DIFFATTN_RETURN_IF_ERROR(check_operand_dtype(mode_.dtype_qk, problem.q.dtype, "dtype_qk", "q and k"));
  DIFFATTN_RETURN_IF_ERROR(check_operand_dtype(mode_.dtype_vo, problem.v.dtype, "dtype_vo", "v and out"));
  if (problem.q.device.kind == DeviceKind::kCuda) {
    if (mode_.fp8_v) {
      DIFFATTN_RETURN_IF_ERROR(check_fp8_v_cuda_problem(problem));
      sage::SageKernelChoice choice;
      choice.mma_sync = mode_.variant == FlashInferVariant::kFa2;  // 'fa2': the Ampere/Ada-class kernel
      return sage::run_qk16_v8_cuda(problem, stream, choice);
    }
    if (problem.v.size(3) != problem.q.size(3))
      return Unsupported("FLASHINFER_ATTN's CUDA kernels need the value head size to equal the query/key head size, "
                         "got D=" + std::to_string(problem.q.size(3)) + " and Dv=" + std::to_string(problem.v.size(3)) +
                         "; run it on CPU tensors, or select TORCH_SDPA");
    // 'fa2' asks for the Ampere-class kernel on any GPU; 'fa3' and 'auto' take the device's own.
    return flash::run_masked_cuda(problem, stream, mode_.variant == FlashInferVariant::kFa2);
  }
  if (mode_.fp8_v) return run_attention_fp8_v_cpu(problem);
  return run_sdpa_cpu(problem);
}

Result<std::unique_ptr<Backend>> create_flashinfer_attn_backend(const BackendInit& init) {
  if (init.num_heads < 0 || init.num_kv_heads < 0 || init.head_size < 0)
    return InvalidInput("FLASHINFER_ATTN needs non-negative head counts and head size, got num_heads=" +
                        std::to_string(init.num_heads) + ", num_kv_heads=" + std::to_string(init.num_kv_heads) +
                        ", head_size=" + std::to_string(init.head_size));
  if (init.spec) DIFFATTN_RETURN_IF_ERROR(validate_flashinfer_options(*init.spec));
  const FlashInferMode mode = flashinfer_mode(init.spec);
  DIFFATTN_RETURN_IF_ERROR(check_variant_on_platform(mode.variant, init.platform));
  DIFFATTN_RETURN_IF_ERROR(check_fp8_v_on_platform(mode, init.platform));
  return std::unique_ptr<Backend>(std::make_unique<FlashInferAttnBackend>(mode));
}

}  // namespace diffattn
