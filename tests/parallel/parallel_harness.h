#pragma once
// Runs ParallelAttention on in-process ranks (one thread each) over fresh random inputs and the
// same backend on one rank over the whole sequence, for the parallel tests.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "parallel/in_process_communicator.h"
#include "parallel/parallel_attention.h"
#include "parity/host_tensors.h"

namespace diffattn::parallel::testing {

using diffattn::testing::fill_normal;
using diffattn::testing::HostBuffer;
using diffattn::testing::poison;
using diffattn::testing::read_element;
using diffattn::testing::write_element;

struct SpCase {
  ParallelDegrees degrees;
  int heads = 8, kv_heads = 8, head_size = 32;
  std::int64_t image_tokens = 48, text_tokens = 0;
  bool text_rear = false, text_mask = false;
  int batch = 1;
  DType dtype = DType::kFloat32;
  std::string backend = "TORCH_SDPA";
  std::uint64_t seed = 1;
  // The same layer first runs a call with the text on the other side: its buffers must not carry over.
  bool warm_with_other_placement = false;
};

struct Host4 {
  HostBuffer buf;
  TensorView view;
  Host4() = default;
  Host4(DType dt, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) : buf(dt, b * s * h * d) {
    view = TensorView::Contiguous(buf.data(), dt, {b, s, h, d});
  }
};

// Copies rows [s0, s0 + n) of src into a new tensor.
inline Host4 slice_seq(const TensorView& src, std::int64_t s0, std::int64_t n) {
  Host4 out(src.dtype, src.size(0), n, src.size(2), src.size(3));
  const std::size_t row = static_cast<std::size_t>(src.size(2) * src.size(3)) * dtype_size(src.dtype);
  for (std::int64_t b = 0; b < src.size(0); ++b)
    if (n > 0)
      std::memcpy(static_cast<char*>(out.view.data) + b * n * row,
                  static_cast<const char*>(src.data) + (b * src.size(1) + s0) * row, n * row);
  return out;
}

// [a; b] along the sequence.
inline Host4 concat_seq(const TensorView& a, const TensorView& b) {
  Host4 out(a.dtype, a.size(0), a.size(1) + b.size(1), a.size(2), a.size(3));
  const std::size_t row = static_cast<std::size_t>(a.size(2) * a.size(3)) * dtype_size(a.dtype);
  for (std::int64_t i = 0; i < a.size(0); ++i) {
    char* dst = static_cast<char*>(out.view.data) + i * out.view.size(1) * row;
    std::memcpy(dst, static_cast<const char*>(a.data) + i * a.size(1) * row, a.size(1) * row);
    std::memcpy(dst + a.size(1) * row, static_cast<const char*>(b.data) + i * b.size(1) * row, b.size(1) * row);
  }
  return out;
}

struct RankResult {
  Status status;
  Host4 out, joint_out;
  ShardRange shard;
};

struct SpRun {
  std::vector<RankResult> ranks;
  Host4 reference;  // single rank over [text; image] (or rear), all heads
  Status reference_status;
  std::int64_t text_offset = 0, image_offset = 0;  // rows of the reference
};

class SpHarness {
 public:
  SpHarness() {
    register_builtin_backends(registry_);
    platform_ = make_platform(probe_cpu_platform(), registry_);
  }
  Registry& registry() { return registry_; }
  std::shared_ptr<const Platform> platform() { return platform_; }

