#pragma once
// How a sequence of image tokens is spread over Ulysses x ring ranks, and where padding goes.
// Rank r = ring_rank * ulysses + ulysses_rank holds tokens [r * L, r * L + length) with
// L = ceil(tokens / world): only image tokens are padded, at the end of the whole sequence, and the
// padded keys are masked so the result is that of the unpadded sequence.

#include <cstdint>
#include <string>

#include "diffattn/status.h"

namespace diffattn::parallel {

struct ParallelDegrees {
  int ulysses = 1;
  int ring = 1;
  int world() const { return ulysses * ring; }
  std::string describe() const;  // "ulysses 2 x ring 2"
};

Status check_degrees(const ParallelDegrees& degrees);

struct ShardRange {
  std::int64_t begin = 0;
  std::int64_t length = 0;  // may be shorter than the padded local length, even 0, on the last ranks
};

// The tokens rank `rank` holds of `tokens` image tokens spread over `world` ranks.
ShardRange image_shard(std::int64_t tokens, int world, int rank);

struct SequencePlan {
  std::int64_t tokens = 0;  // image tokens over all ranks
  std::int64_t local = 0;   // L: padded tokens per rank
  std::int64_t chunk = 0;   // C = ulysses * L: a ring block after the Ulysses exchange
  std::int64_t padded = 0;  // world * L
  bool padding() const { return padded != tokens; }
  // Image keys of ring block `block` (positions [block * C, (block + 1) * C)) that are real tokens.
  std::int64_t valid_in_block(int block) const;
};

SequencePlan plan_sequence(std::int64_t tokens, const ParallelDegrees& degrees);

}  // namespace diffattn::parallel
