// FASTVIDEO_VSA and RAINFUSION_ATTN end to end on CUDA (their whole paths: tiling copies, coarse
// branch or pattern recognition, list building, the block-sparse fine pass, the copies back) on
// Wan2.1's self-attention shapes with the runner's 3D-local activations (docs/validation.md), beside
// dense FLASH_ATTN on the same inputs: median ms of interleaved rounds, speed-up, the share of tile
// pairs each path computed, and relL2 against the dense output. Then the key-tile lists each path
// chose are read back once and written to --dump DIR, so that bench/flex_peer.py --paths DIR gives
// PyTorch's FlexAttention the very block mask (its fine pass alone, the lists given to it free).
//
//   gpu_sparse_paths_bench [--work wan2.1-14b-480p-self,wan2.1-14b-720p-self] [--rounds 5]
//                          [--vsa-sparsity 0.875] [--rain-sparsity 0.8] [--dump DIR] [--csv FILE]
//
// Dump files per (workload, path): NAME-PATH.offsets.i32, .indices.i32, .tile_rows.i32 (int32, the
// BlockSparseLayout's arrays) and NAME-PATH.txt ("batch heads q_tiles k_tiles q_tile k_tile head_dim
// ours_ms dense_ms", one line).

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_exit.h"
#include "diffattn/problem.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sparse/rainfusion_cuda.h"
#include "kernels/cuda/sparse/vsa_cuda.h"
#include "kernels/sparse/vsa_cube_map.h"
#include "runner/activation_generator.h"
#include "runner/host_tensor.h"
#include "runner/quality_metrics.h"
#include "workloads.h"

