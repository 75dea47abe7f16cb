// The block-sparse benchmark: diffattn's block-sparse Hopper kernel (both tilings) against dense
// FLASH_ATTN on the same inputs, with correctness against a float64 host reference
// over each sampled row's listed keys, and its time against the dense FLASH_ATTN kernel on the same
// inputs, at densities given on the command line. Layouts are random: every (head, query tile) lists
// round(density x key tiles) distinct key tiles (at least one): its diagonal tile and random others. With --dump DIR each layout is
// written as DIR/<workload>-<density>.{offsets,indices}.i32 (raw int32) so that the FlexAttention
// peer (bench/flex_peer.py) runs the very same key-tile lists. scripts/device/sparse_round.sh runs
// the recorded set.
//
// Built with the default preset (build/default/bin/gpu_sparse_bench), or alone from the repository root:
//   nvcc -std=c++20 -O3 --expt-relaxed-constexpr -Isrc -Iinclude -gencode=arch=compute_90a,code=sm_90a \
//     bench/gpu_sparse_bench.cu src/kernels/cuda/flash/flash_hopper.cu src/kernels/cuda/flash/flash_hopper_sparse.cu \
//     -o build/dev/gpu_sparse_bench -lcuda
//   gpu_sparse_bench [--work a,b] [--densities 1,0.5,0.25,0.125] [--rounds 5] [--dump DIR] [--csv FILE]
//                        [--check-only] [--fp16] [--small] [--tile-rows] [--ampere] [--sage fp8|fp16]
//
// --sage MODE: SAGE_ATTN's block-sparse walk (RAINFUSION_ATTN's precision fp8 / mix; INT8 Q K^T,
// P V in FP8 or 16-bit), its quantization kernels counted in its time, against dense FLASH_ATTN;
// 128 x 128 tiles only. Its check bound is the 8-bit arithmetic's (max error over a row's largest
// value 0.12 with FP8 P V, 0.05 with 16-bit).
// --ampere: the mma.sync walk (the block-sparse kernel of sm_80..sm_89) against FLASH_ATTN's dense
// mma.sync kernel instead of the Hopper pair; on a Hopper GPU both run from their compute_80 code.
//
// Without --small the lists are 128 x 128 (the flash kernel's tile at hd128, the one-warpgroup
// walk at hd64; flash_config.h's list_walk). --small: the 64 x 64 tiling (the one-warpgroup walk);
// --tile-rows (square tiles, self-attention): every fifth tile gets a random count of valid rows,
// and keys past it must never be attended; --share F: the odd query tile of each pair keeps the
// share F of its even neighbour's key tiles.
//
// Workloads come from bench/workloads.csv (hd64 and hd128 rows). Timed figures: median ms per call
// over interleaved rounds; TFLOP/s counted on the FLOPs each kernel computes (4 x rows x listed keys
// x D per head); efficiency = sparse TFLOP/s over dense TFLOP/s in the same run.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_exit.h"
#include "diffattn/problem.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "kernels/cuda/sage/run_sage_attn.h"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper.h"

using namespace diffattn::flash;

struct Work {
  std::string name;
  int B, H, Sq, Skv, D;
};

static std::vector<Work> load_workloads(const std::string& path) {
  std::ifstream in(path);
  std::vector<Work> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("name,", 0) == 0) continue;
    std::stringstream ss(line);
    Work w;
    std::string f[6];
    for (auto& x : f) std::getline(ss, x, ',');
    w.name = f[0];
    w.B = std::stoi(f[1]);
    w.H = std::stoi(f[2]);
    w.Sq = std::stoi(f[3]);
    w.Skv = std::stoi(f[4]);
    w.D = std::stoi(f[5]);
    out.push_back(w);
  }
  return out;
}

__global__ void fill_random(uint16_t* p, size_t n, unsigned long long seed, bool bf16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float u = (x >> 40) * (1.0f / 16777216.0f);
    const float val = (u - 0.5f) * 3.4641016f;  // variance 1
    p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(val)) : __half_as_ushort(__float2half(val));
  }
}

static double host_to_d(uint16_t x, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(x) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half_raw r;
  r.x = x;
  return __half2float(__half(r));
}

struct Layout {
  int q_tiles = 0, k_tiles = 0;
  std::vector<int32_t> offsets, indices;
  std::vector<int32_t> tile_rows;  // empty: every row valid
};

