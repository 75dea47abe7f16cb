// The CPU kernel on its own, once per instruction-set build this machine can run, over the parity
// cases; plus its causal alignment and ISA refusals. Fully masked rows and refusals of the backend
// are the parity harness's properties (tests/parity/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cpu/tiles.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

using testing::CaseData;
using testing::ParityCase;

// The float64 oracle dominates the run time, so each case is computed once for all kernels.
TEST(SdpaCpu, EveryAvailableKernelMatchesTheOracleOnEveryParityCase) {
  std::random_device seed_source;
  const auto seed = (static_cast<std::uint64_t>(seed_source()) << 32) | seed_source();
  std::mt19937_64 rng(seed);
  int runs = 0;
  for (const ParityCase& c : testing::parity_cases()) {
    auto data = testing::make_case_data(c, rng);
    const Status valid = validate_problem(data->problem);
    ASSERT_TRUE(valid.ok()) << c.name() << ": " << valid.message();
    testing::Expectation expected = testing::expect(data->problem);
    for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (!cpu_isa_available(isa)) continue;
      testing::poison(data->problem.out);
      if (data->problem.lse) testing::poison(*data->problem.lse);
      const Status status = run_sdpa_cpu(data->problem, isa);
      ASSERT_TRUE(status.ok()) << c.name() << " on " << cpu_isa_name(isa) << ": " << status.message();
      EXPECT_EQ(testing::compare(data->problem, expected), "")
          << c.name() << " on " << cpu_isa_name(isa) << " (seed " << seed << ")";
      ++runs;
    }
  }
  EXPECT_GE(runs, static_cast<int>(testing::parity_cases().size()));
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (!cpu_isa_available(isa)) std::printf("[  NOTE    ] %s kernel not run: this CPU lacks it\n", cpu_isa_name(isa).data());
}

TEST(SdpaCpu, CausalIsTopLeftAligned) {
  // With Sq > Skv, query 0 sees only key 0 (top-left), so its output is exactly v[0].
  std::mt19937_64 rng(std::random_device{}());
  ParityCase c;
  c.seq_q = 6, c.seq_kv = 3, c.causal = true, c.heads_q = c.heads_kv = 1, c.head_size = c.head_size_v = 16;
  auto data = testing::make_case_data(c, rng);
  ASSERT_TRUE(run_sdpa_cpu(data->problem).ok());
  const AttentionProblem& p = data->problem;
  for (std::int64_t e = 0; e < 16; ++e)
    EXPECT_FLOAT_EQ(testing::read_element(p.out, testing::element_offset(p.out, {0, 0, 0, e})),
                    testing::read_element(p.v, testing::element_offset(p.v, {0, 0, 0, e})));
}

TEST(SdpaCpu, UnavailableIsaIsRefusedWithAReason) {
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu_isa_available(isa)) continue;
    AttentionProblem p;
    const Status s = run_sdpa_cpu(p, isa);
    EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
    EXPECT_NE(s.message().find(cpu_isa_name(isa)), std::string::npos);
  }
  EXPECT_TRUE(cpu_isa_available(CpuIsa::kPortable));
  EXPECT_TRUE(cpu_isa_available(default_cpu_isa()));
}

TEST(CpuTiles, LargeQueryBlocksShrinkUntilEveryThreadHasWork) {
  EXPECT_EQ(cpu::choose_cpu_tiles(64, 4096, 2, 128, 128).block_q, 512);
  EXPECT_EQ(cpu::choose_cpu_tiles(64, 4096, 2, 256, 256).block_q, 256);
  EXPECT_EQ(cpu::choose_cpu_tiles(64, 4096, 2, 512, 512).block_q, 128);
  const cpu::CpuTiles few = cpu::choose_cpu_tiles(1, 256, 8, 64, 64);
  EXPECT_LT(few.block_q, 128);
  EXPECT_GE(few.block_q, 16);
  EXPECT_GT(cpu::choose_cpu_tiles(1, 1, 2, 8, 8).block_q, 0);
}

}  // namespace
}  // namespace diffattn
