#pragma once
// The selection both sparse backends' lists rest on, for one warp: where the `rank`-th highest of a
// set of float32 scores lies (ties to the lower index), found by a radix select over
// order-preserving 32-bit keys, 8 bits a pass, with a 256-bin histogram in shared memory: at most
// four passes over the set (after one for its range), whatever its size, where a bit-by-bit
// search takes 32.

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
// The passes start below the highest bit where the members' keys differ: the scores of one set
// usually share their sign and exponent, and a pass over bits they share would put every member
// in one bin (32 atomics on one shared-memory word serialize) and decide nothing.
template <typename Member, typename Key>
__device__ __forceinline__ RankCut warp_rank_cut(int end, int rank, Member member, Key key, unsigned* hist) {
  const int lane = threadIdx.x % 32;
  unsigned lo = 0xffffffffu, hi = 0u;
  for (int j = lane; j < end; j += 32) {
    if (!member(j)) continue;
    const unsigned k = key(j);
    lo = min(lo, k);
    hi = max(hi, k);
  }
  lo = __reduce_min_sync(0xffffffffu, lo);
  hi = __reduce_max_sync(0xffffffffu, hi);
  if (lo >= hi) return {hi, rank};  // one key for all (rank members of it are kept)
  const int top = 31 - __clz(lo ^ hi);  // the highest bit where keys differ
  unsigned mask = top == 31 ? 0u : ~((2u << top) - 1u);
  unsigned prefix = hi & mask;
  int remaining = rank;
  for (int high = top; high >= 0; high -= 8) {
    const int shift = high >= 7 ? high - 7 : 0;  // this pass's digit: bits high .. shift
    const unsigned digit = (2u << (high - shift)) - 1u;
    for (int b = lane; b < 256; b += 32) hist[b] = 0;
    __syncwarp();
    for (int j = lane; j < end; j += 32) {
      if (!member(j)) continue;
      const unsigned k = key(j);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & digit], 1u);
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
    mask |= digit << shift;
    __syncwarp();  // every lane has read `hist` before the next pass clears it
  }
  return {prefix, remaining};
}

}  // namespace diffattn::sparse
