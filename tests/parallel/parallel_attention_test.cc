#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "parallel/parallel_harness.h"

namespace diffattn::parallel {
namespace {

using ::testing::HasSubstr;
using testing::all_nan;
using testing::max_abs_diff;
using testing::SpCase;
using testing::SpHarness;
using testing::SpRun;

double tolerance(DType dtype) { return dtype == DType::kFloat32 ? 2e-5 : 2e-2; }

std::string describe(const SpCase& c) {
  return c.degrees.describe() + " heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " image " +
         std::to_string(c.image_tokens) + " text " + std::to_string(c.text_tokens) + (c.text_rear ? " rear" : "") +
         (c.text_mask ? " masked" : "") + " batch " + std::to_string(c.batch) + " " + std::string(dtype_name(c.dtype));
}

// Every rank's image rows and text rows equal the single-rank output of the same backend.
void expect_matches_single_rank(const SpCase& c) {
  SCOPED_TRACE(describe(c));
  SpHarness harness;
  SpRun run = harness.run(c);
  ASSERT_TRUE(run.reference_status.ok()) << run.reference_status.ToString();
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    ASSERT_TRUE(rank.status.ok()) << "rank " << r << ": " << rank.status.ToString();
    EXPECT_LE(max_abs_diff(rank.out.view, 0, run.reference.view, run.image_offset + rank.shard.begin, rank.shard.length),
              tolerance(c.dtype))
        << "image rows of rank " << r;
    if (c.text_tokens > 0) {
      EXPECT_LE(max_abs_diff(rank.joint_out.view, 0, run.reference.view, run.text_offset, c.text_tokens),
                tolerance(c.dtype))
          << "text rows of rank " << r;
    }
  }
}

TEST(SequenceParallel, UlyssesEqualsOneRank) {
  for (int u : {2, 4}) expect_matches_single_rank({.degrees = {u, 1}});
  expect_matches_single_rank({.degrees = {2, 1}, .batch = 2});
  expect_matches_single_rank({.degrees = {4, 1}, .dtype = DType::kBFloat16});
}

TEST(SequenceParallel, RingEqualsOneRank) {
  for (int r : {2, 4}) expect_matches_single_rank({.degrees = {1, r}});
  expect_matches_single_rank({.degrees = {1, 2}, .batch = 2});
  expect_matches_single_rank({.degrees = {1, 4}, .dtype = DType::kBFloat16});
}

TEST(SequenceParallel, HybridEqualsOneRank) {
  expect_matches_single_rank({.degrees = {2, 2}});
  expect_matches_single_rank({.degrees = {2, 2}, .batch = 2, .dtype = DType::kBFloat16});
  expect_matches_single_rank({.degrees = {4, 2}, .image_tokens = 64});
}

TEST(SequenceParallel, JointTextFrontAndRearEqualsOneRank) {
  for (ParallelDegrees d : {ParallelDegrees{2, 1}, ParallelDegrees{1, 2}, ParallelDegrees{2, 2}, ParallelDegrees{4, 1}}) {
    expect_matches_single_rank({.degrees = d, .text_tokens = 12});
    expect_matches_single_rank({.degrees = d, .text_tokens = 7, .text_rear = true});
    expect_matches_single_rank({.degrees = d, .text_tokens = 9, .text_mask = true, .batch = 2});
  }
}

TEST(SequenceParallel, ALayerCalledWithTheTextOnTheOtherSideStaysExact) {
  for (ParallelDegrees d : {ParallelDegrees{2, 1}, ParallelDegrees{1, 2}}) {
    expect_matches_single_rank({.degrees = d, .image_tokens = 45, .text_tokens = 6, .text_rear = true, .text_mask = true,
                                .warm_with_other_placement = true});
    expect_matches_single_rank({.degrees = d, .image_tokens = 45, .text_tokens = 6, .text_mask = true,
                                .warm_with_other_placement = true});
  }
}

TEST(SequenceParallel, PaddedImageTokensAreMaskedExactly) {
  // 45 tokens over 2 or 4 ranks: the last ranks hold fewer, some ring blocks are partly or only padding.
  for (ParallelDegrees d : {ParallelDegrees{2, 1}, ParallelDegrees{4, 1}, ParallelDegrees{1, 2}, ParallelDegrees{1, 4},
                            ParallelDegrees{2, 2}}) {
    expect_matches_single_rank({.degrees = d, .image_tokens = 45});
    expect_matches_single_rank({.degrees = d, .image_tokens = 45, .text_tokens = 5, .text_mask = true});
  }
  expect_matches_single_rank({.degrees = {1, 4}, .image_tokens = 5});  // ranks with no tokens at all
  expect_matches_single_rank({.degrees = {2, 2}, .image_tokens = 6, .dtype = DType::kBFloat16});
}

TEST(SequenceParallel, GroupedQueryAttentionEqualsOneRank) {
  expect_matches_single_rank({.degrees = {2, 1}, .heads = 8, .kv_heads = 2});
  expect_matches_single_rank({.degrees = {4, 1}, .heads = 8, .kv_heads = 4, .text_tokens = 6});
  expect_matches_single_rank({.degrees = {1, 4}, .heads = 8, .kv_heads = 1, .image_tokens = 45});
  expect_matches_single_rank({.degrees = {2, 2}, .heads = 12, .kv_heads = 4, .text_tokens = 5, .text_rear = true});
}

TEST(SequenceParallel, PaddingWouldBeVisibleWithoutItsMask) {
  // The check above can fail: zero keys left unmasked change the result by far more than the tolerance.
  SpHarness harness;
  SpRun run = harness.run({.degrees = {1, 1}, .image_tokens = 45});
  ASSERT_TRUE(run.reference_status.ok());
  SpRun padded = harness.run({.degrees = {1, 1}, .image_tokens = 48});
  ASSERT_TRUE(padded.ranks[0].status.ok());
  EXPECT_GT(max_abs_diff(padded.ranks[0].out.view, 0, run.reference.view, 0, 45), 1e-3);
}

TEST(SequenceParallel, IndivisibleHeadsAreRefusedWithTheDegreesThatWork) {
  SpHarness harness;
  SpRun run = harness.run({.degrees = {4, 1}, .heads = 6, .kv_heads = 6});
  for (const auto& rank : run.ranks) {
    EXPECT_EQ(rank.status.code(), ErrorCode::kInvalidConfig);
    EXPECT_THAT(rank.status.message(), HasSubstr("do not divide by ulysses 4"));
    EXPECT_THAT(rank.status.message(), HasSubstr("{1, 2, 3, 6}"));
    EXPECT_TRUE(all_nan(rank.out.view));
  }
  SpRun gqa = harness.run({.degrees = {4, 1}, .heads = 8, .kv_heads = 2});
  EXPECT_THAT(gqa.ranks[0].status.message(), HasSubstr("2 key/value heads"));
}

// TORCH_SDPA's kernels under a name that declares neither LSE nor masks, counting its calls.
std::atomic<int> g_plain_calls{0};

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return "PLAIN_ATTN"; }
  Status forward(const AttentionProblem& p, void* stream) override {
    ++g_plain_calls;
    return inner_->forward(p, stream);
  }

 private:
  std::unique_ptr<Backend> inner_;
};

