#pragma once
// Whether a CPU call's scores and output sums stay inside float32: inputs near float32's largest
// values (finite, e.g. 3e38) would otherwise overflow q·kᵀ to Inf and come out as zeros and LSE -inf.

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

// O(numel) host scan of a validated CPU problem. Bounds every score by |scale|·log2(e)·‖q_i‖·‖k_j‖
// (Cauchy-Schwarz, which also bounds every partial sum of the dot product) and every output
// accumulator by Skv·max|v|; kInvalidInput naming the operand when a bound passes half of FLT_MAX.
Status check_scores_fit_float32(const AttentionProblem& problem);

}  // namespace diffattn