  // `on_rank` may replace a rank's call before it runs (failure injection).
  SpRun run(const SpCase& c, const std::function<void(int, ParallelCall&)>& on_rank = {}) {
    std::mt19937_64 rng(c.seed);
    const std::int64_t b = c.batch, s = c.image_tokens, t = c.text_tokens, d = c.head_size;
    Host4 q(c.dtype, b, s, c.heads, d), k(c.dtype, b, s, c.kv_heads, d), v(c.dtype, b, s, c.kv_heads, d);
    Host4 jq(c.dtype, b, t, c.heads, d), jk(c.dtype, b, t, c.kv_heads, d), jv(c.dtype, b, t, c.kv_heads, d);
    for (Host4* x : {&q, &k, &v, &jq, &jk, &jv}) fill_normal(x->view, rng);
    HostBuffer text_mask(DType::kBool, b * t);
    std::vector<unsigned char> full_mask;
    if (c.text_mask) {
      auto* m = static_cast<unsigned char*>(text_mask.data());
      for (std::int64_t i = 0; i < b * t; ++i) m[i] = (rng() % 3) != 0;
      for (std::int64_t i = 0; i < b; ++i) m[i * t] = 1;  // at least one text key per batch
    }
    AttentionConfig config;
    config.default_spec = AttentionSpec{.backend = c.backend};
    AttentionLayerDesc desc;
    desc.num_heads = c.heads;
    desc.num_kv_heads = c.kv_heads;
    desc.head_size = static_cast<int>(d);
    SpRun result;
    // The reference: one rank, the whole sequence, all heads.
    {
      Selector selector(platform_, &registry_);
      const bool front = !c.text_rear;
      Host4 fq = front ? concat_seq(jq.view, q.view) : concat_seq(q.view, jq.view);
      Host4 fk = front ? concat_seq(jk.view, k.view) : concat_seq(k.view, jk.view);
      Host4 fv = front ? concat_seq(jv.view, v.view) : concat_seq(v.view, jv.view);
      result.reference = Host4(c.dtype, b, s + t, c.heads, d);
      result.text_offset = front ? 0 : s;
      result.image_offset = front ? t : 0;
      AttentionProblem p{.q = fq.view, .k = fk.view, .v = fv.view, .out = result.reference.view};
      if (c.text_mask) {
        full_mask.assign(static_cast<std::size_t>(b * (s + t)), 1);
        const auto* m = static_cast<const unsigned char*>(text_mask.data());
        for (std::int64_t i = 0; i < b; ++i)
          for (std::int64_t j = 0; j < t; ++j) full_mask[i * (s + t) + result.text_offset + j] = m[i * t + j];
        p.mask = TensorView::Contiguous(full_mask.data(), DType::kBool, {b, s + t});
      }
      auto layer = Attention::Create(desc, config, selector);
      result.reference_status = layer.ok() ? layer->forward(p) : layer.status();
    }
    const int world = c.degrees.world();
    auto comms = make_in_process_group(world, std::chrono::seconds(60));
    EXPECT_TRUE(comms.ok());
    result.ranks.resize(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        RankResult& mine = result.ranks[r];
        mine.shard = image_shard(s, world, r);
        Host4 lq = slice_seq(q.view, mine.shard.begin, mine.shard.length);
        Host4 lk = slice_seq(k.view, mine.shard.begin, mine.shard.length);
        Host4 lv = slice_seq(v.view, mine.shard.begin, mine.shard.length);
        mine.out = Host4(c.dtype, b, mine.shard.length, c.heads, d);
        poison(mine.out.view);
        // Text tokens are replicated: each rank gets its own copy.
        Host4 tq = slice_seq(jq.view, 0, t), tk = slice_seq(jk.view, 0, t), tv = slice_seq(jv.view, 0, t);
        mine.joint_out = Host4(c.dtype, b, t, c.heads, d);
        poison(mine.joint_out.view);
        ParallelCall call{.q = lq.view, .k = lk.view, .v = lv.view, .out = mine.out.view, .image_tokens = s};
        if (t > 0) {
          call.joint_q = tq.view;
          call.joint_k = tk.view;
          call.joint_v = tv.view;
          call.joint_out = mine.joint_out.view;
          call.joint_placement = c.text_rear ? JointPlacement::kRear : JointPlacement::kFront;
          if (c.text_mask) call.joint_key_mask = TensorView::Contiguous(text_mask.data(), DType::kBool, {b, t});
        }
        if (on_rank) on_rank(r, call);
        Selector selector(platform_, &registry_);
        auto layer = ParallelAttention::Create(desc, c.degrees, *(*comms)[r], config, selector);
        if (!layer.ok()) {
          mine.status = layer.status();
          return;
        }
        if (c.warm_with_other_placement && t > 0) {
          ParallelCall warm = call;
          warm.joint_placement = c.text_rear ? JointPlacement::kFront : JointPlacement::kRear;
          mine.status = (*layer)->forward(warm);
          if (!mine.status.ok()) return;
          poison(mine.out.view);
          poison(mine.joint_out.view);
        }
        mine.status = (*layer)->forward(call);
      });
    }
    for (auto& th : threads) th.join();
    return result;
  }

 private:
  Registry registry_;
  std::shared_ptr<const Platform> platform_;
};

// Largest |a - b| over rows [a0, a0 + n) of a and [b0, b0 + n) of b (NaN when either is NaN).
inline double max_abs_diff(const TensorView& a, std::int64_t a0, const TensorView& b, std::int64_t b0, std::int64_t n) {
  double worst = 0;
  const std::int64_t inner = a.size(2) * a.size(3);
  for (std::int64_t i = 0; i < a.size(0); ++i)
    for (std::int64_t sq = 0; sq < n; ++sq)
      for (std::int64_t e = 0; e < inner; ++e) {
        const double x = read_element(a, (i * a.size(1) + a0 + sq) * inner + e);
        const double y = read_element(b, (i * b.size(1) + b0 + sq) * inner + e);
        const double diff = std::fabs(x - y);
        if (std::isnan(diff)) return diff;
        worst = std::max(worst, diff);
      }
  return worst;
}

inline bool all_nan(const TensorView& t) {
  bool all = true;
  diffattn::testing::for_each_offset(t, [&](std::int64_t off) { all = all && std::isnan(read_element(t, off)); });
  return all;
}

}  // namespace diffattn::parallel::testing
