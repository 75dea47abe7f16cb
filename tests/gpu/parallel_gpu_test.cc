// Sequence parallelism on GPUs. GpuNccl.* launch this test binary again as two ranks (our
// launcher) running GpuNcclRank.*, which skip unless launched; the parent checks that both ranks
// passed (they skip without two GPUs or NCCL). GpuInProcess.* run every rank as a thread on one GPU
// with the in-process communicator: the layer's CUDA paths without NCCL.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "diffattn/attention.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/merge/partial_merge.h"
#include "parallel/device_memory.h"
#include "parallel/in_process_communicator.h"
#include "parallel/launcher.h"
#include "parallel/nccl_communicator.h"
#include "parallel/parallel_attention.h"

#if DIFFATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace diffattn::parallel {
namespace {

int cuda_devices() {
#if DIFFATTN_HAVE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

// Host bf16 values and their device copy.
struct DeviceTensor {
  std::vector<std::uint16_t> host;
  DeviceBuffer buffer;
  TensorView view;
};

DeviceTensor make(std::initializer_list<std::int64_t> shape, int device, std::mt19937_64* rng) {
  DeviceTensor t;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  t.host.assign(static_cast<std::size_t>(n), 0);
  std::normal_distribution<float> dist(0.f, 1.f);
  if (rng)
    for (auto& x : t.host) x = cpu::float_to_bf16(dist(*rng));
  auto buf = DeviceBuffer::Zeros(Device{DeviceKind::kCuda, device}, t.host.size() * 2);
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  t.buffer = std::move(buf).value();
  EXPECT_TRUE(copy_to_device(t.buffer.data(), t.host.data(), t.host.size() * 2, DeviceKind::kCuda, nullptr).ok());
  t.view = TensorView::Contiguous(t.buffer.data(), DType::kBFloat16, shape, Device{DeviceKind::kCuda, device});
  return t;
}

std::vector<float> fetch(DeviceTensor& t) {
  EXPECT_TRUE(copy_to_host(t.host.data(), t.buffer.data(), t.host.size() * 2, DeviceKind::kCuda, nullptr).ok());
  std::vector<float> out;
  for (auto x : t.host) out.push_back(cpu::bf16_to_float(x));
  return out;
}

// Rows [s0, s0 + n) of a [1, S, H, D] host tensor as a device tensor.
DeviceTensor rows(const DeviceTensor& full, std::int64_t s0, std::int64_t n, int device) {
  DeviceTensor t = make({1, n, full.view.size(2), full.view.size(3)}, device, nullptr);
  const std::int64_t inner = full.view.size(2) * full.view.size(3);
  std::copy(full.host.begin() + s0 * inner, full.host.begin() + (s0 + n) * inner, t.host.begin());
  EXPECT_TRUE(copy_to_device(t.buffer.data(), t.host.data(), t.host.size() * 2, DeviceKind::kCuda, nullptr).ok());
  return t;
}

Result<RankEnvironment> launched() {
  DIFFATTN_ASSIGN_OR_RETURN(auto env, rank_environment());
  if (!env) return Unavailable("not launched as a rank");
  return *env;
}

TEST(GpuNcclRank, CollectivesMoveTheRightBytes) {
  auto env = launched();
  if (!env.ok()) GTEST_SKIP() << "runs as a launched rank of GpuNccl.*";
  auto comm = nccl_from_environment(*env);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  Communicator& c = **comm;
  const int n = c.size(), r = c.rank();
  std::vector<int> send(n * 4), recv(n * 4, -1);
  for (int j = 0; j < n; ++j)
    for (int e = 0; e < 4; ++e) send[j * 4 + e] = 100 * r + 10 * j + e;
  auto ds = DeviceBuffer::Zeros(Device{DeviceKind::kCuda, env->device}, send.size() * 4);
  auto dr = DeviceBuffer::Zeros(Device{DeviceKind::kCuda, env->device}, recv.size() * 4);
  ASSERT_TRUE(ds.ok() && dr.ok());
  ASSERT_TRUE(copy_to_device(ds->data(), send.data(), send.size() * 4, DeviceKind::kCuda, nullptr).ok());
  ASSERT_TRUE(c.all_to_all(ds->data(), dr->data(), 16, nullptr).ok());
  ASSERT_TRUE(copy_to_host(recv.data(), dr->data(), recv.size() * 4, DeviceKind::kCuda, nullptr).ok());
  for (int i = 0; i < n; ++i)
    for (int e = 0; e < 4; ++e) EXPECT_EQ(recv[i * 4 + e], 100 * i + 10 * r + e);
  ASSERT_TRUE(send_recv(c, ds->data(), (r + 1) % n, dr->data(), (r + n - 1) % n, 16, nullptr).ok());
  ASSERT_TRUE(copy_to_host(recv.data(), dr->data(), 16, DeviceKind::kCuda, nullptr).ok());
  EXPECT_EQ(recv[0], 100 * ((r + n - 1) % n));
  EXPECT_TRUE(c.barrier().ok());
}

TEST(GpuNcclRank, UlyssesAndRingEqualOneGpu) {
  auto env = launched();
  if (!env.ok()) GTEST_SKIP() << "runs as a launched rank of GpuNccl.*";
  auto comm = nccl_from_environment(*env);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  Registry registry;
  register_builtin_backends(registry);
  auto info = probe_cuda_platform(env->device);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  Selector selector(make_platform(*info, registry), &registry);
  const std::int64_t s = 301, t = 7, h = 8, hkv = 4, d = 128;  // 301 image tokens: padding on 2 ranks
  std::mt19937_64 rng(11);  // the same inputs on both ranks
  const int dev = env->device;
  DeviceTensor q = make({1, s, h, d}, dev, &rng), k = make({1, s, hkv, d}, dev, &rng), v = make({1, s, hkv, d}, dev, &rng);
  DeviceTensor jq = make({1, t, h, d}, dev, &rng), jk = make({1, t, hkv, d}, dev, &rng), jv = make({1, t, hkv, d}, dev, &rng);
  // One GPU: [text; image].
  auto cat = [&](const DeviceTensor& a, const DeviceTensor& b) {
    DeviceTensor out = make({1, a.view.size(1) + b.view.size(1), a.view.size(2), d}, dev, nullptr);
    std::copy(a.host.begin(), a.host.end(), out.host.begin());
    std::copy(b.host.begin(), b.host.end(), out.host.begin() + a.host.size());
    EXPECT_TRUE(copy_to_device(out.buffer.data(), out.host.data(), out.host.size() * 2, DeviceKind::kCuda, nullptr).ok());
    return out;
  };
  DeviceTensor fq = cat(jq, q), fk = cat(jk, k), fv = cat(jv, v), fo = make({1, t + s, h, d}, dev, nullptr);
  const ShardRange shard = image_shard(s, env->world, env->rank);
  DeviceTensor lq = rows(q, shard.begin, shard.length, dev), lk = rows(k, shard.begin, shard.length, dev),
               lv = rows(v, shard.begin, shard.length, dev);
  for (const char* backend : {"TORCH_SDPA", "FLASH_ATTN"}) {
    for (ParallelDegrees degrees : {ParallelDegrees{env->world, 1}, ParallelDegrees{1, env->world}}) {
      SCOPED_TRACE(std::string(backend) + " " + degrees.describe());
      AttentionConfig config;
      config.default_spec = AttentionSpec{.backend = backend};
      AttentionLayerDesc desc{.num_heads = static_cast<int>(h), .num_kv_heads = static_cast<int>(hkv), .head_size = 128};
      auto one = Attention::Create(desc, config, selector);
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      AttentionProblem p;
      p.q = fq.view;
      p.k = fk.view;
      p.v = fv.view;
      p.out = fo.view;
      ASSERT_TRUE(one->forward(p).ok());
      ASSERT_TRUE(synchronize(DeviceKind::kCuda, nullptr).ok());
      const std::vector<float> want = fetch(fo);
      auto layer = ParallelAttention::Create(desc, degrees, **comm, config, selector);
      ASSERT_TRUE(layer.ok()) << layer.status().ToString();
      DeviceTensor out = make({1, shard.length, h, d}, dev, nullptr), jout = make({1, t, h, d}, dev, nullptr);
      ParallelCall call;
      call.q = lq.view;
      call.k = lk.view;
      call.v = lv.view;
      call.out = out.view;
      call.image_tokens = s;
      call.joint_q = jq.view;
      call.joint_k = jk.view;
      call.joint_v = jv.view;
      call.joint_out = jout.view;
      const Status status = (*layer)->forward(call);
      ASSERT_TRUE(status.ok()) << status.ToString();
      const std::vector<float> got = fetch(out), got_text = fetch(jout);
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[(t + shard.begin) * h * d + i])));
      for (std::size_t i = 0; i < got_text.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got_text[i] - want[i])));
      EXPECT_LE(worst, 2e-2);
    }
  }
}

