#pragma once
// How SAGE_ATTN's Hopper kernel is shaped for a call: plain functions, tested on the CPU
// (tests/gpu/sage_config_test.cc).

#include <cstdint>

namespace diffattn::sage {

// Consumer warpgroups of 64 query rows per CTA. Three groups that run each key block's products
// and softmax in order (the other two keeping the tensor cores busy) against two that overlap
// their own softmax with their next products: the two-group kernel issues on only about half of
// its cycles, waiting on its own products (docs/backends/sage_attn.md, "Where the time goes").
inline constexpr std::int64_t kSageInOrderMinRows = 0;

constexpr int sage_consumer_groups(std::int64_t seqlen_q, bool causal) {
  (void)causal;
  return seqlen_q >= kSageInOrderMinRows ? 3 : 2;
}

constexpr std::int64_t sage_m_blocks(std::int64_t seqlen_q, int consumer_groups) {
  const std::int64_t rows = 64 * consumer_groups;
  return (seqlen_q + rows - 1) / rows;
}

}  // namespace diffattn::sage
