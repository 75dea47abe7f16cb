#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "diffattn/registry.h"
#include "layer/backend_call_check.h"

// Runs under ThreadSanitizer in the tsan preset, which builds only the selection core.
namespace diffattn {
namespace {

ProblemShape shape_with_keys(std::int64_t keys) {
  ProblemShape shape;
  shape.dtype = DType::kFloat32, shape.seqlen_q = 4, shape.seqlen_kv = keys, shape.heads_q = shape.heads_kv = 2;
  shape.head_size = shape.head_size_v = 16;
  return shape;
}

// Threads of one layer share its kept verdicts; more shapes than it keeps make them replace each other.
TEST(BackendCallCheckConcurrency, ConcurrentCallsOfManyShapesEachGetTheirOwnVerdict) {
  BackendDescriptor d;
  d.name = "ODD_KEYS_ATTN";
  d.caps.devices = {DeviceKind::kCpu};
  d.caps.dtypes = {DType::kFloat32};
  d.extra_problem_reasons = [](const ProblemShape& shape) {
    std::vector<std::string> reasons;
    if (shape.seqlen_kv % 2 == 1) reasons.push_back("odd key counts are not supported");
    return reasons;
  };
  const BackendCallCheck check(d, /*explicit_choice=*/true);
  constexpr std::int64_t kShapes = static_cast<std::int64_t>(BackendCallCheck::kMaxVerdicts) + 8;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&check, &wrong, t] {
      for (int i = 0; i < 400; ++i) {
        const std::int64_t keys = 1 + (i * 7 + t) % kShapes;
        const Status status = check.check(shape_with_keys(keys));
        if (status.ok() != (keys % 2 == 0)) ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace diffattn
