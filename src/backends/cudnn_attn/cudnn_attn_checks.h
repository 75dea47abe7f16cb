#pragma once
// What CUDNN_ATTN can run, as small named checks that each return the reason they fail. They need
// no GPU, so the registry, the platform and the tests use them on any machine.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/reason.h"
#include "diffattn/problem.h"

namespace diffattn::cudnn_attn {

inline constexpr int kMaxHeadSize = 256;

Reason check_head_size_multiple_of_8(std::int64_t head_size);
Reason check_dtype_half_or_bf16(DType dtype);
Reason check_kv_length_above_one(std::int64_t seqlen_kv);
Reason check_cuda_device(const ProblemShape& shape);
// A keep-mask per key ([B, Skv], or a dense mask whose head and query dimensions are broadcast):
// when it keeps a non-empty prefix of every batch's keys (checked on the GPU) it runs as per-batch
// key lengths; every other mask runs as an additive bias.
bool mask_is_key_padding(const AttentionProblem& problem);
// Packed batches reach cuDNN as 32-bit element offsets.
Reason check_packed_offsets_fit_int32(const AttentionProblem& problem);

// Every reason `shape` is outside CUDNN_ATTN (empty: supported, up to the mask's contents).
std::vector<std::string> problem_reasons(const ProblemShape& shape);

}  // namespace diffattn::cudnn_attn
