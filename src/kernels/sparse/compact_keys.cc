#include "kernels/sparse/compact_keys.h"

#include "kernels/sparse/key_walk.h"

namespace diffattn {

CompactKeys compact_keys(const std::vector<bool>& keep, int block_n) {
  CompactKeys out;
  for_each_kept_run(keep, [&](int start, int end) {
    const int whole = (end - start) / block_n;
    for (int i = 0; i < whole; ++i) out.block_rows.push_back(start + i * block_n);
    for (int key = start + whole * block_n; key < end; ++key) out.gathered.push_back(key);
    out.count += end - start;
  });
  const int rows = static_cast<int>(out.gathered.size());
  for (int r = 0; r < rows; r += block_n) out.block_rows.push_back(gathered_block_row(r));
  return out;
}

}  // namespace diffattn
