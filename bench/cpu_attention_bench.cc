// CPU attention benchmark: GFLOP/s (4*B*H*Sq*Skv*D) of TORCH_SDPA on the CPU and of the naive
// float64 oracle, next to the single-precision GEMM rate of OpenBLAS measured in the same run, plus
// the peak resident memory of one long call. Prints a Markdown report on stdout.
//
//   cpu_attention_bench [--seqs 1024,4096,16384] [--dims 64,128] [--dtypes float32,bfloat16]
//                       [--memory-seq 32768] [--commit HASH]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if DIFFATTN_HAVE_BLAS
#include <cblas.h>
#endif

#include "backends/factories.h"
#include "diffattn/problem.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/sdpa_cpu.h"

namespace {

using diffattn::AttentionProblem;
using diffattn::DType;
using diffattn::TensorView;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall-clock seconds, and the CPU seconds the process spent divided by its threads: on a busy
// machine the second is what the call would take with the cores to itself.
struct Timing {
  double wall = 1e30;
  double cpu = 1e30;
  void keep_best(const Timing& t) {
    wall = std::min(wall, t.wall);
    cpu = std::min(cpu, t.cpu);
  }
};

int threads();

template <class Fn>
Timing measure(Fn&& fn, clockid_t clock = CLOCK_PROCESS_CPUTIME_ID, int workers = 0) {
  const double cpu0 = cpu_seconds(clock);
  const auto start = Clock::now();
  fn();
  Timing t;
  t.wall = seconds_since(start);
  t.cpu = (cpu_seconds(clock) - cpu0) / (workers > 0 ? workers : threads());
  return t;
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> values;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) values.push_back(std::stoll(item));
  return values;
}

std::vector<std::string> parse_words(const std::string& text) {
  std::vector<std::string> values;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) values.push_back(item);
  return values;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Other work on the machine slows every row; the report says how busy it was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::int64_t status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  return -1;
}

int threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Random [1, S, H, D] tensors of `dtype` (bf16 stored as uint16).
struct Tensors {
  std::vector<std::uint16_t> half_storage[4];
  std::vector<float> float_storage[4];
  AttentionProblem problem;

  Tensors(DType dtype, std::int64_t seq, std::int64_t heads, std::int64_t dim, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto n = static_cast<std::size_t>(seq * heads * dim);
    TensorView* views[4] = {&problem.q, &problem.k, &problem.v, &problem.out};
    for (int t = 0; t < 4; ++t) {
      void* data;
      if (dtype == DType::kFloat32) {
        float_storage[t].resize(n);
        for (auto& x : float_storage[t]) x = t == 3 ? 0.0f : normal(rng);
        data = float_storage[t].data();
      } else {
        half_storage[t].resize(n);
        for (auto& x : half_storage[t]) x = diffattn::cpu::float_to_bf16(t == 3 ? 0.0f : normal(rng));
        data = half_storage[t].data();
      }
      *views[t] = TensorView::Contiguous(data, dtype, {1, seq, heads, dim});
    }
  }
};

Timing sdpa_timing(const AttentionProblem& problem, int reps) {
  diffattn::BackendInit init;
  auto backend = diffattn::create_torch_sdpa_backend(init);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().message().c_str());
    std::exit(1);
  }
  auto run = [&] {
    const diffattn::Status s = (*backend)->forward(problem, nullptr);
    if (!s.ok()) {
      std::fprintf(stderr, "TORCH_SDPA failed: %s\n", s.message().c_str());
      std::exit(1);
    }
  };
  const Timing warm = measure(run);  // warm-up: page faults and thread start-up stay out of the timing
  if (reps == 0) return warm;
  Timing best;
  for (int r = 0; r < reps; ++r) best.keep_best(measure(run));
  return best;
}

