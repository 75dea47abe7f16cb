// The parity harness on the CPU: every registered backend that can run on this machine is run on
// every generated case and compared with the float64 oracle under FlashAttention-3's tolerance
// rule. A new backend joins by registering; unsupported cases are printed with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "parity/harness.h"
#include "parity/parity_check.h"

namespace diffattn {
namespace {

TEST(Parity, EveryBackendThatRunsOnThisCpuMatchesTheOracle) {
  const PlatformInfo info = probe_cpu_platform();
  Registry& registry = global_registry();
  const auto platform = make_platform(info, registry);

  std::vector<const BackendDescriptor*> runnable;
  for (const std::string& name : registry.names()) {
    const BackendDescriptor* d = registry.find(name).value();
    if (auto why = testing::backend_unavailable_reason(*d, info, DeviceKind::kCpu)) {
      std::printf("[ NOT RUN  ] %s: %s\n", name.c_str(), why->c_str());
      continue;
    }
    runnable.push_back(d);
  }
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
      const std::string diff = testing::compare(p, expected);
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

}  // namespace
}  // namespace diffattn
