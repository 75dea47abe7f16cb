// The parity harness on the GPU: the same generated cases, copied to device memory, run through
// every registered backend that can run on the probed CUDA device, compared with the float64
// oracle on the host; and the properties of parity/properties.h, with CUDA graph replay. Skips
// (never passes silently) without a CUDA build or device.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "parity/fresh_rng.h"
#include "parity/harness.h"
#include "parity/parity_check.h"
#include "parity/properties.h"

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
  // Where a host view's memory lives on the device (the same offset in the device copy).
  void* device_address(const TensorView& host_view) {
    TensorView v = host_view;
    rebase(v);
    return v.data;
  }

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

// The probed device, its platform and the backends that run on it; empty `runnable` when there
// is no device (the caller skips).
struct GpuHarness {
  PlatformInfo info;
  std::shared_ptr<const Platform> platform;
  std::vector<const BackendDescriptor*> runnable;
  std::string skip_reason;
};

GpuHarness gpu_harness() {
  GpuHarness h;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    h.skip_reason = "no CUDA device";
    return h;
  }
  auto probed = probe_cuda_platform(0);
  if (!probed.ok()) {
    h.skip_reason = "probing the CUDA device failed: " + probed.status().message();
    return h;
  }
  h.info = *probed;
  h.platform = make_platform(h.info, global_registry());
  h.runnable = testing::runnable_backends(global_registry(), h.info, DeviceKind::kCuda);
  if (h.runnable.empty()) h.skip_reason = "no registered backend runs on " + h.info.describe();
  return h;
}

using testing::fresh_rng;

// Poisons the host outputs, uploads the case, runs `call` (the device problem or a variant of it)
// through a fresh layer that names `d`, on the default stream and brings the outputs back. A backend
// that cannot even be created for the call has refused it too.
Status run_poisoned(const BackendDescriptor& d, const PlatformInfo& info, testing::CaseData& data, DeviceCase& device,
                    const AttentionProblem& call) {
  testing::poison(data.problem.out);
  if (data.problem.lse) testing::poison(*data.problem.lse);
  if (!device.upload()) return Internal("could not copy the case to the GPU");
  auto layer = testing::layer_for(d, info, data.problem);
  if (!layer.ok()) return layer.status();
  const Status status = layer->forward(call, nullptr);
  if (!device.download()) return Internal("CUDA error after the call (" + status.ToString() + ")");
  return status;
}

#define SKIP_WITHOUT_GPU_HARNESS(h) \
  if (!(h).skip_reason.empty()) GTEST_SKIP() << (h).skip_reason

#endif

TEST(GpuParity, EveryBackendThatRunsOnThisGpuMatchesTheOracle) {
#if !DIFFATTN_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA support";
#else
  const GpuHarness h = gpu_harness();
  SKIP_WITHOUT_GPU_HARNESS(h);
  Registry& registry = global_registry();
  const PlatformInfo& info = h.info;
  const auto& platform = h.platform;
  const auto& runnable = h.runnable;
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
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
      // Some refusals depend on the data or on the library, not the shape (cuDNN's own support
      // check): they are reported like the shape-level ones, and must write nothing either.
      if (status.code() == ErrorCode::kUnsupported) {
        std::printf("[ UNSUPPORTED ] %s %s: %s\n", d->name.c_str(), c.name().c_str(), status.message().c_str());
        ++unsupported[d->name];
        ASSERT_TRUE(device.download()) << d->name << " " << c.name() << ": CUDA error after the refusal";
        EXPECT_EQ(testing::check_untouched(host), "") << d->name << " " << c.name() << ": " << status.message();
        continue;
      }
      ASSERT_TRUE(status.ok()) << d->name << " " << c.name() << ": " << status.message();
      ASSERT_TRUE(device.download()) << d->name << " " << c.name() << ": CUDA error after the run";
      const std::string diff = testing::compare(d->caps, host, expected);
      EXPECT_EQ(diff, "") << d->name << " " << c.name() << " on " << info.describe() << " (seed " << seed << ")";
      if (diff.empty()) ++passed[d->name];
    }
  }
  for (const BackendDescriptor* d : runnable)
    std::printf("[ PARITY   ] %s on %s: %d cases within tolerance, %d unsupported\n", d->name.c_str(),
                info.describe().c_str(), passed[d->name], unsupported[d->name]);
#endif
}

TEST(GpuParity, FullyMaskedRowsGiveZerosAndNegativeInfinityLseOrAreRefused) {
#if !DIFFATTN_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA support";
#else
  const GpuHarness h = gpu_harness();
  SKIP_WITHOUT_GPU_HARNESS(h);
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (const BackendDescriptor* d : h.runnable) {
    const auto c = testing::fully_masked_case_for(*d, *h.platform, DeviceKind::kCuda);
    if (!c) {
      std::printf("[ NOT APPLICABLE ] %s takes no mask on %s\n", d->name.c_str(), h.info.describe().c_str());
      continue;
    }
    auto data = testing::make_case_data(*c, rng);
    DeviceCase device(*data);
    ASSERT_TRUE(device.ok()) << "cudaMalloc failed for " << c->name();
    const Status status = run_poisoned(*d, h.info, *data, device, device.problem());
    if (status.code() == ErrorCode::kUnsupported) {  // a refusal that names the alternative is allowed
      EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << " " << c->name() << ": " << status.message();
      continue;
    }
    ASSERT_TRUE(status.ok()) << d->name << " " << c->name() << ": " << status.message();
    EXPECT_EQ(testing::check_fully_masked_rows(*c, data->problem), "")
        << d->name << " " << c->name() << " on " << h.info.describe() << " (seed " << seed << ")";
  }
#endif
}

