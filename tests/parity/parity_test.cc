// The parity harness on the CPU: every registered backend that can run on this machine is run on
// every generated case and compared with the float64 oracle under FlashAttention-3's tolerance
// rule (8-bit backends under parity/quantized_tolerance.h's), and keeps the properties of parity/properties.h. A new backend joins by registering;
// unsupported cases are printed with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/selector.h"
#include "diffattn/registry.h"
#include "parity/fresh_rng.h"
#include "parity/harness.h"
#include "parity/parity_check.h"
#include "parity/properties.h"

namespace diffattn {
namespace {

TEST(Parity, EveryBackendThatRunsOnThisCpuMatchesTheOracle) {
  const PlatformInfo info = probe_cpu_platform();
  Registry& registry = global_registry();
  const auto platform = make_platform(info, registry);

  const auto runnable = testing::runnable_backends(registry, info, DeviceKind::kCpu);
  ASSERT_FALSE(runnable.empty()) << "no registered backend runs on this CPU; TORCH_SDPA always should";

  std::random_device seed_source;
  const auto seed = (static_cast<std::uint64_t>(seed_source()) << 32) | seed_source();
  std::mt19937_64 rng(seed);
  std::map<std::string, int> passed_cases, unsupported_cases;
  for (const testing::ParityCase& c : testing::parity_cases()) {
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& p = data->problem;
    testing::Expectation expected = testing::expect(p);
    for (const BackendDescriptor* d : runnable) {
      const auto reasons = testing::case_unsupported_reasons(*d, *platform, p.shape());
      if (!reasons.empty()) {
        std::printf("[ UNSUPPORTED ] %s %s: %s\n", d->name.c_str(), c.name().c_str(),
                    testing::join_reasons(reasons).c_str());
        ++unsupported_cases[d->name];
        continue;
      }
      auto backend = registry.create(d->name, testing::init_for(p, info));
      ASSERT_TRUE(backend.ok()) << d->name << ": " << backend.status().message();
      testing::poison(p.out);
      if (p.lse) testing::poison(*p.lse);
      const Status status = (*backend)->forward(p, nullptr);
      ASSERT_TRUE(status.ok()) << d->name << " " << c.name() << ": " << status.message();
      const std::string diff = testing::compare(d->caps, p, expected);
      EXPECT_EQ(diff, "") << d->name << " " << c.name() << " (seed " << seed << ")";
      if (diff.empty()) ++passed_cases[d->name];
    }
  }
  for (const BackendDescriptor* d : runnable)
    std::printf("[ PARITY   ] %s: %d cases within tolerance, %d unsupported\n", d->name.c_str(),
                passed_cases[d->name], unsupported_cases[d->name]);
  // The correctness reference must cover every case the harness generates.
  EXPECT_EQ(passed_cases["TORCH_SDPA"], static_cast<int>(testing::parity_cases().size()));
}

using testing::fresh_rng;

// Poisons the outputs, runs `p` through a fresh instance of `d` and returns its status; a backend
// that cannot even be created for the call has refused it too.
// Runs `p` through a layer declared for `init_problem`'s shapes with `d` named explicitly: the path
// every caller takes (only the layer checks a call), with the outputs poisoned first.
Status run_poisoned(const BackendDescriptor& d, const PlatformInfo& info, const AttentionProblem& init_problem,
                    const AttentionProblem& p) {
  testing::poison(init_problem.out);
  if (init_problem.lse) testing::poison(*init_problem.lse);
  auto layer = testing::layer_for(d, info, init_problem);
  if (!layer.ok()) return layer.status();
  return layer->forward(p, nullptr);
}

TEST(Parity, FullyMaskedRowsGiveZerosAndNegativeInfinityLseOrAreRefused) {
  const PlatformInfo info = probe_cpu_platform();
  const auto platform = make_platform(info, global_registry());
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  int checked = 0;
  for (const BackendDescriptor* d : testing::runnable_backends(global_registry(), info, DeviceKind::kCpu)) {
    const auto c = testing::fully_masked_case_for(*d, *platform, DeviceKind::kCpu);
    if (!c) {
      std::printf("[ NOT APPLICABLE ] %s takes no mask here\n", d->name.c_str());
      continue;
    }
    auto data = testing::make_case_data(*c, rng);
    const Status status = run_poisoned(*d, info, data->problem, data->problem);
    if (status.code() == ErrorCode::kUnsupported) {  // a refusal that names the alternative is allowed
      EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << " " << c->name() << ": " << status.message();
      continue;
    }
    ASSERT_TRUE(status.ok()) << d->name << " " << c->name() << ": " << status.message();
    EXPECT_EQ(testing::check_fully_masked_rows(*c, data->problem), "") << d->name << " " << c->name() << " (seed " << seed << ")";
    ++checked;
  }
  EXPECT_GE(checked, 1) << "TORCH_SDPA always runs fully masked rows on the CPU";
}

TEST(Parity, RefusedCallsWriteNothing) {
  const PlatformInfo info = probe_cpu_platform();
  const auto platform = make_platform(info, global_registry());
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  int refusals = 0;
  for (const BackendDescriptor* d : testing::runnable_backends(global_registry(), info, DeviceKind::kCpu)) {
    // Calls whose shapes disagree: every backend must refuse them.
    if (auto c = testing::plain_case_for(*d, *platform, DeviceKind::kCpu)) {
      for (const testing::InvalidCall& bad : testing::invalid_calls()) {
        auto data = testing::make_case_data(*c, rng);
        AttentionProblem call = data->problem;
        bad.apply(call);
        const Status status = run_poisoned(*d, info, data->problem, call);
        EXPECT_FALSE(status.ok()) << d->name << " ran a call with " << bad.name;
        EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << ", " << bad.name << ": " << status.message();
        ++refusals;
      }
    }
    // Cases the backend declares it cannot run: refused as well, with nothing written.
    for (const testing::ParityCase& c : testing::parity_cases()) {
      auto data = testing::make_case_data(c, rng);
      if (testing::case_unsupported_reasons(*d, *platform, data->problem.shape()).empty()) continue;
      const Status status = run_poisoned(*d, info, data->problem, data->problem);
      EXPECT_FALSE(status.ok()) << d->name << " ran " << c.name() << ", which it declares unsupported";
      EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << " " << c.name() << ": " << status.message();
      ++refusals;
    }
  }
  EXPECT_GE(refusals, static_cast<int>(testing::invalid_calls().size()));
}

}  // namespace
}  // namespace diffattn
