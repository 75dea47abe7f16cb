#pragma once
// What a RAINFUSION_ATTN call chose, as a dense keep-mask in the call's own token order, so that
// the float64 oracle computes exactly the attention the plan lists: a query keeps a key when the
// key's tile is listed for the query's tile (batch entry and query head alike).

#include <cstdint>

#include "kernels/cpu/rainfusion_cpu.h"
#include "parity/cases.h"

namespace diffattn::testing {

// A [B, Hq, S, S] bool mask of `plan` for `data`'s problem, returned as a copy of the problem that
// carries it (the buffer lives in `data`).
inline AttentionProblem problem_with_plan_mask(CaseData& data, const RainFusionPlan& plan) {
  const AttentionProblem& p = data.problem;
  const std::int64_t batch = p.q.size(0), heads = p.q.size(2), seq = p.q.size(1), tiles = plan.tiles.count();
  HostBuffer& buf = data.add(DType::kBool, batch * heads * seq * seq);
  auto* keep = static_cast<std::uint8_t*>(buf.data());
  std::vector<std::uint8_t> listed(static_cast<std::size_t>(tiles));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < seq; ++i) {
        const std::int64_t row = plan.layout.row(b, h, plan.tiles.slot[static_cast<std::size_t>(i)] / kRainTileTokens);
        std::fill(listed.begin(), listed.end(), 0);
        for (std::int32_t n = plan.layout.offsets[row]; n < plan.layout.offsets[row + 1]; ++n)
          listed[static_cast<std::size_t>(plan.layout.indices[n])] = 1;
        std::uint8_t* dst = keep + ((b * heads + h) * seq + i) * seq;
        for (std::int64_t j = 0; j < seq; ++j)
          dst[j] = listed[static_cast<std::size_t>(plan.tiles.slot[static_cast<std::size_t>(j)] / kRainTileTokens)];
      }
  AttentionProblem masked = p;
  masked.mask = TensorView::Contiguous(buf.data(), DType::kBool, {batch, heads, seq, seq});
  return masked;
}

}  // namespace diffattn::testing
