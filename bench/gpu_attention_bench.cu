// GPU attention benchmark: every registered backend that runs on this device, on the DiT
// workloads of the H200 reference table, timed with CUDA events (warm-up, median of N, inputs
// rotated across sets), with relL2 against an fp32 reference on a slice and relL2 and cosine against
// a float64 reference on a smaller one. Backends with options worth measuring run once per option
// set (SAGE_ATTN: FP8 and 16-bit P*V; FLASHINFER_ATTN: unquantised and QK16/V8). Inputs come from a
// counter-based generator that bench/peers.py reproduces bit for bit, so PyTorch's kernels are
// measured on the same data. Prints a table and writes JSON (--json FILE).
//
//   gpu_attention_bench [--workloads-file CSV] [--workloads a,b,...] [--backends A,B] [--iters N]
//                       [--warmup N] [--warmup-ms N] [--sets N] [--rest-ms N] [--rounds N] [--graph] [--json FILE]
//                       [--list]
// --workloads-file: the workload table (default: the source tree's bench/workloads.csv, which
// bench/peers.py reads too); --workloads picks names from it.
// --rest-ms: the GPU idles this long (default 1000) before each row's warm-up.
// --warmup-ms: after the --warmup calls, back-to-back samples run untimed until this much GPU time
// has passed (default 300), so the timed samples see the clocks of sustained load rather than the
// swing of the first few hundred milliseconds after the rest.
// --rounds N: each backend (and option set) of a row is timed in N windows, the backends taking
// turns, and its figure is the median of the windows' medians; the backends of one process then
// share the machine's drift, so their ratios hold still (default 1: each timed once, in turn).
// --graph captures each sample's calls into a CUDA graph once and times its replays, which takes
// the backends' per-call host work out of the figure (diffattn's backends only; the peers are
// not replayed).
// Without --backends every registered backend that can run here is measured; --list prints their
// names, one a line (scripts/gpu_bench.sh runs each in its own process).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda_exit.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/registry.h"
#include "kernels/cuda/dense/sdpa_launch.h"
#include "workloads.h"

namespace {

using namespace diffattn;

using bench::Workload;

#ifndef DIFFATTN_WORKLOADS_CSV
#error "DIFFATTN_WORKLOADS_CSV (the default workloads file) is set by bench/CMakeLists.txt"
#endif

constexpr int kSliceRows = 1024;  // query rows of the fp32 reference slice
constexpr int kSliceHeads = 2;
constexpr int kFp64Rows = 128;    // query rows of the float64 reference (computed on the host)

// The generator bench/peers.py mirrors: a 32-bit integer hash of (tensor, index) to a uniform
// value with unit variance, rounded to bf16. Explicit _rn operations keep it bit-exact.
__device__ __host__ inline unsigned int hash32(unsigned long long index, unsigned int stream) {
  unsigned long long x = (index * 2654435761ull + stream * 97531ull + 12345ull) & 0xffffffffull;
  x ^= x >> 16;
  x = (x * 0x45d9f3bull) & 0xffffffffull;
  x ^= x >> 16;
  x = (x * 0x45d9f3bull) & 0xffffffffull;
  x ^= x >> 16;
  return static_cast<unsigned int>(x);
}

__global__ void fill_kernel(__nv_bfloat16* out, long long n, unsigned int stream) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    const float u = __fmul_rn(static_cast<float>(hash32(static_cast<unsigned long long>(i), stream)), 2.3283064365386963e-10f);
    out[i] = __float2bfloat16_rn(__fmul_rn(__fsub_rn(__fmul_rn(u, 2.f), 1.f), 1.7320508f));
  }
}

// Copies rows [0, rows) and heads [0, heads) of a contiguous [S, H, D] bf16 tensor to fp32.
__global__ void slice_to_float(const __nv_bfloat16* in, float* out, int rows, int heads, int src_heads, int d) {
  const long long n = static_cast<long long>(rows) * heads * d;
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    const int e = static_cast<int>(i % d);
    const int h = static_cast<int>((i / d) % heads);
    const long long r = i / (static_cast<long long>(d) * heads);
    out[i] = __bfloat162float(in[(r * src_heads + h) * d + e]);
  }
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  return items;
}

