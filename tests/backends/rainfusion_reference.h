#pragma once
// What a RAINFUSION_ATTN call chose, as a dense keep-mask in the call's own token order, so that
// the float64 oracle computes exactly the attention the plan lists: a query keeps a key when the
// key's tile is listed for the query's tile (batch entry and query head alike).

#include <cstdint>
#include <optional>
#include <utility>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "diffattn/selector.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "parity/cases.h"

namespace diffattn::testing {

// A layer of `p`'s heads and head size whose every role runs RAINFUSION_ATTN with `block` on `platform`.
inline Result<Attention> rainfusion_layer(const AttentionProblem& p, std::optional<BlockSparseSpec> block,
                                          const PlatformInfo& platform) {
  AttentionLayerDesc desc;
  desc.num_heads = static_cast<int>(p.q.size(2));
  desc.num_kv_heads = static_cast<int>(p.k.size(2));
  desc.head_size = static_cast<int>(p.q.size(3));
  AttentionSpec spec;
  spec.backend = "RAINFUSION_ATTN";
  spec.block_sparse = std::move(block);
  AttentionConfig config;
  config.default_spec = spec;
  Selector selector(make_platform(platform, global_registry()), &global_registry());
  return Attention::Create(desc, config, selector);
}

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