TEST(GpuParity, RefusedCallsWriteNothing) {
#if !DIFFATTN_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA support";
#else
  const GpuHarness h = gpu_harness();
  SKIP_WITHOUT_GPU_HARNESS(h);
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  for (const BackendDescriptor* d : h.runnable) {
    // Calls whose shapes disagree: every backend must refuse them.
    if (auto c = testing::plain_case_for(*d, *h.platform, DeviceKind::kCuda)) {
      for (const testing::InvalidCall& bad : testing::invalid_calls()) {
        auto data = testing::make_case_data(*c, rng);
        DeviceCase device(*data);
        ASSERT_TRUE(device.ok()) << "cudaMalloc failed for " << c->name();
        AttentionProblem call = device.problem();
        bad.apply(call);
        const Status status = run_poisoned(*d, h.info, *data, device, call);
        EXPECT_FALSE(status.ok()) << d->name << " ran a call with " << bad.name;
        EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << ", " << bad.name << ": " << status.message();
      }
    }
    // Cases the backend declares it cannot run here: refused as well, with nothing written.
    for (const testing::ParityCase& c : testing::parity_cases()) {
      auto data = testing::make_case_data(c, rng);
      DeviceCase device(*data);
      ASSERT_TRUE(device.ok()) << "cudaMalloc failed for " << c.name();
      if (testing::case_unsupported_reasons(*d, *h.platform, device.problem().shape()).empty()) continue;
      const Status status = run_poisoned(*d, h.info, *data, device, device.problem());
      EXPECT_FALSE(status.ok()) << d->name << " ran " << c.name() << ", which it declares unsupported here";
      EXPECT_EQ(testing::check_untouched(data->problem), "") << d->name << " " << c.name() << ": " << status.message();
    }
  }
#endif
}

TEST(GpuParity, CallsCapturedInACudaGraphReplayCorrectly) {
#if !DIFFATTN_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA support";
#else
  const GpuHarness h = gpu_harness();
  SKIP_WITHOUT_GPU_HARNESS(h);
  std::uint64_t seed = 0;
  std::mt19937_64 rng = fresh_rng(seed);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // Each backend's plain case, then the same with a key-padding mask where the backend takes one
  // (a mask whose route depends on its contents must not wait for the stream under capture).
  for (const BackendDescriptor* d : h.runnable)
    for (const bool masked : {false, true}) {
      auto c = testing::plain_case_for(*d, *h.platform, DeviceKind::kCuda);
      if (!c) {
        if (!masked)
          std::printf("[ NOT APPLICABLE ] %s runs no plain case on %s\n", d->name.c_str(), h.info.describe().c_str());
        continue;
      }
      if (masked) {
        c->mask = testing::MaskShape::kKeyPadding;
        ProblemShape shape = testing::case_shape(*c);
        shape.device = DeviceKind::kCuda;
        if (!testing::case_unsupported_reasons(*d, *h.platform, shape).empty()) {
          std::printf("[ NOT APPLICABLE ] %s takes no key-padding mask on %s\n", d->name.c_str(),
                      h.info.describe().c_str());
          continue;
        }
      }
      c->lse = true;
      ProblemShape with_lse = testing::case_shape(*c);
      with_lse.device = DeviceKind::kCuda;
      if (!testing::case_unsupported_reasons(*d, *h.platform, with_lse).empty()) c->lse = false;
      auto data = testing::make_case_data(*c, rng);
      testing::Expectation expected = testing::expect(data->problem);
      DeviceCase device(*data);
      ASSERT_TRUE(device.ok()) << "cudaMalloc failed for " << c->name();
      ASSERT_TRUE(device.upload());
      auto backend = global_registry().create(d->name, testing::init_for(data->problem, h.info));
      ASSERT_TRUE(backend.ok()) << d->name << ": " << backend.status().message();
      // One call on the stream first: a backend may set up per-stream state, which capture forbids.
      const Status warm = (*backend)->forward(device.problem(), stream);
      ASSERT_TRUE(warm.ok()) << d->name << " " << c->name() << ": " << warm.message();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      // The replay alone must produce the outputs: poison them on the device first.
      const AttentionProblem& host = data->problem;
      ASSERT_EQ(cudaMemsetAsync(device.device_address(host.out), 0xff, host.out.numel() * dtype_size(host.out.dtype),
                                stream),
                cudaSuccess);
      if (host.lse) {
        ASSERT_EQ(cudaMemsetAsync(device.device_address(*host.lse), 0xff, host.lse->numel() * sizeof(float), stream),
                  cudaSuccess);
      }
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      const Status captured = (*backend)->forward(device.problem(), stream);
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << d->name << " " << c->name();
      ASSERT_TRUE(captured.ok()) << d->name << " " << c->name() << " under capture: " << captured.message();
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess) << d->name;
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess) << d->name;
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << d->name;
      ASSERT_TRUE(device.download());
      EXPECT_EQ(testing::compare(d->caps, data->problem, expected), "")
          << d->name << " " << c->name() << " replayed on " << h.info.describe() << " (seed " << seed << ")";
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  cudaStreamDestroy(stream);
#endif
}

}  // namespace
}  // namespace diffattn