struct Args {
  std::string workloads_file = DIFFATTN_WORKLOADS_CSV;
  std::vector<std::string> workloads, backends;
  int iters = 10, warmup = 3, sets = 2;
  int warmup_ms = 300;  // untimed back-to-back samples after the warm-up calls (sustained clocks)
  int rest_ms = 1000;  // idle time before each row, so every row starts from the same power state
  int rounds = 1;      // timing windows per entry, the entries taking turns (see the row loop)
  std::string json;
  bool list = false;
  bool graph = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (flag == "--workloads-file") {
      a.workloads_file = next();
    } else if (flag == "--workloads") {
      a.workloads = split(next());
    } else if (flag == "--backends") {
      a.backends = split(next());
    } else if (flag == "--iters") {
      a.iters = std::atoi(next().c_str());
    } else if (flag == "--warmup") {
      a.warmup = std::atoi(next().c_str());
    } else if (flag == "--warmup-ms") {
      a.warmup_ms = std::max(0, std::atoi(next().c_str()));
    } else if (flag == "--sets") {
      a.sets = std::max(1, std::atoi(next().c_str()));
    } else if (flag == "--rest-ms") {
      a.rest_ms = std::max(0, std::atoi(next().c_str()));
    } else if (flag == "--rounds") {
      a.rounds = std::atoi(next().c_str());
    } else if (flag == "--json") {
      a.json = next();
    } else if (flag == "--list") {
      a.list = true;
    } else if (flag == "--graph") {
      a.graph = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\nusage: gpu_attention_bench [--workloads-file CSV] [--workloads a,b] [--backends A,B] [--iters N] [--warmup N] [--warmup-ms N] [--sets N] [--rest-ms N] [--rounds N] [--graph] [--json FILE] [--list]\n", flag.c_str());
      std::exit(2);
    }
  }
  // Each figure is a median of timed samples (of windows, with --rounds): at least one of each.
  if (a.iters < 1 || a.rounds < 1) {
    std::fprintf(stderr, "--iters and --rounds take a count of at least 1 (got %d and %d)\n", a.iters, a.rounds);
    std::exit(2);
  }
  return a;
}

struct Tensors {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
};

TensorView view(void* data, DType dtype, long long b, long long s, long long h, long long d) {
  TensorView t = TensorView::Contiguous(data, dtype, {b, s, h, d}, Device{DeviceKind::kCuda, 0});
  return t;
}

AttentionProblem problem_for(const Workload& w, const Tensors& t) {
  AttentionProblem p;
  p.q = view(t.q, DType::kBFloat16, w.batch, w.seq_q, w.heads, w.head_dim);
  p.k = view(t.k, DType::kBFloat16, w.batch, w.seq_kv, w.heads, w.head_dim);
  p.v = view(t.v, DType::kBFloat16, w.batch, w.seq_kv, w.heads, w.head_dim);
  p.out = view(t.out, DType::kBFloat16, w.batch, w.seq_q, w.heads, w.head_dim);
  return p;
}