// The naive float64 oracle (all scores of a row materialised, two-pass softmax) on `rows` query
// rows of one head; its rate on the full problem is the same per FLOP.
Timing oracle_timing(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                     std::int64_t seq, std::int64_t heads, std::int64_t dim, std::int64_t rows) {
  std::vector<double> scores(static_cast<std::size_t>(seq)), out(static_cast<std::size_t>(dim));
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  volatile double sink = 0.0;
  return measure([&] {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* qi = &q[static_cast<std::size_t>(i * heads * dim)];
    double mx = -INFINITY;
    for (std::int64_t j = 0; j < seq; ++j) {
      const float* kj = &k[static_cast<std::size_t>(j * heads * dim)];
      double dot = 0.0;
      for (std::int64_t e = 0; e < dim; ++e) dot += static_cast<double>(qi[e]) * kj[e];
      scores[static_cast<std::size_t>(j)] = dot * scale;
      mx = std::max(mx, dot * scale);
    }
    double sum = 0.0;
    for (auto& s : scores) sum += (s = std::exp(s - mx));
    std::fill(out.begin(), out.end(), 0.0);
    for (std::int64_t j = 0; j < seq; ++j) {
      const float* vj = &v[static_cast<std::size_t>(j * heads * dim)];
      for (std::int64_t e = 0; e < dim; ++e) out[static_cast<std::size_t>(e)] += scores[static_cast<std::size_t>(j)] * vj[e];
    }
    sink = sink + out[0] / sum;
  }
  }, CLOCK_THREAD_CPUTIME_ID, 1);
}

#if DIFFATTN_HAVE_BLAS
Timing sgemm_timing(int n, int reps) {
  std::vector<float> a(static_cast<std::size_t>(n) * n, 1.0f), b(a), c(a);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : a) x = normal(rng);
  for (auto& x : b) x = normal(rng);
  openblas_set_num_threads(threads());
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  run();
  Timing best;
  for (int r = 0; r < reps; ++r) best.keep_best(measure(run));
  return best;
}
#endif

