#pragma once
// The selection both sparse backends' lists rest on, for one warp: where the `rank`-th highest of a
// set of float32 scores lies (ties to the lower index), found by a radix select over
// order-preserving 32-bit keys, 8 bits a pass, with a 256-bin histogram in shared memory. Four
// passes over the set, whatever its size, where a bit-by-bit search takes 32.

#include <cstdint>

namespace diffattn::sparse {

// Scores as unsigned keys in the same order: -0 with +0 (the host's comparisons have them equal),
// NaN above every number.
__device__ __forceinline__ unsigned order_key(float v) {
  unsigned u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}

// The members whose key is above `threshold` are kept, with the first `ties` members (by index)
// whose key equals it: `rank` members in all.
struct RankCut {
  unsigned threshold = 0;
  int ties = 0;
};

// Run by a whole warp over the members of [0, end) (member(j)), with key(j) their keys and
// 1 <= rank <= the member count; `hist` is the warp's 256 words of shared memory.
template <typename Member, typename Key>
__device__ __forceinline__ RankCut warp_rank_cut(int end, int rank, Member member, Key key, unsigned* hist) {
  const int lane = threadIdx.x % 32;
  unsigned prefix = 0, mask = 0;
  int remaining = rank;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = lane; b < 256; b += 32) hist[b] = 0;
    __syncwarp();
    for (int j = lane; j < end; j += 32) {
      if (!member(j)) continue;
      const unsigned k = key(j);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
    }
    __syncwarp();
    // Lane l holds bins 255 - 8l down to 248 - 8l: the scan runs from the highest bin down.
    int counts[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += counts[i] = static_cast<int>(hist[255 - 8 * lane - i]);
    int inclusive = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o) inclusive += up;
    }
    const int owner = __ffs(__ballot_sync(0xffffffffu, inclusive >= remaining)) - 1;
    int bin = 0, above = 0;
    if (lane == owner) {
      above = inclusive - sum;
      int i = 0;
      while (above + counts[i] < remaining) above += counts[i++];
      bin = 255 - 8 * lane - i;
    }
    bin = __shfl_sync(0xffffffffu, bin, owner);
    above = __shfl_sync(0xffffffffu, above, owner);
    remaining -= above;
    prefix |= static_cast<unsigned>(bin) << shift;
    mask |= 0xFFu << shift;
    __syncwarp();  // every lane has read `hist` before the next pass clears it
  }
  return {prefix, remaining};
}

}  // namespace diffattn::sparse