// Output slice of the first set vs. an fp32 computation on the same (bf16) inputs.
double rel_l2_on_slice(const Workload& w, const Tensors& t) {
  const int rows = std::min(kSliceRows, w.seq_q);
  const int d = w.head_dim;
  float *q32, *k32, *v32, *o32;
  CHECK_CUDA(cudaMalloc(&q32, sizeof(float) * rows * kSliceHeads * d));
  CHECK_CUDA(cudaMalloc(&k32, sizeof(float) * static_cast<size_t>(w.seq_kv) * kSliceHeads * d));
  CHECK_CUDA(cudaMalloc(&v32, sizeof(float) * static_cast<size_t>(w.seq_kv) * kSliceHeads * d));
  CHECK_CUDA(cudaMalloc(&o32, sizeof(float) * rows * kSliceHeads * d));
  slice_to_float<<<1024, 256>>>(t.q, q32, rows, kSliceHeads, w.heads, d);
  slice_to_float<<<1024, 256>>>(t.k, k32, w.seq_kv, kSliceHeads, w.heads, d);
  slice_to_float<<<1024, 256>>>(t.v, v32, w.seq_kv, kSliceHeads, w.heads, d);
  AttentionProblem ref;
  ref.q = view(q32, DType::kFloat32, 1, rows, kSliceHeads, d);
  ref.k = view(k32, DType::kFloat32, 1, w.seq_kv, kSliceHeads, d);
  ref.v = view(v32, DType::kFloat32, 1, w.seq_kv, kSliceHeads, d);
  ref.out = view(o32, DType::kFloat32, 1, rows, kSliceHeads, d);
  auto params = cuda::make_sdpa_params(ref);
  if (!params.ok() || !cuda::launch_sdpa_generic(*params, nullptr).ok()) return NAN;
  std::vector<float> want(static_cast<size_t>(rows) * kSliceHeads * d);
  CHECK_CUDA(cudaMemcpy(want.data(), o32, want.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<__nv_bfloat16> got(static_cast<size_t>(rows) * w.heads * d);
  CHECK_CUDA(cudaMemcpy(got.data(), t.out, got.size() * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < kSliceHeads; ++h)
      for (int e = 0; e < d; ++e) {
        const double x = __bfloat162float(got[(static_cast<size_t>(r) * w.heads + h) * d + e]);
        const double y = want[(static_cast<size_t>(r) * kSliceHeads + h) * d + e];
        num += (x - y) * (x - y);
        den += y * y;
      }
  cudaFree(q32), cudaFree(k32), cudaFree(v32), cudaFree(o32);
  return std::isfinite(num) ? std::sqrt(num / den) : INFINITY;
}

// Heads [0, kSliceHeads) of rows [0, rows) of a [1, S, H, D] bf16 tensor, as floats on the host.
std::vector<float> host_slice(const __nv_bfloat16* data, int rows, int heads, int d) {
  float* slice = nullptr;
  const size_t n = static_cast<size_t>(rows) * kSliceHeads * d;
  CHECK_CUDA(cudaMalloc(&slice, n * sizeof(float)));
  slice_to_float<<<1024, 256>>>(data, slice, rows, kSliceHeads, heads, d);
  std::vector<float> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), slice, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(slice);
  return host;
}

// Attention in float64 on the host for the first kFp64Rows query rows and kSliceHeads heads of the
// first set: [rows, kSliceHeads, D]. Computed once per workload.
std::vector<double> fp64_reference(const Workload& w, const Tensors& t) {
  const int rows = std::min(kFp64Rows, w.seq_q), d = w.head_dim, skv = w.seq_kv;
  const std::vector<float> q = host_slice(t.q, rows, w.heads, d), k = host_slice(t.k, skv, w.heads, d),
                           v = host_slice(t.v, skv, w.heads, d);
  std::vector<double> out(static_cast<size_t>(rows) * kSliceHeads * d, 0.0), p(skv);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < kSliceHeads; ++h) {
      double mx = -INFINITY;
      for (int j = 0; j < skv; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e)
          dot += static_cast<double>(q[(static_cast<size_t>(r) * kSliceHeads + h) * d + e]) *
                 k[(static_cast<size_t>(j) * kSliceHeads + h) * d + e];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int j = 0; j < skv; ++j) sum += (p[j] = std::exp(p[j] - mx));
      double* o = &out[(static_cast<size_t>(r) * kSliceHeads + h) * d];
      for (int j = 0; j < skv; ++j)
        for (int e = 0; e < d; ++e) o[e] += p[j] / sum * v[(static_cast<size_t>(j) * kSliceHeads + h) * d + e];
    }
  return out;
}

struct Fp64Errors {
  double rel_l2 = NAN, cosine = NAN;
};

