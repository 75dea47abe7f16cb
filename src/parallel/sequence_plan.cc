#include "parallel/sequence_plan.h"

#include <algorithm>

namespace diffattn::parallel {

std::string ParallelDegrees::describe() const {
  return "ulysses " + std::to_string(ulysses) + " x ring " + std::to_string(ring);
}

Status check_degrees(const ParallelDegrees& d) {
  if (d.ulysses < 1 || d.ring < 1 || d.ulysses > 1024 || d.ring > 1024)
    return InvalidConfig("sequence-parallel degrees must be 1 to 1024, got " + d.describe() +
                         "; use --ulysses N and --ring M with N, M >= 1");
  return Status::Ok();
}

ShardRange image_shard(std::int64_t tokens, int world, int rank) {
  if (world <= 0 || tokens <= 0) return {};
  const std::int64_t local = (tokens + world - 1) / world;
  const std::int64_t begin = std::min<std::int64_t>(tokens, rank * local);
  return {begin, std::min<std::int64_t>(tokens - begin, local)};
}

std::int64_t SequencePlan::valid_in_block(int block) const {
  const std::int64_t begin = block * chunk;
  return std::clamp<std::int64_t>(tokens - begin, 0, chunk);
}

SequencePlan plan_sequence(std::int64_t tokens, const ParallelDegrees& degrees) {
  SequencePlan p;
  p.tokens = tokens;
  p.local = (tokens + degrees.world() - 1) / degrees.world();
  p.chunk = p.local * degrees.ulysses;
  p.padded = p.local * degrees.world();
  return p;
}

}  // namespace diffattn::parallel