void report_memory(std::int64_t seq, std::int64_t heads, std::int64_t dim) {
  std::mt19937 rng(11);
  const std::int64_t before_kib = status_kib("VmRSS:");
  Tensors t(DType::kFloat32, seq, heads, dim, rng);
  const double io_mib = 4.0 * seq * heads * dim * 4 / (1024.0 * 1024.0);
  const std::int64_t loaded_kib = status_kib("VmRSS:");
  const double secs = sdpa_timing(t.problem, 0).wall;
  const std::int64_t peak_kib = status_kib("VmHWM:");
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double above_io = (peak_kib - loaded_kib) / 1024.0;
  std::printf("## Peak memory\n\n");
  std::printf("S = %lld, H = %lld, D = %lld, fp32, one call (%.1f s): inputs + output %.1f MiB; "
              "resident before allocating %.1f MiB, after filling inputs %.1f MiB, peak (VmHWM) %.1f MiB "
              "(getrusage maxrss %.1f MiB). Peak above inputs + output: **%.1f MiB** (goal: within 64 MiB).\n\n",
              static_cast<long long>(seq), static_cast<long long>(heads), static_cast<long long>(dim), secs, io_mib,
              before_kib / 1024.0, loaded_kib / 1024.0, peak_kib / 1024.0, usage.ru_maxrss / 1024.0, above_io);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> seqs = {1024, 4096, 16384}, dims = {64, 128};
  std::vector<std::string> dtypes = {"float32", "bfloat16"};
  std::int64_t memory_seq = 32768;
  std::string commit = "unknown";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--seqs") seqs = parse_list(value);
    else if (flag == "--dims") dims = parse_list(value);
    else if (flag == "--dtypes") dtypes = parse_words(value);
    else if (flag == "--memory-seq") memory_seq = std::stoll(value);
    else if (flag == "--commit") commit = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("# CPU attention benchmark\n\n");
  std::printf("- machine: %s, %d threads (OpenMP), kernel: %s\n", cpu_model().c_str(), threads(),
              std::string(diffattn::cpu_isa_name(diffattn::default_cpu_isa())).c_str());
  std::printf("- date: %s\n- commit: %s\n", date, commit.c_str());
  std::printf("- load average at start (1, 5, 15 min): %s\n", load_average().c_str());
  std::printf("- FLOPs counted as 4*B*H*Sq*Skv*D (no mask, not causal); best of the timed calls after one warm-up\n");
  std::printf("- naive oracle: a float64 implementation of the tests' oracle (every score of a row materialised, "
              "two-pass softmax), timed on one thread on 16 query rows of one head (best of 3) and reported per FLOP, "
              "which is the same on the full problem\n\n");
  std::fflush(stdout);

  // First, so that the peak of the larger runs below does not hide it.
  if (memory_seq > 0) report_memory(memory_seq, 1, 128);
  std::fflush(stdout);

  // The ceiling is measured next to every row, so that both see the same machine load.
  auto ceiling = [] {
#if DIFFATTN_HAVE_BLAS
    return sgemm_timing(2048, 3);
#else
    return Timing{};
#endif
  };
  const double gemm_flops = 2.0 * 2048.0 * 2048.0 * 2048.0;
  std::printf("## TORCH_SDPA on the CPU\n\n");
#if DIFFATTN_HAVE_BLAS
  std::printf("SGEMM: OpenBLAS cblas_sgemm 2048x2048x2048 (C = A B^T) on %d threads, best of 3, measured right before "
              "each row.\n\n", threads());
#else
  std::printf("OpenBLAS was not found at build time: no SGEMM ceiling in this run.\n\n");
#endif
  std::printf("Each rate is given twice: by wall-clock time, and by CPU time (process CPU seconds divided by the %d "
              "threads; the oracle: its one thread's CPU seconds), which is what the rate would be with the cores to "
              "itself. On an idle machine the two agree; when other work shares the cores only the CPU-time figures "
              "compare like with like.\n\n", threads());
  std::printf("| dtype | S | D | B x H | SDPA GFLOP/s wall | SDPA GFLOP/s CPU | SGEMM wall | SGEMM CPU | SDPA/SGEMM wall | SDPA/SGEMM CPU | oracle GFLOP/s CPU | SDPA/oracle CPU | time per call |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::mt19937 rng(3);
  for (const std::string& name : dtypes) {
    const DType dtype = name == "bfloat16" ? DType::kBFloat16 : DType::kFloat32;
    for (std::int64_t dim : dims)
      for (std::int64_t seq : seqs) {
        // Keep the run short on two cores: fewer heads for longer sequences.
        const std::int64_t heads = seq >= 16384 ? 1 : seq >= 4096 ? 4 : 8;
        Tensors t(dtype, seq, heads, dim, rng);
        const int reps = seq >= 16384 ? 1 : 3;
        const Timing gemm = ceiling();
        const Timing sdpa = sdpa_timing(t.problem, reps);
        const double flops = 4.0 * heads * static_cast<double>(seq) * seq * dim;
        std::vector<float> q32, k32, v32;
        const std::vector<float>* qkv[3];
        if (dtype == DType::kFloat32) {
          qkv[0] = &t.float_storage[0], qkv[1] = &t.float_storage[1], qkv[2] = &t.float_storage[2];
        } else {
          std::vector<float>* dst[3] = {&q32, &k32, &v32};
          for (int i = 0; i < 3; ++i) {
            for (auto h : t.half_storage[i]) dst[i]->push_back(diffattn::cpu::bf16_to_float(h));
            qkv[i] = dst[i];
          }
        }
        const std::int64_t oracle_rows = 16;
        Timing oracle;
        for (int r = 0; r < 3; ++r) oracle.keep_best(oracle_timing(*qkv[0], *qkv[1], *qkv[2], seq, heads, dim, oracle_rows));
        const double oracle_rate = 4.0 * oracle_rows * static_cast<double>(seq) * dim / oracle.cpu * 1e-9;
        const double wall_rate = flops / sdpa.wall * 1e-9, cpu_rate = flops / sdpa.cpu * 1e-9;
        const double gemm_wall = gemm_flops / gemm.wall * 1e-9, gemm_cpu = gemm_flops / gemm.cpu * 1e-9;
        std::printf("| %s | %lld | %lld | 1 x %lld | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2f | %.0fx | %.3f s |\n",
                    name.c_str(), static_cast<long long>(seq), static_cast<long long>(dim),
                    static_cast<long long>(heads), wall_rate, cpu_rate, gemm_wall, gemm_cpu, wall_rate / gemm_wall,
                    cpu_rate / gemm_cpu, oracle_rate, cpu_rate / oracle_rate, sdpa.wall);
        std::fflush(stdout);
      }
  }
  std::printf("\nLoad average at the end (1, 5, 15 min): %s\n", load_average().c_str());
  return 0;
}