// The first set's output against the float64 reference.
Fp64Errors errors_vs_fp64(const Workload& w, const Tensors& t, const std::vector<double>& want) {
  const int rows = std::min(kFp64Rows, w.seq_q), d = w.head_dim;
  std::vector<__nv_bfloat16> got(static_cast<size_t>(rows) * w.heads * d);
  CHECK_CUDA(cudaMemcpy(got.data(), t.out, got.size() * 2, cudaMemcpyDeviceToHost));
  double diff2 = 0, want2 = 0, got2 = 0, dot = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < kSliceHeads; ++h)
      for (int e = 0; e < d; ++e) {
        const double x = __bfloat162float(got[(static_cast<size_t>(r) * w.heads + h) * d + e]);
        const double y = want[(static_cast<size_t>(r) * kSliceHeads + h) * d + e];
        diff2 += (x - y) * (x - y), want2 += y * y, got2 += x * x, dot += x * y;
      }
  Fp64Errors errors;
  errors.rel_l2 = std::isfinite(diff2) ? std::sqrt(diff2 / want2) : INFINITY;
  errors.cosine = std::isfinite(dot) ? dot / std::sqrt(want2 * got2) : NAN;
  return errors;
}

// The option sets a backend is measured with: its default, for SAGE_ATTN also the accurate 16-bit
// P*V mode, and for FLASHINFER_ATTN also its QK16/V8 quant mode (FP8 V and P*V), so the table shows
// what each mode costs and gains.
struct Variant {
  std::string label;
  nlohmann::json extra = nlohmann::json::object();
  std::optional<AttnQuantSpec> quant;
};

std::vector<Variant> variants_of(const std::string& backend) {
  std::vector<Variant> variants{{backend}};
  if (backend == "SAGE_ATTN") variants.push_back({"SAGE_ATTN pv=fp16", {{"pv", "fp16"}}});
  if (backend == "FLASHINFER_ATTN") {
    AttnQuantSpec fp8_v;
    fp8_v.dtype_vo = "fp8_e4m3";
    variants.push_back({"FLASHINFER_ATTN qk16/v8", nlohmann::json::object(), fp8_v});
  }
  return variants;
}

// Sum of the first 4096 q elements: peers.py prints the same figure to show the data matches.
double q_checksum(const Tensors& t) {
  std::vector<__nv_bfloat16> h(4096);
  CHECK_CUDA(cudaMemcpy(h.data(), t.q, h.size() * 2, cudaMemcpyDeviceToHost));
  double s = 0;
  for (auto x : h) s += __bfloat162float(x);
  return s;
}

// A backend joins the benchmark when it runs CUDA views and is available on this device.
bool runs_here(const Registry& registry, const std::string& name, const PlatformInfo& platform) {
  auto desc = registry.find(name);
  if (!desc.ok()) return false;
  const BackendDescriptor& d = **desc;
  if (std::find(d.caps.devices.begin(), d.caps.devices.end(), DeviceKind::kCuda) == d.caps.devices.end()) return false;
  return !(d.unavailable_reason && d.unavailable_reason(platform));
}

// Times `iters` replays of a CUDA graph holding `per_sample` calls (inputs rotated over the sets
// as in the plain loop), captured once on a stream of its own; ms gets the time per call.
Status time_graph_replays(Backend& backend, const Workload& w, const std::vector<Tensors>& sets, int per_sample,
                          int iters, std::vector<float>* ms) {
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // One call on the stream before capture: a backend that keeps per-stream workspaces (CUDNN_ATTN)
  // allocates them then, since allocation is not allowed while a stream is being captured.
  Status status = backend.forward(problem_for(w, sets[0]), stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  if (!status.ok()) {
    CHECK_CUDA(cudaStreamDestroy(stream));
    return status;
  }
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int c = 0; c < per_sample && status.ok(); ++c)
    status = backend.forward(problem_for(w, sets[c % sets.size()]), stream);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (status.ok() && end != cudaSuccess)
    status = CudaError(std::string("capture failed: ") + cudaGetErrorString(end));
  if (status.ok()) {
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) status = CudaError(std::string("graph instantiation failed: ") + cudaGetErrorString(e));
  }
  (void)cudaGetLastError();
  if (status.ok()) {
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));  // warm-up replay
    for (int i = 0; i < iters; ++i) {
      CHECK_CUDA(cudaEventRecord(start, stream));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaEventRecord(stop, stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
      ms->push_back(t / per_sample);
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
  }
  if (exec != nullptr) CHECK_CUDA(cudaGraphExecDestroy(exec));
  if (graph != nullptr) CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return status;
}

