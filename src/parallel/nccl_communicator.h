#pragma once
// The NCCL engine of the communicator: one process per GPU. Processes agree on NCCL's unique id
// through any channel (our launcher's file, torch.distributed, MPI); rank 0 creates it.

#include <memory>
#include <string>
#include <string_view>

#include "parallel/communicator.h"

namespace diffattn::parallel {

// Whether this build has NCCL (its headers and library were found when it was configured).
bool nccl_built();

// NCCL's unique id as hex text, made by rank 0 and passed to every rank.
Result<std::string> make_nccl_unique_id();

// Joins the group `unique_id` names as `rank` of `size`, on CUDA device `device` (made current).
Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::string_view unique_id, int rank, int size, int device);

}  // namespace diffattn::parallel
