#pragma once
// Our launcher: one process per GPU on this machine, each told its rank through the environment,
// rank 0 handing NCCL's unique id to the others through a file. A rank that fails ends the others
// after a grace period, so no rank waits forever on a peer that is gone.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace diffattn::parallel {

// Set by launch_local_ranks in each child.
inline constexpr const char* kRankEnv = "DIFFATTN_RANK";
inline constexpr const char* kWorldEnv = "DIFFATTN_WORLD_SIZE";
inline constexpr const char* kDeviceEnv = "DIFFATTN_LOCAL_DEVICE";
inline constexpr const char* kIdFileEnv = "DIFFATTN_NCCL_ID_FILE";

struct RankEnvironment {
  int rank = 0, world = 1, device = 0;
  std::string id_file;
};

// The launcher's variables of this process; nullopt when it was not launched as a rank.
Result<std::optional<RankEnvironment>> rank_environment();

// NCCL communicator of a launched rank: rank 0 writes the unique id to the file, the others wait
// for it at most `timeout`.
Result<std::unique_ptr<Communicator>> nccl_from_environment(const RankEnvironment& env,
                                                            std::chrono::milliseconds timeout = std::chrono::seconds(120));

// Runs `world` copies of this program with `args` (argv[1:]), rank i on CUDA device i, and waits for
// them. Returns the first failing rank's exit code (0 when all succeed). When a rank fails, the
// others get SIGTERM after `grace`, then SIGKILL.
Result<int> launch_local_ranks(int world, const std::vector<std::string>& args,
                               std::chrono::milliseconds grace = std::chrono::seconds(15));

}  // namespace diffattn::parallel