// UTC time of day with milliseconds, as nvidia-smi's timestamps print it, to line rows up with
// the clock timeline scripts/gpu_bench.sh records.
std::string wall_clock() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char text[32];
  std::snprintf(text, sizeof text, "%02d:%02d:%02d.%03lld", utc.tm_hour, utc.tm_min, utc.tm_sec, ms);
  return text;
}

// Calls per timed sample: enough back-to-back work (4e12 FLOPs, 5-10 ms on an H200) that the host's
// per-call work overlaps the kernels and a sample's first launch latency is a small share of it.
int calls_per_sample(double flops) { return static_cast<int>(std::clamp(std::ceil(4e12 / flops), 1.0, 200.0)); }

struct Row {
  std::string workload, backend, error;
  double ms = 0, tflops = 0, rel_l2 = 0, rel_l2_fp64 = NAN, cosine_fp64 = NAN;
  double spread = 0;  // (slowest - fastest sample) / median
};

double finite_or(double x, double fallback) { return std::isfinite(x) ? x : fallback; }

}  // namespace

// The workloads of the file that --workloads names (all of them without it); an unknown name is
// an error rather than a row silently left out.
Result<std::vector<Workload>> chosen_workloads(const Args& args) {
  DIFFATTN_ASSIGN_OR_RETURN(std::vector<Workload> all, bench::load_workloads(args.workloads_file));
  if (args.workloads.empty()) return all;
  std::vector<Workload> chosen;
  for (const std::string& name : args.workloads) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const Workload& w) { return w.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const Workload& w : all) known += (known.empty() ? "" : ", ") + w.name;
      return InvalidInput("--workloads: '" + name + "' is not in " + args.workloads_file + "; known: " + known);
    }
    chosen.push_back(*it);
  }
  return chosen;
}

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  auto platform = probe_cuda_platform(0);
  if (!platform.ok()) {
    std::fprintf(stderr, "gpu_attention_bench: %s\n", platform.status().message().c_str());
    return 3;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));

  Registry& registry = global_registry();
  if (args.list) {
    for (const std::string& name : registry.names())
      if (runs_here(registry, name, *platform)) std::printf("%s\n", name.c_str());
    return 0;
  }
  const auto workloads = chosen_workloads(args);
  if (!workloads.ok()) {
    std::fprintf(stderr, "gpu_attention_bench: %s\n", workloads.status().message().c_str());
    return 2;
  }
  std::printf("device: %s (%d SMs), driver API %d, cuDNN %d\n", prop.name, prop.multiProcessorCount, driver,
              platform->cudnn_version);
  std::vector<Row> rows;
  std::vector<std::pair<std::string, double>> checksums;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  for (const Workload& w : *workloads) {
    std::vector<Tensors> sets(args.sets);
    const long long nq = 1ll * w.batch * w.seq_q * w.heads * w.head_dim;
    const long long nkv = 1ll * w.batch * w.seq_kv * w.heads * w.head_dim;
    for (int s = 0; s < args.sets; ++s) {
      CHECK_CUDA(cudaMalloc(&sets[s].q, nq * 2));
      CHECK_CUDA(cudaMalloc(&sets[s].k, nkv * 2));
      CHECK_CUDA(cudaMalloc(&sets[s].v, nkv * 2));
      CHECK_CUDA(cudaMalloc(&sets[s].out, nq * 2));
      fill_kernel<<<2048, 256>>>(sets[s].q, nq, 3 * s + 0);
      fill_kernel<<<2048, 256>>>(sets[s].k, nkv, 3 * s + 1);
      fill_kernel<<<2048, 256>>>(sets[s].v, nkv, 3 * s + 2);
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    checksums.emplace_back(w.name, q_checksum(sets[0]));
    const double flops = 4.0 * w.batch * w.heads * double(w.seq_q) * w.seq_kv * w.head_dim;
    std::vector<double> fp64_truth;  // computed when the first backend of the row has run

    // The row's entries (one per backend and option set), created once. With --rounds N each
    // entry is timed in N windows, the entries taking turns (the first entry of round r is entry
    // r mod n), and its figure is the median of its windows' medians: entries compared with each
    // other then share the machine's drift. With N = 1 each entry is timed once, in order.
    struct Entry {
      Row row;
      std::unique_ptr<Backend> backend;
      Status status;
      std::vector<float> all_ms, window_medians;
    };
    std::vector<Entry> entries;
    for (const std::string& name : registry.names()) {
      if (!args.backends.empty() && std::find(args.backends.begin(), args.backends.end(), name) == args.backends.end())
        continue;
      if (!runs_here(registry, name, *platform)) continue;
      const AttentionProblem probe = problem_for(w, sets[0]);
      if (!(*registry.find(name))->unsupported_reasons(probe.shape()).empty()) continue;
      for (const Variant& variant : variants_of(name)) {
        BackendInit init;
        init.num_heads = w.heads, init.num_kv_heads = w.heads, init.head_size = w.head_dim;
        init.explicit_choice = true;
        init.platform = *platform;
        if (!variant.extra.empty() || variant.quant) {
          init.spec = AttentionSpec{};
          init.spec->backend = name;
          init.spec->extra = variant.extra;
          init.spec->quant = variant.quant;
        }
        Entry e{Row{w.name, variant.label}, nullptr, Status(), {}, {}};
        auto backend = registry.create(name, init);
        if (backend.ok()) {
          e.backend = std::move(*backend);
        } else {
          e.status = backend.status();
        }
        entries.push_back(std::move(e));
      }
    }
    const int per_sample = calls_per_sample(flops);
    for (int round = 0; round < args.rounds; ++round) {
      for (std::size_t turn = 0; turn < entries.size(); ++turn) {
        Entry& e = entries[(turn + static_cast<std::size_t>(round)) % entries.size()];
        if (!e.status.ok()) continue;
        Backend& backend = *e.backend;
        Status& status = e.status;
        // The GPU idles before each window: a row that follows a long one would otherwise run at the
        // lower clock the power limit set for the long one (H200: 1700 vs 1980 MHz after Wan 720p).
        CHECK_CUDA(cudaDeviceSynchronize());
        std::this_thread::sleep_for(std::chrono::milliseconds(args.rest_ms));
        for (int i = 0; i < args.warmup && status.ok(); ++i) status = backend.forward(problem_for(w, sets[i % args.sets]), nullptr);
        // Each sample times per_sample back-to-back calls between two events, so the host's per-call
        // work overlaps the GPU's and the figure is the kernels' time (the peers are timed the same way).
        std::vector<float> ms;
        // Milliseconds of sample i's calls, on the GPU's clock.
        auto sample = [&](int i) {
          CHECK_CUDA(cudaEventRecord(start));
          for (int c = 0; c < per_sample && status.ok(); ++c)
            status = backend.forward(problem_for(w, sets[(i * per_sample + c) % args.sets]), nullptr);
          CHECK_CUDA(cudaEventRecord(stop));
          CHECK_CUDA(cudaEventSynchronize(stop));
          float t = 0;
          CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
          return t;
        };
        // Then untimed samples until args.warmup_ms of GPU time has passed: right after the rest the
        // SM clock swings (an H100 dipped to 1575 MHz for a few hundred ms at the start of a load,
        // bench/results/goals-2026-12-07-3f7e1ce-h100/clock-timeline-b.csv), and a row timed inside
        // that swing moved by up to 10 % between jobs. At most 200 samples.
        float warmed = 0;
        for (int i = 0; i < 200 && warmed < args.warmup_ms && status.ok(); ++i) warmed += sample(i);
        if (args.graph) {
          if (status.ok()) {
            status = time_graph_replays(backend, w, sets, per_sample, args.iters, &ms);
            if (!status.ok()) status = Status(status.code(), "--graph: " + status.message());
          }
        } else {
          for (int i = 0; i < args.iters && status.ok(); ++i) ms.push_back(sample(i) / per_sample);
        }
        if (!status.ok() || ms.empty()) continue;
        std::sort(ms.begin(), ms.end());
        e.window_medians.push_back(ms[ms.size() / 2]);
        e.all_ms.insert(e.all_ms.end(), ms.begin(), ms.end());
      }
    }
    for (Entry& e : entries) {
      Row& row = e.row;
      if (!e.status.ok()) {
        row.error = e.status.message();
        rows.push_back(row);
        continue;
      }
      std::sort(e.window_medians.begin(), e.window_medians.end());
      std::sort(e.all_ms.begin(), e.all_ms.end());
      row.ms = e.window_medians[e.window_medians.size() / 2];
      row.spread = (e.all_ms.back() - e.all_ms.front()) / row.ms;
      row.tflops = flops / (row.ms * 1e-3) * 1e-12;
      CHECK_CUDA(cudaMemset(sets[0].out, 0xff, nq * 2));  // poison: unwritten output shows as NaN
      Status status = e.backend->forward(problem_for(w, sets[0]), nullptr);
      CHECK_CUDA(cudaDeviceSynchronize());
      row.rel_l2 = status.ok() ? rel_l2_on_slice(w, sets[0]) : NAN;
      if (status.ok()) {
        if (fp64_truth.empty()) fp64_truth = fp64_reference(w, sets[0]);
        const Fp64Errors errs = errors_vs_fp64(w, sets[0], fp64_truth);
        row.rel_l2_fp64 = errs.rel_l2, row.cosine_fp64 = errs.cosine;
      } else {
        row.error = status.message();
      }
      rows.push_back(row);
      std::printf("%-28s %-18s %9.3f ms %7.1f TFLOP/s relL2 %.2e (fp32) %.2e (fp64) cosine %.6f  spread %.1f%%  "
                  "done %s\n",
                  w.name.c_str(), row.backend.c_str(), row.ms, row.tflops, row.rel_l2, row.rel_l2_fp64,
                  row.cosine_fp64, 100 * row.spread, wall_clock().c_str());
      std::fflush(stdout);
    }
    for (auto& s : sets) cudaFree(s.q), cudaFree(s.k), cudaFree(s.v), cudaFree(s.out);
  }

  if (!args.json.empty()) {
    std::ofstream f(args.json);
    f << "{\"device\": \"" << prop.name << "\", \"sms\": " << prop.multiProcessorCount << ", \"cudnn\": "
      << platform->cudnn_version << ", \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << "  {\"workload\": \"" << r.workload << "\", \"backend\": \"" << r.backend << "\", \"ms\": " << r.ms
        << ", \"tflops\": " << r.tflops << ", \"rel_l2\": " << finite_or(r.rel_l2, -1.0)
        << ", \"rel_l2_fp64\": " << finite_or(r.rel_l2_fp64, -1.0) << ", \"cosine_fp64\": " << finite_or(r.cosine_fp64, -1.0)
        << ", \"spread\": " << r.spread
        << ", \"error\": \"" << (r.error.empty() ? "" : "failed (see log)") << "\"}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    f << "], \"q_checksums\": {";
    for (size_t i = 0; i < checksums.size(); ++i)
      f << "\"" << checksums[i].first << "\": " << checksums[i].second << (i + 1 < checksums.size() ? ", " : "");
    f << "}}\n";
  }
  for (const Row& r : rows)
    if (!r.error.empty()) std::printf("ERROR %s %s: %s\n", r.workload.c_str(), r.backend.c_str(), r.error.c_str());
  return 0;
}
