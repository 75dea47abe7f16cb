#pragma once
// Runs cuDNN's fused flash attention through the cudnn-frontend graph API. Graphs are built on
// first use and cached by everything that shapes them; one cuDNN handle per device; workspaces
// are kept per (device, stream) and only grow, so a warmed-up shape allocates nothing.

#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn::cudnn_attn {

// `problem` passed validate_problem and the checks of cudnn_attn_checks.h; `stream` is a
// cudaStream_t. A key-padding mask makes the call wait for the stream once, to learn whether it
// keeps a non-empty prefix of every batch's keys (then it runs as key lengths, which skip the
// padding); every other mask runs as an additive bias, and packed batches as ragged offsets.
// Rows that keep no key get zeros and LSE -inf.
Status run_cudnn_sdpa(const AttentionProblem& problem, void* stream);

// The cuDNN version of the loaded library (cudnnGetVersion), 0 when none loads.
int cudnn_runtime_version();

}  // namespace diffattn::cudnn_attn
