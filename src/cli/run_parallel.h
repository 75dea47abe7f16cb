#pragma once
// `diffattn run --ulysses N --ring M`: the sequence-parallel run (runner/sequence_parallel_run.h)
// on in-process ranks (CPU) or one process per GPU started by our launcher (CUDA, NCCL).

#include <string>
#include <vector>

#include "cli/args.h"
#include "parallel/sequence_plan.h"
#include "runner/run_request.h"

namespace diffattn::cli {

// `run_args` are the arguments after `run`, as given: each launched rank receives them again.
int run_sequence_parallel_command(const runner::RunRequest& request, const parallel::ParallelDegrees& degrees,
                                  const CommonOptions& options, const std::vector<std::string>& run_args);

}  // namespace diffattn::cli
