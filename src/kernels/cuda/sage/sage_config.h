#pragma once
// How SAGE_ATTN's Hopper kernel is shaped for a call: plain functions, tested on the CPU
// (tests/gpu/sage_config_test.cc).

#include <cstdint>

namespace diffattn::sage {

// Consumer warpgroups of 64 query rows per CTA: three that run each key block's products and
// softmax in order (the other two keeping the tensor cores busy), or two that overlap their own
// softmax with their next products. The two-group kernel issues on only about half of its cycles,
// waiting on its own products. Measured on an H200 (dev/sage_time.cc, both shapes in one run,
// docs/backends/sage_attn.md): at hd128 three groups win on every workload, in both P V modes
// (long video rows +17-20 %, 512-key cross-attention +14-24 %, Flux +8-10 %, the 4k square
// +3-4 %); at hd64 they win from SD3's 4429 rows up (+1-2 %; the 16k square +9-16 %) and lose 4 %
// on the 4k square, so hd64 runs two groups up to kSageHd64TwoGroupMaxRows query rows.
inline constexpr std::int64_t kSageHd64TwoGroupMaxRows = 4096;

constexpr int sage_consumer_groups(int head_size, std::int64_t seqlen_q) {
  return head_size == 64 && seqlen_q <= kSageHd64TwoGroupMaxRows ? 2 : 3;
}

constexpr std::int64_t sage_m_blocks(std::int64_t seqlen_q, int consumer_groups) {
  const std::int64_t rows = 64 * consumer_groups;
  return (seqlen_q + rows - 1) / rows;
}

}  // namespace diffattn::sage