TEST(GpuNcclRank, ARankThatDiesEndsTheOthers) {
  auto env = launched();
  if (!env.ok()) GTEST_SKIP() << "runs as a launched rank of GpuNccl.*";
  if (env->rank == env->world - 1) std::_Exit(3);  // dies before joining the group
  auto comm = nccl_from_environment(*env);
  if (comm.ok()) (void)(*comm)->barrier();  // blocks on the dead rank until the launcher ends it
}

bool two_gpus_with_nccl(std::string& why) {
  if (!nccl_built()) why = "this build has no NCCL";
  else if (cuda_devices() < 2) why = "fewer than 2 CUDA devices";
  return why.empty();
}

TEST(GpuNccl, TwoRanksPassTheirCollectivesAndMatchOneGpu) {
  std::string why;
  if (std::getenv(kRankEnv) || !two_gpus_with_nccl(why)) GTEST_SKIP() << why;
  auto code = launch_local_ranks(2, {"--gtest_filter=GpuNcclRank.CollectivesMoveTheRightBytes:GpuNcclRank.UlyssesAndRingEqualOneGpu"});
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0) << "a rank failed: its output is above";
}

TEST(GpuNccl, AKilledRankEndsEveryRankWithinBoundedTime) {
  std::string why;
  if (std::getenv(kRankEnv) || !two_gpus_with_nccl(why)) GTEST_SKIP() << why;
  const auto start = std::chrono::steady_clock::now();
  auto code = launch_local_ranks(2, {"--gtest_filter=GpuNcclRank.ARankThatDiesEndsTheOthers"}, std::chrono::seconds(5));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

#if DIFFATTN_HAVE_CUDA
TEST(GpuInProcess, UlyssesRingAndHybridOnOneGpuEqualOneRank) {
  if (cuda_devices() < 1) GTEST_SKIP() << "no CUDA device on this machine";
  Registry registry;
  register_builtin_backends(registry);
  auto info = probe_cuda_platform(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  Selector selector(make_platform(*info, registry), &registry);
  const std::int64_t s = 301, t = 7, h = 8, hkv = 4, d = 128;
  std::mt19937_64 rng(13);
  DeviceTensor q = make({1, s, h, d}, 0, &rng), k = make({1, s, hkv, d}, 0, &rng), v = make({1, s, hkv, d}, 0, &rng);
  DeviceTensor jq = make({1, t, h, d}, 0, &rng), jk = make({1, t, hkv, d}, 0, &rng), jv = make({1, t, hkv, d}, 0, &rng);
  auto cat = [&](const DeviceTensor& a, const DeviceTensor& b) {
    DeviceTensor out = make({1, a.view.size(1) + b.view.size(1), a.view.size(2), d}, 0, nullptr);
    std::copy(a.host.begin(), a.host.end(), out.host.begin());
    std::copy(b.host.begin(), b.host.end(), out.host.begin() + a.host.size());
    EXPECT_TRUE(copy_to_device(out.buffer.data(), out.host.data(), out.host.size() * 2, DeviceKind::kCuda, nullptr).ok());
    return out;
  };
  DeviceTensor fq = cat(jq, q), fk = cat(jk, k), fv = cat(jv, v), fo = make({1, t + s, h, d}, 0, nullptr);
  for (const char* backend : {"TORCH_SDPA", "FLASH_ATTN"}) {
    AttentionConfig config;
    config.default_spec = AttentionSpec{.backend = backend};
    AttentionLayerDesc desc{.num_heads = static_cast<int>(h), .num_kv_heads = static_cast<int>(hkv), .head_size = 128};
    auto one = Attention::Create(desc, config, selector);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    AttentionProblem p;
    p.q = fq.view;
    p.k = fk.view;
    p.v = fv.view;
    p.out = fo.view;
    ASSERT_TRUE(one->forward(p).ok());
    ASSERT_TRUE(synchronize(DeviceKind::kCuda, nullptr).ok());
    const std::vector<float> want = fetch(fo);
    for (ParallelDegrees degrees : {ParallelDegrees{2, 1}, ParallelDegrees{1, 2}, ParallelDegrees{2, 2},
                                    ParallelDegrees{4, 1}, ParallelDegrees{1, 4}}) {
      SCOPED_TRACE(std::string(backend) + " " + degrees.describe());
      const int world = degrees.world();
      auto comms = make_in_process_group(world, std::chrono::seconds(60), DeviceKind::kCuda);
      ASSERT_TRUE(comms.ok());
      std::vector<Status> status(world);
      std::vector<double> worst(world, 0);
      std::vector<std::thread> threads;
      for (int r = 0; r < world; ++r) {
        threads.emplace_back([&, r] {
          cudaSetDevice(0);
          const ShardRange shard = image_shard(s, world, r);
          DeviceTensor lq = rows(q, shard.begin, shard.length, 0), lk = rows(k, shard.begin, shard.length, 0),
                       lv = rows(v, shard.begin, shard.length, 0);
          DeviceTensor out = make({1, shard.length, h, d}, 0, nullptr), jout = make({1, t, h, d}, 0, nullptr);
          auto layer = ParallelAttention::Create(desc, degrees, *(*comms)[r], config, selector);
          if (!layer.ok()) {
            status[r] = layer.status();
            return;
          }
          ParallelCall call;
          call.q = lq.view;
          call.k = lk.view;
          call.v = lv.view;
          call.out = out.view;
          call.image_tokens = s;
          call.joint_q = jq.view;
          call.joint_k = jk.view;
          call.joint_v = jv.view;
          call.joint_out = jout.view;
          status[r] = (*layer)->forward(call);
          if (!status[r].ok()) return;
          const std::vector<float> got = fetch(out), got_text = fetch(jout);
          for (std::size_t i = 0; i < got.size(); ++i)
            worst[r] = std::max(worst[r], static_cast<double>(std::fabs(got[i] - want[(t + shard.begin) * h * d + i])));
          for (std::size_t i = 0; i < got_text.size(); ++i)
            worst[r] = std::max(worst[r], static_cast<double>(std::fabs(got_text[i] - want[i])));
        });
      }
      for (auto& th : threads) th.join();
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
        EXPECT_LE(worst[r], 2e-2) << "rank " << r;
      }
    }
  }
}
#endif

#if DIFFATTN_HAVE_CUDA
TEST(GpuPartialMerge, KernelEqualsTheCpuMerge) {
  if (cuda_devices() < 1) GTEST_SKIP() << "no CUDA device on this machine";
  const std::int64_t b = 2, s = 33, h = 3, dv = 72;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0.f, 2.f);
  std::vector<float> acc(b * s * h * dv), lse(b * h * s), part_f(acc.size()), plse(lse.size());
  for (auto* v : {&acc, &lse, &part_f, &plse})
    for (float& x : *v) x = n(rng);
  lse[0] = -INFINITY;
  plse[1] = -INFINITY;
  std::vector<std::uint16_t> part(part_f.size());
  for (std::size_t i = 0; i < part.size(); ++i) part[i] = cpu::float_to_bf16(part_f[i]);
  std::vector<float> cpu_acc = acc, cpu_lse = lse;
  merge::PartialMergeParams m{cpu_acc.data(), cpu_lse.data(), part.data(), DType::kBFloat16, plse.data(), b, s, h, dv};
  ASSERT_TRUE(merge::merge_partial_cpu(m).ok());
  const Device dev{DeviceKind::kCuda, 0};
  auto da = DeviceBuffer::Zeros(dev, acc.size() * 4), dl = DeviceBuffer::Zeros(dev, lse.size() * 4),
       dp = DeviceBuffer::Zeros(dev, part.size() * 2), dpl = DeviceBuffer::Zeros(dev, plse.size() * 4);
  ASSERT_TRUE(da.ok() && dl.ok() && dp.ok() && dpl.ok());
  ASSERT_TRUE(copy_to_device(da->data(), acc.data(), acc.size() * 4, DeviceKind::kCuda, nullptr).ok());
  ASSERT_TRUE(copy_to_device(dl->data(), lse.data(), lse.size() * 4, DeviceKind::kCuda, nullptr).ok());
  ASSERT_TRUE(copy_to_device(dp->data(), part.data(), part.size() * 2, DeviceKind::kCuda, nullptr).ok());
  ASSERT_TRUE(copy_to_device(dpl->data(), plse.data(), plse.size() * 4, DeviceKind::kCuda, nullptr).ok());
  merge::PartialMergeParams g{static_cast<float*>(da->data()), static_cast<float*>(dl->data()), dp->data(),
                              DType::kBFloat16, static_cast<const float*>(dpl->data()), b, s, h, dv};
  ASSERT_TRUE(merge::merge_partial_cuda(g, nullptr).ok());
  std::vector<float> gpu_acc(acc.size()), gpu_lse(lse.size());
  ASSERT_TRUE(copy_to_host(gpu_acc.data(), da->data(), acc.size() * 4, DeviceKind::kCuda, nullptr).ok());
  ASSERT_TRUE(copy_to_host(gpu_lse.data(), dl->data(), lse.size() * 4, DeviceKind::kCuda, nullptr).ok());
  for (std::size_t i = 0; i < acc.size(); ++i) EXPECT_NEAR(gpu_acc[i], cpu_acc[i], 1e-4 * (1 + std::fabs(cpu_acc[i])));
  for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(gpu_lse[i], cpu_lse[i], 1e-4 * (1 + std::fabs(cpu_lse[i])));
  std::vector<std::uint16_t> stored(acc.size());
  ASSERT_TRUE(merge::store_merged_cuda(static_cast<const float*>(da->data()), dp->data(), DType::kBFloat16,
                                       static_cast<std::int64_t>(acc.size()), nullptr).ok());
  ASSERT_TRUE(copy_to_host(stored.data(), dp->data(), stored.size() * 2, DeviceKind::kCuda, nullptr).ok());
  for (std::size_t i = 0; i < acc.size(); i += 97) EXPECT_EQ(stored[i], cpu::float_to_bf16(gpu_acc[i]));
}
#endif

}  // namespace
}  // namespace diffattn::parallel
