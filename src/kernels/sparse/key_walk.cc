#include "kernels/sparse/key_walk.h"

#include <algorithm>

namespace diffattn {

std::vector<KeyWalkEntry> key_walk(const std::vector<bool>& keep, int block_n, bool aligned_only) {
  const int skv = static_cast<int>(keep.size());
  std::vector<KeyWalkEntry> aligned, runs;
  for (int key0 = 0; key0 < skv; key0 += block_n) {
    const int len = std::min(block_n, skv - key0);
    const auto first = keep.begin() + key0, last = first + len;
    const auto kept = std::count(first, last, true);
    if (kept > 0) aligned.push_back({key0, len, kept < len});
  }
  if (aligned_only) return aligned;
  for_each_kept_run(keep, [&](int j, int end) {
    int next = end;
    while (next < skv && !keep[static_cast<std::size_t>(next)]) ++next;
    if (next == skv) next = skv + block_n;  // no next run: past every block
    for (int key0 = j; key0 < end; key0 += block_n) {
      const int len = std::min(block_n, end - key0);
      runs.push_back({key0, len, partial_run_reads_bits(key0, len, next, block_n)});
    }
  });
  return runs.size() <= aligned.size() ? runs : aligned;
}

}  // namespace diffattn
