#include "kernels/sparse/compact_keys.h"

namespace diffattn {

CompactKeys compact_keys(const std::vector<bool>& keep, int block_n) {
  CompactKeys out;
  const int skv = static_cast<int>(keep.size());
  for (int j = 0; j < skv;) {
    if (!keep[static_cast<std::size_t>(j)]) {
      ++j;
      continue;
    }
    int end = j;
    while (end < skv && keep[static_cast<std::size_t>(end)]) ++end;
    const int whole = (end - j) / block_n;
    for (int i = 0; i < whole; ++i) out.block_rows.push_back(j + i * block_n);
    for (int key = j + whole * block_n; key < end; ++key) out.gathered.push_back(key);
    out.count += end - j;
    j = end;
  }
  const int rows = static_cast<int>(out.gathered.size());
  for (int r = 0; r < rows; r += block_n) out.block_rows.push_back(gathered_block_row(r));
  return out;
}

}  // namespace diffattn
