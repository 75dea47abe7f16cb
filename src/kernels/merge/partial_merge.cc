#include "kernels/merge/partial_merge.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cpu/half_convert.h"

namespace diffattn::merge {
namespace {

bool is_output_dtype(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

float load(const void* base, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::kFloat16: return cpu::half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::kBFloat16: return cpu::bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

}  // namespace

Status check_partial_merge(const PartialMergeParams& p) {
  if (!p.acc_out || !p.acc_lse || !p.part_out || !p.part_lse)
    return InvalidInput("partial merge: a buffer is null; pass the accumulator and the partial output and LSE");
  if (p.batch < 0 || p.seqlen < 0 || p.heads <= 0 || p.head_size_v <= 0)
    return InvalidInput("partial merge: sizes must be positive (batch " + std::to_string(p.batch) + ", seqlen " +
                        std::to_string(p.seqlen) + ", heads " + std::to_string(p.heads) + ", head size " +
                        std::to_string(p.head_size_v) + ")");
  if (!is_output_dtype(p.part_dtype))
    return InvalidInput("partial merge: the partial output has dtype " + std::string(dtype_name(p.part_dtype)) +
                        "; it must be float32, float16 or bfloat16");
  return Status::Ok();
}

Status merge_partial_cpu(const PartialMergeParams& p) {
  DIFFATTN_RETURN_IF_ERROR(check_partial_merge(p));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t dv = p.head_size_v;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      for (std::int64_t s = 0; s < p.seqlen; ++s) {
        const std::int64_t li = (b * p.heads + h) * p.seqlen + s;
        const float la = p.acc_lse[li], lb = p.part_lse[li];
        const float m = std::fmax(la, lb);
        if (m == kNegInf) continue;  // neither side kept a key: the row stays zero with LSE -inf
        const float wa = la == kNegInf ? 0.f : std::exp(la - m);
        const float wb = lb == kNegInf ? 0.f : std::exp(lb - m);
        const float inv = 1.f / (wa + wb);
        const std::int64_t oi = ((b * p.seqlen + s) * p.heads + h) * dv;
        for (std::int64_t d = 0; d < dv; ++d)
          p.acc_out[oi + d] = (wa * p.acc_out[oi + d] + wb * load(p.part_out, p.part_dtype, oi + d)) * inv;
        p.acc_lse[li] = m + std::log(wa + wb);
      }
    }
  }
  return Status::Ok();
}

Status store_merged_cpu(const float* acc, void* out, DType dtype, std::int64_t count) {
  if (!is_output_dtype(dtype))
    return InvalidInput("store merged output: dtype " + std::string(dtype_name(dtype)) +
                        " is not float32, float16 or bfloat16");
  if (dtype == DType::kFloat32) {
    std::memcpy(out, acc, static_cast<std::size_t>(count) * sizeof(float));
    return Status::Ok();
  }
  auto* o = static_cast<std::uint16_t*>(out);
  for (std::int64_t i = 0; i < count; ++i) o[i] = dtype == DType::kFloat16 ? cpu::float_to_half(acc[i]) : cpu::float_to_bf16(acc[i]);
  return Status::Ok();
}

}  // namespace diffattn::merge
