#include "kernels/cpu/score_range.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "kernels/cpu/half_convert.h"

namespace diffattn {
namespace {

// Headroom below FLT_MAX for the rounding of fp32 sums and for m + log(l) in the LSE.
constexpr double kLimit = std::numeric_limits<float>::max() / 2.0;
constexpr double kLog2e = 1.4426950408889634;

double element(const TensorView& t, std::int64_t offset) {
  switch (t.dtype) {
    case DType::kFloat16: return cpu::half_to_float(static_cast<const std::uint16_t*>(t.data)[offset]);
    case DType::kBFloat16: return cpu::bf16_to_float(static_cast<const std::uint16_t*>(t.data)[offset]);
    default: return static_cast<const float*>(t.data)[offset];
  }
}

struct Magnitudes {
  double max_row_norm = 0;  // largest Euclidean norm of a [.., .., .., D] row
  double max_abs = 0;
};

// Rows are the last dimension of a rank-4 view; strides may be anything validation accepted.
Magnitudes magnitudes(const TensorView& t) {
  Magnitudes m;
  for (std::int64_t a = 0; a < t.size(0); ++a)
    for (std::int64_t b = 0; b < t.size(1); ++b)
      for (std::int64_t c = 0; c < t.size(2); ++c) {
        const std::int64_t row = a * t.stride(0) + b * t.stride(1) + c * t.stride(2);
        double norm2 = 0;
        for (std::int64_t e = 0; e < t.size(3); ++e) {
          const double x = std::fabs(element(t, row + e * t.stride(3)));
          norm2 += x * x;
          m.max_abs = std::max(m.max_abs, x);
        }
        m.max_row_norm = std::max(m.max_row_norm, std::sqrt(norm2));
      }
  return m;
}

std::string sci(double x) {
  std::ostringstream out;
  out.precision(3);
  out << x;
  return out.str();
}

}  // namespace

Status check_scores_fit_float32(const AttentionProblem& p) {
  const double scale = std::fabs(static_cast<double>(p.softmax_scale())) * kLog2e;
  const Magnitudes q = magnitudes(p.q), k = magnitudes(p.k);
  // q is scaled before the dot product, so both the scaled q and the scores must fit.
  const double score_bound = std::max(scale * q.max_row_norm * k.max_row_norm, scale * q.max_abs);
  if (!(score_bound <= kLimit))
    return InvalidInput("q and k are too large for float32 attention scores: scale x |q.k| can reach " + sci(score_bound) +
                        " (largest row norm of q " + sci(q.max_row_norm) + ", of k " + sci(k.max_row_norm) +
                        ", scale " + sci(p.softmax_scale()) + "), past float32's " +
                        sci(std::numeric_limits<float>::max()) + " and the kernel would return zeros; scale q and k down "
                        "(e.g. normalise them) before the call");
  const double v_max = magnitudes(p.v).max_abs;
  const double sum_bound = v_max * static_cast<double>(p.k.size(1));
  if (!(sum_bound <= kLimit))
    return InvalidInput("v is too large for float32 output sums: its largest magnitude " + sci(v_max) + " over " +
                        std::to_string(p.k.size(1)) + " keys can reach " + sci(sum_bound) + ", past float32's " +
                        sci(std::numeric_limits<float>::max()) + "; scale v down before the call and the output up after it");
  return Status::Ok();
}

}  // namespace diffattn
