#pragma once
// Ranks as threads of one process, exchanging host memory: every parallel algorithm runs on a CPU
// (and in CI) exactly as it runs over NCCL. A collective waits at most `timeout` for the other ranks;
// a rank that fails calls abort() and the others return its reason at once.

#include <chrono>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace diffattn::parallel {

// `size` communicators of one group: give element r to the thread that plays rank r. With
// `device` kCuda the buffers are device memory of one GPU that every rank's thread uses (all ranks
// on one GPU: the CUDA paths of the parallel layer checked without NCCL).
Result<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(
    int size, std::chrono::milliseconds timeout = std::chrono::seconds(60), DeviceKind device = DeviceKind::kCpu);

}  // namespace diffattn::parallel