void register_plain_backend(Registry& registry) {
  BackendDescriptor d;
  d.name = "PLAIN_ATTN";
  d.summary = "test backend without LSE or masks";
  d.caps.devices = {DeviceKind::kCpu};
  d.caps.dtypes = {DType::kFloat32, DType::kBFloat16};
  d.caps.key_padding_mask = false;
  d.caps.dense_mask = false;
  d.caps.lse = false;
  d.create = [&registry](const BackendInit& init) -> Result<std::unique_ptr<Backend>> {
    DIFFATTN_ASSIGN_OR_RETURN(auto inner, registry.create("TORCH_SDPA", init));
    return std::unique_ptr<Backend>(new CountingBackend(std::move(inner)));
  };
  ASSERT_TRUE(registry.add(std::move(d)).ok());
}

TEST(SequenceParallel, BackendWithoutLseIsRefusedForTheRingBeforeAnyWork) {
  SpHarness harness;
  register_plain_backend(harness.registry());
  g_plain_calls = 0;
  for (ParallelDegrees d : {ParallelDegrees{1, 2}, ParallelDegrees{2, 2}}) {
    SpRun run = harness.run({.degrees = d, .backend = "PLAIN_ATTN"});
    for (const auto& rank : run.ranks) {
      EXPECT_EQ(rank.status.code(), ErrorCode::kUnsupported);
      EXPECT_THAT(rank.status.message(), HasSubstr("log-sum-exp"));
      EXPECT_THAT(rank.status.message(), HasSubstr("TORCH_SDPA"));
      EXPECT_TRUE(all_nan(rank.out.view));
    }
  }
  // Only the two single-rank references ran.
  EXPECT_EQ(g_plain_calls.load(), 2);
}