// share > 0: the odd query tile of each pair keeps that share of its even neighbour's key tiles
// and draws the rest at random (neighbouring video queries attend to much the same keys).
static Layout random_layout(const Work& w, int q_tile, int k_tile, double density, std::mt19937& rng, double share = 0) {
  Layout L;
  L.q_tiles = (w.Sq + q_tile - 1) / q_tile;
  L.k_tiles = (w.Skv + k_tile - 1) / k_tile;
  const int keep = std::max(1, std::min(L.k_tiles, (int)std::lround(density * L.k_tiles)));
  std::vector<int32_t> all(L.k_tiles);
  L.offsets.push_back(0);
  for (long r = 0; r < (long)w.B * w.H * L.q_tiles; ++r) {
    for (int i = 0; i < L.k_tiles; ++i) all[i] = i;
    // The diagonal tile first (a query tile attends to its own keys), then random others.
    const int t = (int)(r % L.q_tiles);
    int first = 0;
    if (t < L.k_tiles) {
      std::swap(all[0], all[t]);
      first = 1;
    }
    if (share > 0 && t % 2 == 1) {
      // Keep `shared` of the previous row's tiles (they are at its end of L.indices), then random others.
      const int shared = std::min(keep, (int)std::lround(share * keep));
      std::vector<int32_t> prev(L.indices.end() - keep, L.indices.end());
      std::shuffle(prev.begin(), prev.end(), rng);
      std::vector<char> used(L.k_tiles, 0);
      for (int i = 0; i < shared; ++i) used[prev[i]] = 1;
      int at = 0;
      for (int i = 0; i < shared; ++i) all[at++] = prev[i];
      std::vector<int32_t> rest;
      for (int i = 0; i < L.k_tiles; ++i)
        if (!used[i]) rest.push_back(i);
      std::shuffle(rest.begin(), rest.end(), rng);
      for (int i = 0; at < keep; ++i) all[at++] = rest[i];
      first = keep;
    }
    for (int i = first; i < keep; ++i) std::swap(all[i], all[i + rng() % (L.k_tiles - i)]);
    std::sort(all.begin(), all.begin() + keep);
    L.indices.insert(L.indices.end(), all.begin(), all.begin() + keep);
    L.offsets.push_back((int32_t)L.indices.size());
  }
  return L;
}

// FLOPs a layout computes: 4 x D per (real query row, real listed key) pair.
static double layout_flops(const Work& w, const Layout& L, int q_tile, int k_tile) {
  double pairs = 0;
  for (long r = 0; r + 1 < (long)L.offsets.size(); ++r) {
    const int t = r % L.q_tiles;
    const int rows = std::min(q_tile, w.Sq - t * q_tile);
    long keys = 0;
    for (int i = L.offsets[r]; i < L.offsets[r + 1]; ++i) keys += std::min(k_tile, w.Skv - L.indices[i] * k_tile);
    pairs += (double)rows * keys;
  }
  return 4.0 * w.D * pairs;
}

struct Bufs {
  uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  float* lse = nullptr;
  int *offsets = nullptr, *indices = nullptr;
};

static HopperArgs make_args(const Work& w, const Bufs& b, bool bf16, int sm_count) {
  HopperArgs a;
  a.q = b.q;
  a.k = b.k;
  a.v = b.v;
  const long long qs[3] = {(long long)w.Sq * w.H * w.D, (long long)w.H * w.D, w.D};
  const long long ks[3] = {(long long)w.Skv * w.H * w.D, (long long)w.H * w.D, w.D};
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = qs[i];
    a.k_stride[i] = ks[i];
    a.v_stride[i] = ks[i];
  }
  a.q_rows = w.Sq;
  a.kv_rows = w.Skv;
  a.tma_batch = w.B;
  a.bf16 = bf16;
  a.sm_count = sm_count;
  auto& p = a.params;
  p.out = b.out;
  p.out_stride_b = qs[0];
  p.out_stride_s = qs[1];
  p.out_stride_h = qs[2];
  p.lse = b.lse;
  p.lse_stride_b = (long long)w.H * w.Sq;
  p.lse_stride_h = w.Sq;
  p.lse_stride_s = 1;
  p.batch = w.B;
  p.heads_q = w.H;
  p.heads_kv = w.H;
  p.seqlen_q = w.Sq;
  p.seqlen_k = w.Skv;
  p.head_size = w.D;
  p.scale_log2 = (1.0f / std::sqrt((float)w.D)) * 1.4426950408889634f;
  return a;
}

