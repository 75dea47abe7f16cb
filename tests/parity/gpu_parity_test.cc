// The parity harness on the GPU: the same generated cases, copied to device memory, run through
// every registered backend that can run on the probed CUDA device, compared with the float64
// oracle on the host. Skips (never passes silently) without a CUDA build or device.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "parity/harness.h"
#include "parity/parity_check.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace diffattn {
namespace {

#if DIFFATTN_HAVE_CUDA

// Device copies of a case's host buffers, and the problem rebased onto them.
class DeviceCase {
 public:
  explicit DeviceCase(testing::CaseData& host) : host_(host) {
    for (auto& buffer : host.buffers) {
      void* device = nullptr;
      ok_ = ok_ && cudaMalloc(&device, buffer->size_bytes()) == cudaSuccess;
      device_.push_back(device);
    }
    problem_ = host.problem;
    for (TensorView* v : views(problem_)) rebase(*v);
  }
  ~DeviceCase() {
    for (void* d : device_) cudaFree(d);
  }
  bool ok() const { return ok_; }
  AttentionProblem& problem() { return problem_; }

  // Host buffers (inputs and poisoned outputs) to the device.
  bool upload() {
    for (std::size_t i = 0; i < device_.size(); ++i)
      if (cudaMemcpy(device_[i], host_.buffers[i]->data(), host_.buffers[i]->size_bytes(), cudaMemcpyHostToDevice) !=
          cudaSuccess)
        return false;
    return true;
  }
  // Everything back, so that the host problem's out and lse hold what the backend wrote.
  bool download() {
    if (cudaDeviceSynchronize() != cudaSuccess) return false;
    for (std::size_t i = 0; i < device_.size(); ++i)
      if (cudaMemcpy(host_.buffers[i]->data(), device_[i], host_.buffers[i]->size_bytes(), cudaMemcpyDeviceToHost) !=
          cudaSuccess)
        return false;
    return true;
  }

 private:
  static std::vector<TensorView*> views(AttentionProblem& p) {
    std::vector<TensorView*> out = {&p.q, &p.k, &p.v, &p.out};
    for (auto* opt : {&p.mask, &p.lse, &p.cu_seqlens_q, &p.cu_seqlens_k})
      if (*opt) out.push_back(&**opt);
    return out;
  }
  void rebase(TensorView& v) {
    auto* p = static_cast<char*>(v.data);
    for (std::size_t i = 0; i < device_.size(); ++i) {
      auto* base = static_cast<char*>(host_.buffers[i]->data());
      if (p >= base && p < base + host_.buffers[i]->size_bytes()) {
        v.data = static_cast<char*>(device_[i]) + (p - base);
        v.device = {DeviceKind::kCuda, 0};
        return;
      }
    }
    v.device = {DeviceKind::kCuda, 0};  // empty views own no memory
  }

  testing::CaseData& host_;
  std::vector<void*> device_;
  AttentionProblem problem_;
  bool ok_ = true;
};

#endif

TEST(GpuParity, EveryBackendThatRunsOnThisGpuMatchesTheOracle) {
#if !DIFFATTN_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA support";
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  auto probed = probe_cuda_platform(0);
  ASSERT_TRUE(probed.ok()) << probed.status().message();
  const PlatformInfo info = *probed;
  Registry& registry = global_registry();
  const auto platform = make_platform(info, registry);

  std::vector<const BackendDescriptor*> runnable;
  for (const std::string& name : registry.names()) {
    const BackendDescriptor* d = registry.find(name).value();
    if (auto why = testing::backend_unavailable_reason(*d, info, DeviceKind::kCuda)) {
      std::printf("[ NOT RUN  ] %s: %s\n", name.c_str(), why->c_str());
      continue;
    }
    runnable.push_back(d);
  }
  if (runnable.empty()) GTEST_SKIP() << "no registered backend runs on " << info.describe();

  std::random_device seed_source;
  const auto seed = (static_cast<std::uint64_t>(seed_source()) << 32) | seed_source();
  std::mt19937_64 rng(seed);
  std::map<std::string, int> passed, unsupported;
  for (const testing::ParityCase& c : testing::parity_cases()) {
    auto data = testing::make_case_data(c, rng);
    AttentionProblem& host = data->problem;
    testing::Expectation expected = testing::expect(host);
    DeviceCase device(*data);
    ASSERT_TRUE(device.ok()) << "cudaMalloc failed for " << c.name();
    for (const BackendDescriptor* d : runnable) {
      const auto reasons = testing::case_unsupported_reasons(*d, *platform, device.problem().shape());
      if (!reasons.empty()) {
        std::printf("[ UNSUPPORTED ] %s %s: %s\n", d->name.c_str(), c.name().c_str(),
                    testing::join_reasons(reasons).c_str());
        ++unsupported[d->name];
        continue;
      }
      auto backend = registry.create(d->name, testing::init_for(host, info));
      ASSERT_TRUE(backend.ok()) << d->name << ": " << backend.status().message();
      testing::poison(host.out);
      if (host.lse) testing::poison(*host.lse);
      ASSERT_TRUE(device.upload());
      const Status status = (*backend)->forward(device.problem(), nullptr);
      // Some refusals depend on the data, not the shape (CUDNN_ATTN needs masks that keep a prefix
      // of the keys): they are reported like the shape-level ones.
      if (status.code() == ErrorCode::kUnsupported) {
        std::printf("[ UNSUPPORTED ] %s %s: %s\n", d->name.c_str(), c.name().c_str(), status.message().c_str());
        ++unsupported[d->name];
        continue;
      }
      ASSERT_TRUE(status.ok()) << d->name << " " << c.name() << ": " << status.message();
      ASSERT_TRUE(device.download()) << d->name << " " << c.name() << ": CUDA error after the run";
      const std::string diff = testing::compare(host, expected);
      EXPECT_EQ(diff, "") << d->name << " " << c.name() << " on " << info.describe() << " (seed " << seed << ")";
      if (diff.empty()) ++passed[d->name];
    }
  }
  for (const BackendDescriptor* d : runnable)
    std::printf("[ PARITY   ] %s on %s: %d cases within tolerance, %d unsupported\n", d->name.c_str(),
                info.describe().c_str(), passed[d->name], unsupported[d->name]);
#endif
}

}  // namespace
}  // namespace diffattn
