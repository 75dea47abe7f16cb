#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/reason.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/dense/tile_config.h"

namespace diffattn::cuda {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

bool fits_int(std::int64_t value) { return value >= 0 && value <= kMaxInt; }

std::int64_t broadcast_stride(const TensorView& view, int dim) {
  return view.size(dim) == 1 ? 0 : view.stride(dim);
}

void set_mask_strides(const TensorView& mask, SdpaParams& p) {
  p.mask = static_cast<const std::uint8_t*>(mask.data);
  if (mask.ndim == 2) {  // key padding [B, Skv]: every query row and head reads the same keys
    p.mask_batch_stride = broadcast_stride(mask, 0);
    p.mask_col_stride = mask.stride(1);
    return;
  }
  p.mask_batch_stride = broadcast_stride(mask, 0);
  p.mask_head_stride = broadcast_stride(mask, 1);
  p.mask_row_stride = broadcast_stride(mask, 2);
  p.mask_col_stride = broadcast_stride(mask, 3);
}

Reason check_dtype_has_tensor_cores(const SdpaParams& p) {
  if (p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16) return std::nullopt;
  return "dtype " + std::string(dtype_name(p.dtype)) + " has no tensor-core path (float16 and bfloat16 do)";
}

Reason check_head_dim_compiled(const SdpaParams& p) {
  const int widest = p.head_dim > p.head_dim_v ? p.head_dim : p.head_dim_v;
  if (head_dim_bucket(widest) != 0) return std::nullopt;
  return "head size " + std::to_string(widest) + " is above the largest compiled bucket (" +
         std::to_string(kMaxTensorCoreHeadDim) + ")";
}

Reason check_head_dim_multiple_of_8(const SdpaParams& p) {
  if (p.head_dim % 8 == 0 && p.head_dim_v % 8 == 0) return std::nullopt;
  return "head sizes " + std::to_string(p.head_dim) + "/" + std::to_string(p.head_dim_v) +
         " are not multiples of 8 (16-byte row chunks)";
}

Reason check_last_dim_contiguous(const SdpaParams& p) {
  if (p.q_col_stride == 1 && p.k_col_stride == 1 && p.v_col_stride == 1 && p.o_col_stride == 1) return std::nullopt;
  return "the head dimension of q, k, v and out must be contiguous (stride 1)";
}

Reason check_16_byte_rows(const SdpaParams& p) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const auto multiple_of_8 = [](std::int64_t s) { return s % 8 == 0; };
  const bool ok = aligned(p.q) && aligned(p.k) && aligned(p.v) && aligned(p.out) &&
                  multiple_of_8(p.q_batch_stride) && multiple_of_8(p.q_row_stride) && multiple_of_8(p.q_head_stride) &&
                  multiple_of_8(p.k_batch_stride) && multiple_of_8(p.k_row_stride) && multiple_of_8(p.k_head_stride) &&
                  multiple_of_8(p.v_batch_stride) && multiple_of_8(p.v_row_stride) && multiple_of_8(p.v_head_stride) &&
                  multiple_of_8(p.o_batch_stride) && multiple_of_8(p.o_row_stride) && multiple_of_8(p.o_head_stride);
  if (ok) return std::nullopt;
  return "every row of q, k, v and out must start on a 16-byte boundary (aligned data, strides multiple of 8)";
}

Reason check_positive_scale(const SdpaParams& p) {
  if (p.scale > 0.f && std::isfinite(p.scale)) return std::nullopt;
  return "the softmax scale " + std::to_string(p.scale) + " is not a positive finite number";
}

}  // namespace

Result<SdpaParams> make_sdpa_params(const AttentionProblem& problem) {
  const TensorView& q = problem.q;
  const TensorView& k = problem.k;
  const TensorView& v = problem.v;
  const TensorView& out = problem.out;
  SdpaParams p;
  p.dtype = q.dtype;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = out.data;
  p.q_batch_stride = q.stride(0), p.q_row_stride = q.stride(1), p.q_head_stride = q.stride(2), p.q_col_stride = q.stride(3);
  p.k_batch_stride = k.stride(0), p.k_row_stride = k.stride(1), p.k_head_stride = k.stride(2), p.k_col_stride = k.stride(3);
  p.v_batch_stride = v.stride(0), p.v_row_stride = v.stride(1), p.v_head_stride = v.stride(2), p.v_col_stride = v.stride(3);
  p.o_batch_stride = out.stride(0), p.o_row_stride = out.stride(1), p.o_head_stride = out.stride(2), p.o_col_stride = out.stride(3);
  p.batch = static_cast<int>(q.size(0));
  p.seqlen_q = static_cast<int>(q.size(1));
  p.seqlen_kv = static_cast<int>(k.size(1));
  p.heads_q = static_cast<int>(q.size(2));
  p.heads_kv = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.head_dim_v = static_cast<int>(v.size(3));
  p.scale = problem.softmax_scale();
  p.scale_log2 = p.scale * 1.4426950408889634f;
  p.causal = problem.causal;

  if (!fits_int(q.size(1)) || !fits_int(k.size(1)) || !fits_int(q.size(0))) {
    return InvalidInput("TORCH_SDPA on CUDA indexes sequences with 32-bit integers; q " + q.shape_string() +
                        " / k " + k.shape_string() + " is too long: split the batch or the sequence");
  }
  if (problem.cu_seqlens_q.has_value() != problem.cu_seqlens_k.has_value()) {
    return InvalidInput("varlen attention needs both cu_seqlens_q and cu_seqlens_k; pass both or neither");
  }
  if (problem.cu_seqlens_q) {
    if (problem.mask) {
      return Unsupported("TORCH_SDPA on CUDA does not combine packed variable-length batches with a keep-mask; "
                         "express the padding through cu_seqlens or pass padded batches with the mask");
    }
    p.cu_seqlens_q = static_cast<const std::int32_t*>(problem.cu_seqlens_q->data);
    p.cu_seqlens_k = static_cast<const std::int32_t*>(problem.cu_seqlens_k->data);
    p.batch = static_cast<int>(problem.cu_seqlens_q->numel() - 1);
    p.seqlen_q = static_cast<int>(problem.max_seqlen_q);
    p.seqlen_kv = static_cast<int>(problem.max_seqlen_k);
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = 0;
    if (p.seqlen_q <= 0 || p.seqlen_kv < 0) {
      return InvalidInput("varlen attention needs max_seqlen_q > 0 and max_seqlen_k >= 0 (the longest sequence); got " +
                          std::to_string(problem.max_seqlen_q) + " and " + std::to_string(problem.max_seqlen_k));
    }
  }
  if (problem.mask) set_mask_strides(*problem.mask, p);
  if (problem.lse) {
    const TensorView& lse = *problem.lse;
    p.lse = static_cast<float*>(lse.data);
    p.lse_batch_stride = problem.cu_seqlens_q ? 0 : lse.stride(0);
    p.lse_head_stride = lse.stride(1);
    p.lse_row_stride = lse.stride(2);
  }
  return p;
}

std::vector<std::string> mma_path_reasons(const SdpaParams& p) {
  using Check = std::optional<std::string> (*)(const SdpaParams&);
  static constexpr Check kChecks[] = {check_dtype_has_tensor_cores, check_head_dim_compiled,
                                      check_head_dim_multiple_of_8, check_last_dim_contiguous,
                                      check_16_byte_rows, check_positive_scale};
  std::vector<std::string> reasons;
  for (Check check : kChecks) {
    if (auto reason = check(p)) reasons.push_back(*std::move(reason));
  }
  return reasons;
}

}  // namespace diffattn::cuda