// The same problem for the mma.sync kernels.
static diffattn::cuda::SdpaParams make_sdpa_params(const Work& w, const Bufs& b, bool bf16) {
  diffattn::cuda::SdpaParams p;
  p.dtype = bf16 ? diffattn::DType::kBFloat16 : diffattn::DType::kFloat16;
  p.q = b.q;
  p.k = b.k;
  p.v = b.v;
  p.out = b.out;
  p.lse = b.lse;
  p.q_batch_stride = p.o_batch_stride = (long long)w.Sq * w.H * w.D;
  p.k_batch_stride = p.v_batch_stride = (long long)w.Skv * w.H * w.D;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = (long long)w.H * w.D;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = w.D;
  p.lse_batch_stride = (long long)w.H * w.Sq;
  p.lse_head_stride = w.Sq;
  p.batch = w.B;
  p.heads_q = p.heads_kv = w.H;
  p.seqlen_q = w.Sq;
  p.seqlen_kv = w.Skv;
  p.head_dim = p.head_dim_v = w.D;
  p.scale = 1.0f / std::sqrt((float)w.D);
  p.scale_log2 = p.scale * 1.4426950408889634f;
  return p;
}

// Max over sampled rows of max |out - ref| / max |ref| (float64 reference over the listed keys),
// and the LSE's largest absolute error. Rows with an empty list must be zeros with LSE -inf.
struct Check {
  double out_err = 0, lse_err = 0;
  int rows = 0;
  bool ok = true;
};