TEST(SequenceParallel, BackendWithoutMaskRunsUlyssesButIsRefusedWhenPaddingNeedsTheMask) {
  SpHarness harness;
  register_plain_backend(harness.registry());
  expect_matches_single_rank({.degrees = {2, 1}, .text_tokens = 4});  // sanity of the harness
  SpCase even{.degrees = {2, 1}, .image_tokens = 48, .text_tokens = 4, .backend = "PLAIN_ATTN"};
  SpRun ok = harness.run(even);
  for (const auto& rank : ok.ranks) {
    ASSERT_TRUE(rank.status.ok()) << rank.status.ToString();
    EXPECT_LE(max_abs_diff(rank.out.view, 0, ok.reference.view, ok.image_offset + rank.shard.begin, rank.shard.length), 2e-5);
  }
  g_plain_calls = 0;
  SpRun padded = harness.run({.degrees = {2, 1}, .image_tokens = 47, .backend = "PLAIN_ATTN"});
  for (const auto& rank : padded.ranks) {
    EXPECT_EQ(rank.status.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(rank.status.message(), HasSubstr("47 image tokens do not divide by 2 ranks"));
    EXPECT_THAT(rank.status.message(), HasSubstr("TORCH_SDPA"));
    EXPECT_TRUE(all_nan(rank.out.view));
  }
  EXPECT_EQ(g_plain_calls.load(), 1);  // the reference alone
}

TEST(SequenceParallel, ARankWithBadInputsStopsEveryRankWithItsReason) {
  SpHarness harness;
  const auto start = std::chrono::steady_clock::now();
  SpRun run = harness.run({.degrees = {2, 2}, .text_tokens = 4}, [](int rank, ParallelCall& call) {
    if (rank == 2) call.k.shape[2] = 3;  // a rank whose K has the wrong heads
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(run.ranks[2].status.code(), ErrorCode::kInvalidInput);
  EXPECT_THAT(run.ranks[2].status.message(), HasSubstr("rank 2's k"));
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(run.ranks[r].status.ok()) << "rank " << r;
    EXPECT_THAT(run.ranks[r].status.message(), HasSubstr("rank 2's k")) << "rank " << r;
  }
}

TEST(SequenceParallel, WrongWorldSizeAndCausalLayersAreRefused) {
  SpHarness harness;
  auto comms = make_in_process_group(3);
  ASSERT_TRUE(comms.ok());
  Selector selector(harness.platform(), &harness.registry());
  AttentionLayerDesc desc{.num_heads = 8, .head_size = 32};
  auto wrong = ParallelAttention::Create(desc, {2, 2}, *(*comms)[0], AttentionConfig{}, selector);
  EXPECT_THAT(wrong.status().message(), HasSubstr("needs 4 ranks"));
  auto one = make_in_process_group(1);
  desc.causal = true;
  auto causal = ParallelAttention::Create(desc, {1, 1}, *(*one)[0], AttentionConfig{}, selector);
  EXPECT_EQ(causal.status().code(), ErrorCode::kUnsupported);
}

TEST(SequenceShards, ShardsCoverTheTokensOnceAndPaddingGoesLast) {
  for (std::int64_t tokens : {1, 5, 45, 48, 75600}) {
    for (int world : {1, 2, 3, 4, 8}) {
      std::int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const ShardRange s = image_shard(tokens, world, r);
        EXPECT_EQ(s.begin, std::min(next, tokens));
        next = s.begin + s.length;
      }
      EXPECT_EQ(next, tokens);
    }
  }
  const SequencePlan p = plan_sequence(45, {2, 2});
  EXPECT_EQ(p.local, 12);
  EXPECT_EQ(p.chunk, 24);
  EXPECT_EQ(p.valid_in_block(0), 24);
  EXPECT_EQ(p.valid_in_block(1), 21);
}

}  // namespace
}  // namespace diffattn::parallel