namespace {

using namespace diffattn;

// The latent video behind each workload (VAE stride 4 in time, 8 in space, patch 1 x 2 x 2), as
// the model zoo gives it for 81 frames at 480 x 832 and 720 x 1280.
const std::map<std::string, VideoGeometry> kGeometry = {
    {"wan2.1-14b-480p-self", {21, 30, 52, 0, 0}},
    {"wan2.1-14b-720p-self", {21, 45, 80, 0, 0}},
};

struct DeviceTensor {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit DeviceTensor(std::size_t n) : bytes(n) { CHECK_CUDA(cudaMalloc(&p, n)); }
  ~DeviceTensor() { cudaFree(p); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
};

const Device kGpu{DeviceKind::kCuda, 0};

TensorView view(void* p, const std::array<std::int64_t, 4>& s) {
  return TensorView::Contiguous(p, DType::kBFloat16, {s[0], s[1], s[2], s[3]}, kGpu);
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

template <class T>
void write_array(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// Listed tile pairs over all of them.
double layout_density(const BlockSparseLayout& l) {
  return static_cast<double>(l.indices.size()) / static_cast<double>(l.batch * l.heads * l.q_tiles * l.k_tiles);
}

// How much neighbouring query tiles' lists overlap: for query tiles 2i and 2i + 1 of each head,
// the key tiles both list over the key tiles either lists, averaged over the pairs (what one CTA
// walking both tiles' lists would load, against two CTAs walking one each).
double pair_sharing(const BlockSparseLayout& l) {
  double shared = 0.0;
  std::int64_t pairs = 0;
  for (std::int64_t head = 0; head < l.batch * l.heads; ++head)
    for (std::int64_t t = 0; t + 1 < l.q_tiles; t += 2) {
      const std::int64_t r = head * l.q_tiles + t;
      const auto a = l.indices.begin() + l.offsets[r], a_end = l.indices.begin() + l.offsets[r + 1];
      const auto b = a_end, b_end = l.indices.begin() + l.offsets[r + 2];
      std::vector<std::int32_t> both;
      std::set_intersection(a, a_end, b, b_end, std::back_inserter(both));
      const auto either = (a_end - a) + (b_end - b) - static_cast<std::int64_t>(both.size());
      if (either > 0) shared += static_cast<double>(both.size()) / static_cast<double>(either);
      ++pairs;
    }
  return pairs > 0 ? shared / static_cast<double>(pairs) : 0.0;
}

struct PathRun {
  std::string path;
  std::string key;  // in the dump files' names
  std::function<Status(const AttentionProblem&, cudaStream_t, BlockSparseLayout*)> call;
};

}  // namespace

int main(int argc, char** argv) {
  std::string work_list = "wan2.1-14b-480p-self,wan2.1-14b-720p-self", dump, csv_path;
  int rounds = 5;
  double vsa_sparsity = 0.875, rain_sparsity = 0.8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--work") work_list = next();
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--vsa-sparsity") vsa_sparsity = std::stod(next());
    else if (a == "--rain-sparsity") rain_sparsity = std::stod(next());
    else if (a == "--dump") dump = next();
    else if (a == "--csv") csv_path = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::ifstream wf(DIFFATTN_WORKLOADS_CSV);
  std::stringstream text;
  text << wf.rdbuf();
  const auto parsed = bench::parse_workloads(text.str(), DIFFATTN_WORKLOADS_CSV);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().message().c_str());
    return 2;
  }
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "workload,path,ms,dense_ms,speedup,density,rel_l2,cosine\n");
  std::printf("%-24s %-26s %9s %9s %8s %8s %9s %9s\n", "workload", "path", "ms", "dense ms", "speedup", "density",
              "relL2", "cosine");
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  for (const std::string& name : split(work_list)) {
    const auto g = kGeometry.find(name);
    const auto w = std::find_if(parsed->begin(), parsed->end(), [&](const auto& x) { return x.name == name; });
    if (g == kGeometry.end() || w == parsed->end() || g->second.tokens() != w->seq_q || w->seq_q != w->seq_kv) {
      std::printf("%-24s skipped: no latent geometry for it here (or it disagrees with workloads.csv)\n", name.c_str());
      continue;
    }
    const VideoGeometry geo = g->second;
    const std::array<std::int64_t, 4> shape = {w->batch, w->seq_q, w->heads, w->head_dim};
    runner::HostTensor q(DType::kBFloat16, shape), k(DType::kBFloat16, shape), v(DType::kBFloat16, shape);
    runner::ActivationKey key;
    key.seed = 20261203, key.model = "wan2.1-14b", key.role = "self", key.video = geo;
    runner::generate_activations(key, runner::ActivationStats{}, q, k, v);
    DeviceTensor dq(q.bytes()), dk(k.bytes()), dv(v.bytes()), dense_out(q.bytes()), sparse_out(q.bytes());
    CHECK_CUDA(cudaMemcpy(dq.p, q.data(), q.bytes(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk.p, k.data(), k.bytes(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv.p, v.data(), v.bytes(), cudaMemcpyHostToDevice));
    AttentionProblem dense;
    dense.q = view(dq.p, shape), dense.k = view(dk.p, shape), dense.v = view(dv.p, shape);
    dense.out = view(dense_out.p, shape);
    AttentionProblem sparse = dense;
    sparse.out = view(sparse_out.p, shape);
    sparse.video = geo;

    const VsaCubeMap cubes{geo.frames, geo.height, geo.width};
    const auto topk = static_cast<std::int64_t>(std::ceil((1.0 - vsa_sparsity) * static_cast<double>(cubes.cubes())));
    RainFusionParams rain;
    rain.sparsity = rain_sparsity;
    char vsa_name[64], rain_name[64];
    std::snprintf(vsa_name, sizeof vsa_name, "FASTVIDEO_VSA topk %lld/%lld", static_cast<long long>(topk),
                  static_cast<long long>(cubes.cubes()));
    std::snprintf(rain_name, sizeof rain_name, "RAINFUSION_ATTN %.2f", rain_sparsity);
    const std::vector<PathRun> paths = {
        {vsa_name, "vsa",
         [&](const AttentionProblem& p, cudaStream_t s, BlockSparseLayout* l) {
           return run_fastvideo_vsa_cuda(p, topk, s, l);
         }},
        {rain_name, "rain", [&](const AttentionProblem& p, cudaStream_t s, BlockSparseLayout* l) {
           RainFusionPlan plan;
           const Status st = run_rainfusion_cuda(p, rain, s, l != nullptr ? &plan : nullptr);
           if (st.ok() && l != nullptr) *l = plan.layout;
           return st;
         }}};

    // Dense and each path in turn, every round, after one untimed call of each.
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<float> dense_ms;
    std::vector<std::vector<float>> path_ms(paths.size());
    std::vector<std::string> failed(paths.size());
    for (int r = 0; r <= rounds; ++r) {
      for (std::size_t i = 0; i <= paths.size(); ++i) {
        if (i < paths.size() && !failed[i].empty()) continue;
        CHECK_CUDA(cudaEventRecord(e0, stream));
        const Status s = i == paths.size() ? flash::run_flash_attn_cuda(dense, stream) : paths[i].call(sparse, stream, nullptr);
        CHECK_CUDA(cudaEventRecord(e1, stream));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (!s.ok()) {
          if (i == paths.size()) {
            std::fprintf(stderr, "dense FLASH_ATTN failed: %s\n", s.message().c_str());
            return 1;
          }
          failed[i] = s.message();
          continue;
        }
        if (r == 0) continue;
        (i == paths.size() ? dense_ms : path_ms[i]).push_back(ms);
      }
    }
    runner::HostTensor ref(DType::kBFloat16, shape), got(DType::kBFloat16, shape);
    CHECK_CUDA(cudaMemcpy(ref.data(), dense_out.p, ref.bytes(), cudaMemcpyDeviceToHost));
    const double dms = median(dense_ms);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!failed[i].empty()) {
        std::printf("%-24s %-26s refused: %s\n", name.c_str(), paths[i].path.c_str(), failed[i].c_str());
        continue;
      }
      // The lists, read back once (this call waits for the stream), and the output they gave.
      BlockSparseLayout lists;
      const Status s = paths[i].call(sparse, stream, &lists);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      if (!s.ok()) {
        std::printf("%-24s %-26s failed reading its lists back: %s\n", name.c_str(), paths[i].path.c_str(),
                    s.message().c_str());
        continue;
      }
      CHECK_CUDA(cudaMemcpy(got.data(), sparse_out.p, got.bytes(), cudaMemcpyDeviceToHost));
      const runner::QualityMetrics m = runner::compare_outputs(got, ref);
      const double ms = median(path_ms[i]), density = layout_density(lists);
      std::printf("%-24s %-26s %9.3f %9.3f %8.2f %8.4f %9.3e %9.6f\n", name.c_str(), paths[i].path.c_str(), ms, dms,
                  dms / ms, density, m.rel_l2, m.cosine);
      std::printf("%-24s %-26s query tiles 2i and 2i + 1 share %.3f of the key tiles either lists\n", name.c_str(),
                  paths[i].path.c_str(), pair_sharing(lists));
      if (csv)
        std::fprintf(csv, "%s,%s,%.4f,%.4f,%.3f,%.5f,%.4e,%.6f\n", name.c_str(), paths[i].path.c_str(), ms, dms,
                     dms / ms, density, m.rel_l2, m.cosine);
      if (!dump.empty()) {
        const std::string base = dump + "/" + name + "-" + paths[i].key;
        write_array(base + ".offsets.i32", lists.offsets);
        write_array(base + ".indices.i32", lists.indices);
        write_array(base + ".tile_rows.i32", lists.tile_rows);
        std::ofstream info(base + ".txt");
        info << lists.batch << ' ' << lists.heads << ' ' << lists.q_tiles << ' ' << lists.k_tiles << ' '
             << lists.q_tile << ' ' << lists.k_tile << ' ' << w->head_dim << ' ' << ms << ' ' << dms << '\n';
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  if (csv) std::fclose(csv);
  cudaStreamDestroy(stream);
  return 0;
}