static Check check(const Work& w, const Bufs& b, const Layout& L, int q_tile, int k_tile, bool bf16, std::mt19937& rng,
                   double out_bound = 0) {
  const size_t nq = (size_t)w.B * w.Sq * w.H * w.D, nk = (size_t)w.B * w.Skv * w.H * w.D;
  std::vector<uint16_t> q(nq), k(nk), v(nk), out(nq);
  std::vector<float> lse((size_t)w.B * w.H * w.Sq);
  CHECK_CUDA(cudaMemcpy(q.data(), b.q, nq * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(k.data(), b.k, nk * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(v.data(), b.v, nk * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out.data(), b.out, nq * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(lse.data(), b.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  Check c;
  const double scale = 1.0 / std::sqrt((double)w.D);
  const int samples = 48;
  std::vector<double> s, o(w.D);
  for (int i = 0; i < samples; ++i) {
    const int bb = rng() % w.B, h = rng() % w.H;
    // Rows of the first, last (partial) and random tiles.
    const int row = i == 0 ? 0 : i == 1 ? w.Sq - 1 : (int)(rng() % w.Sq);
    const int t = row / q_tile;
    const long r = ((long)bb * w.H + h) * L.q_tiles + t;
    const uint16_t* qr = &q[(((size_t)bb * w.Sq + row) * w.H + h) * w.D];
    s.clear();
    std::vector<int> keys;
    if (!L.tile_rows.empty() && row - t * q_tile >= L.tile_rows[t]) {  // a padding row: not checked
      ++c.rows;
      continue;
    }
    for (int x = L.offsets[r]; x < L.offsets[r + 1]; ++x) {
      const int end = L.tile_rows.empty() ? (L.indices[x] + 1) * k_tile : L.indices[x] * k_tile + L.tile_rows[L.indices[x]];
      for (int key = L.indices[x] * k_tile; key < std::min(w.Skv, end); ++key) keys.push_back(key);
    }
    double mx = -INFINITY;
    for (int key : keys) {
      const uint16_t* kr = &k[(((size_t)bb * w.Skv + key) * w.H + h) * w.D];
      double dot = 0;
      for (int d = 0; d < w.D; ++d) dot += host_to_d(qr[d], bf16) * host_to_d(kr[d], bf16);
      s.push_back(dot * scale);
      mx = std::max(mx, dot * scale);
    }
    double sum = 0;
    std::fill(o.begin(), o.end(), 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      const double e = std::exp(s[j] - mx);
      sum += e;
      const uint16_t* vr = &v[(((size_t)bb * w.Skv + keys[j]) * w.H + h) * w.D];
      for (int d = 0; d < w.D; ++d) o[d] += e * host_to_d(vr[d], bf16);
    }
    const uint16_t* got = &out[(((size_t)bb * w.Sq + row) * w.H + h) * w.D];
    const float got_lse = lse[((size_t)bb * w.H + h) * w.Sq + row];
    double ref_max = 0, err = 0;
    for (int d = 0; d < w.D; ++d) {
      const double ref = keys.empty() ? 0.0 : o[d] / sum;
      ref_max = std::max(ref_max, std::fabs(ref));
      err = std::max(err, std::fabs(host_to_d(got[d], bf16) - ref));
      if (!std::isfinite(host_to_d(got[d], bf16))) c.ok = false;
    }
    if (keys.empty()) {
      if (err != 0 || !(std::isinf(got_lse) && got_lse < 0)) c.ok = false;
    } else {
      c.out_err = std::max(c.out_err, err / std::max(ref_max, 1e-6));
      c.lse_err = std::max(c.lse_err, std::fabs(got_lse - (mx + std::log(sum))));
    }
    ++c.rows;
  }
  // bf16 output rounding is 2^-8 relative; fp16's 2^-11.
  const double bound = out_bound > 0 ? out_bound : bf16 ? 1.6e-2 : 4e-3;
  if (c.out_err > bound || (out_bound == 0 && c.lse_err > 2e-3)) c.ok = false;
  return c;
}

// bf16 / fp16, "s" for the 64 x 64 tiling, "a" for the mma.sync pair.
static std::string dtype_label(bool bf16, bool small, bool ampere, const std::string& sage_mode = "") {
  return std::string(bf16 ? "bf16" : "fp16") + (small ? "s" : "") + (ampere ? "a" : "") +
         (sage_mode.empty() ? "" : "+" + sage_mode);
}

static std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

int main(int argc, char** argv) {
  std::string work_list = "wan2.1-14b-480p-self,wan2.1-14b-720p-self", dens = "1,0.5,0.25,0.125", dump, csv_path;
#ifdef DIFFATTN_WORKLOADS_CSV
  std::string workloads_file = DIFFATTN_WORKLOADS_CSV;
#else
  std::string workloads_file = "bench/workloads.csv";
#endif
  int rounds = 5;
  bool check_only = false, bf16 = true, small = false, tile_rows = false, ampere = false;
  std::string sage_mode;  // "", "fp8" or "fp16"
  double share = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--work") work_list = next();
    else if (a == "--densities") dens = next();
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--dump") dump = next();
    else if (a == "--csv") csv_path = next();
    else if (a == "--workloads-file") workloads_file = next();
    else if (a == "--check-only") check_only = true;
    else if (a == "--fp16") bf16 = false;
    else if (a == "--small") small = true;
    else if (a == "--tile-rows") tile_rows = true;
    else if (a == "--ampere") ampere = true;
    else if (a == "--sage") sage_mode = next();
    else if (a == "--share") share = std::stod(next());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  int sm_count = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  const std::vector<Work> all = load_workloads(workloads_file);
  std::vector<double> densities;
  for (const auto& d : split(dens)) densities.push_back(std::stod(d));
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "workload,dtype,density,listed,ms,tflops_computed,dense_ms,dense_tflops,efficiency,speedup,out_err,lse_err,ok\n");
  std::mt19937 rng(20261202);
  bool all_ok = true;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::printf("%-28s %-5s %8s %8s %10s %10s %10s %8s %8s %9s %9s %s\n", "workload", "dtype", "density", "listed",
              "ms", "TF/s", "dense ms", "dense TF", "eff", "speedup", "out err", "check");
  for (const auto& name : split(work_list)) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const Work& w) { return w.name == name; });
    if (it == all.end()) {
      std::fprintf(stderr, "no workload %s\n", name.c_str());
      return 2;
    }
    const Work w = *it;
    HopperTile tile = block_sparse_tile(w.D);
    if (small && tile.block_m > 0) tile.block_m = tile.block_n = kBlockSparseSmallTile;  // the lists' tiles
    if (tile.block_m == 0) {
      std::printf("%-28s skipped: head size %d has no block-sparse kernel\n", w.name.c_str(), w.D);
      continue;
    }
    Bufs b;
    const size_t nq = (size_t)w.B * w.Sq * w.H * w.D, nk = (size_t)w.B * w.Skv * w.H * w.D;
    CHECK_CUDA(cudaMalloc(&b.q, nq * 2));
    CHECK_CUDA(cudaMalloc(&b.k, nk * 2));
    CHECK_CUDA(cudaMalloc(&b.v, nk * 2));
    CHECK_CUDA(cudaMalloc(&b.out, nq * 2));
    CHECK_CUDA(cudaMalloc(&b.lse, (size_t)w.B * w.H * w.Sq * 4));
    fill_random<<<1024, 256>>>(b.q, nq, 1, bf16);
    fill_random<<<1024, 256>>>(b.k, nk, 2, bf16);
    fill_random<<<1024, 256>>>(b.v, nk, 3, bf16);
    CHECK_CUDA(cudaDeviceSynchronize());
    const HopperArgs dense_args = make_args(w, b, bf16, sm_count);
    const diffattn::cuda::SdpaParams dense_sdpa = make_sdpa_params(w, b, bf16);
    const double dense_flops = 4.0 * w.D * (double)w.B * w.H * w.Sq * w.Skv;
    for (double density : densities) {
      Layout L = random_layout(w, tile.block_m, tile.block_n, density, rng, share);
      if (tile_rows && w.Sq == w.Skv)
        for (int t = 0; t < L.q_tiles; ++t)
          L.tile_rows.push_back(t % 5 == 3 ? 1 + (int)(rng() % tile.block_m) : std::min(tile.block_m, w.Sq - t * tile.block_m));
      const double listed = (double)L.indices.size() / ((double)w.B * w.H * L.q_tiles * L.k_tiles);
      if (!dump.empty()) {
        char path[512];
        std::snprintf(path, sizeof path, "%s/%s-%g.offsets.i32", dump.c_str(), w.name.c_str(), density);
        FILE* f = std::fopen(path, "wb");
        std::fwrite(L.offsets.data(), 4, L.offsets.size(), f);
        std::fclose(f);
        std::snprintf(path, sizeof path, "%s/%s-%g.indices.i32", dump.c_str(), w.name.c_str(), density);
        f = std::fopen(path, "wb");
        std::fwrite(L.indices.data(), 4, L.indices.size(), f);
        std::fclose(f);
      }
      CHECK_CUDA(cudaMalloc(&b.offsets, L.offsets.size() * 4));
      CHECK_CUDA(cudaMalloc(&b.indices, std::max<size_t>(1, L.indices.size()) * 4));
      int* rows_dev = nullptr;
      if (!L.tile_rows.empty()) {
        CHECK_CUDA(cudaMalloc(&rows_dev, L.tile_rows.size() * 4));
        CHECK_CUDA(cudaMemcpy(rows_dev, L.tile_rows.data(), L.tile_rows.size() * 4, cudaMemcpyHostToDevice));
      }
      CHECK_CUDA(cudaMemcpy(b.offsets, L.offsets.data(), L.offsets.size() * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(b.indices, L.indices.data(), L.indices.size() * 4, cudaMemcpyHostToDevice));
      HopperArgs sparse_args = dense_args;
      // Whole tiles, as run_block_sparse_cuda runs block-sparse lists; DIFFATTN_LISTED_TAIL_SPLIT=1
      // cuts the last partial wave along the lists.
      const char* split_knob = std::getenv("DIFFATTN_LISTED_TAIL_SPLIT");
      sparse_args.tail_split = split_knob != nullptr && std::string(split_knob) == "1";
      sparse_args.params.bs_offsets = b.offsets;
      sparse_args.params.bs_indices = b.indices;
      sparse_args.params.bs_tile_rows = rows_dev;
      diffattn::cuda::SdpaParams sparse_sdpa = dense_sdpa;
      sparse_sdpa.bs_offsets = b.offsets;
      sparse_sdpa.bs_indices = b.indices;
      sparse_sdpa.bs_tile_rows = rows_dev;
      // One call of each kernel of the pair; the message of a refusal, else empty.
      // SAGE_ATTN's walk takes the problem as views and the lists on the device.
      diffattn::AttentionProblem problem;
      const diffattn::Device gpu{diffattn::DeviceKind::kCuda, 0};
      const diffattn::DType dt = bf16 ? diffattn::DType::kBFloat16 : diffattn::DType::kFloat16;
      problem.q = diffattn::TensorView::Contiguous(b.q, dt, {w.B, w.Sq, w.H, w.D}, gpu);
      problem.k = diffattn::TensorView::Contiguous(b.k, dt, {w.B, w.Skv, w.H, w.D}, gpu);
      problem.v = diffattn::TensorView::Contiguous(b.v, dt, {w.B, w.Skv, w.H, w.D}, gpu);
      problem.out = diffattn::TensorView::Contiguous(b.out, dt, {w.B, w.Sq, w.H, w.D}, gpu);
      problem.lse = diffattn::TensorView::Contiguous(b.lse, diffattn::DType::kFloat32, {w.B, w.H, w.Sq}, gpu);
      const diffattn::flash::DeviceBlockSparseLists device_lists{tile.block_m, tile.block_n, b.offsets, b.indices,
                                                                 rows_dev};
      const auto run_sparse = [&]() -> std::string {
        if (!sage_mode.empty())
          return diffattn::sage::run_sage_block_sparse_cuda(
                     problem, device_lists,
                     sage_mode == "fp8" ? diffattn::sage::PvMode::kFp8 : diffattn::sage::PvMode::kFp16, stream)
              .message();
        if (ampere) return diffattn::cuda::launch_sdpa_mma_block_sparse(sparse_sdpa, tile.block_m, stream).message();
        return launch_flash_hopper_block_sparse(sparse_args, small ? SparseTiling::kSmall : SparseTiling::kLarge, stream)
            .message;
      };
      const auto run_dense = [&]() -> std::string {
        if (ampere) return diffattn::cuda::launch_sdpa_mma(dense_sdpa, stream).message();
        return launch_flash_hopper(dense_args, stream).message;
      };
      // Poison the output so that rows the kernel leaves out show.
      CHECK_CUDA(cudaMemset(b.out, 0xFF, nq * 2));
      if (const std::string refused = run_sparse(); !refused.empty()) {
        std::printf("%s: launch refused: %s\n", w.name.c_str(), refused.c_str());
        return 1;
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const Check c = check(w, b, L, tile.block_m, tile.block_n, bf16, rng,
                            sage_mode.empty() ? 0.0 : sage_mode == "fp8" ? 0.12 : 0.05);
      all_ok = all_ok && c.ok;
      double ms = 0, dense_ms = 0;
      if (!check_only) {
        std::vector<double> ts, td;
        for (int r = 0; r < rounds + 1; ++r) {  // the first round warms up
          CHECK_CUDA(cudaEventRecord(e0, stream));
          run_dense();
          CHECK_CUDA(cudaEventRecord(e1, stream));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float t = 0;
          CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
          if (r > 0) td.push_back(t);
          CHECK_CUDA(cudaEventRecord(e0, stream));
          run_sparse();
          CHECK_CUDA(cudaEventRecord(e1, stream));
          CHECK_CUDA(cudaEventSynchronize(e1));
          CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
          if (r > 0) ts.push_back(t);
        }
        std::sort(ts.begin(), ts.end());
        std::sort(td.begin(), td.end());
        ms = ts[ts.size() / 2];
        dense_ms = td[td.size() / 2];
      }
      const double flops = layout_flops(w, L, tile.block_m, tile.block_n);
      const double tf = check_only ? 0 : flops / ms / 1e9, dtf = check_only ? 0 : dense_flops / dense_ms / 1e9;
      std::printf("%-28s %-5s %8.3f %8.4f %10.3f %10.1f %10.3f %8.1f %8.3f %9.2f %9.2e %s\n", w.name.c_str(),
                  dtype_label(bf16, small, ampere, sage_mode).c_str(), density, listed, ms, tf, dense_ms, dtf, dtf > 0 ? tf / dtf : 0.0,
                  ms > 0 ? dense_ms / ms : 0.0, c.out_err, c.ok ? "ok" : "FAIL");
      if (csv)
        std::fprintf(csv, "%s,%s,%g,%.5f,%.4f,%.1f,%.4f,%.1f,%.4f,%.3f,%.3e,%.3e,%d\n", w.name.c_str(),
                     dtype_label(bf16, small, ampere, sage_mode).c_str(), density, listed, ms, tf, dense_ms, dtf, dtf > 0 ? tf / dtf : 0.0,
                     ms > 0 ? dense_ms / ms : 0.0, c.out_err, c.lse_err, c.ok ? 1 : 0);
      CHECK_CUDA(cudaFree(b.offsets));
      CHECK_CUDA(cudaFree(b.indices));
      if (rows_dev) CHECK_CUDA(cudaFree(rows_dev));
    }
    CHECK_CUDA(cudaFree(b.q));
    CHECK_CUDA(cudaFree(b.k));
    CHECK_CUDA(cudaFree(b.v));
    CHECK_CUDA(cudaFree(b.out));
    CHECK_CUDA(cudaFree(b.lse));
  }
  if (csv) std::fclose(csv);
  std::printf("correctness: %s\n", all_ok ? "all ok" : "FAILURES");
  return all_ok ? 0 : 1;
}
