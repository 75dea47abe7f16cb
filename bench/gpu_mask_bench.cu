// GPU benchmark of masked and packed DiT calls: every mask-capable backend named in --backends
// (default FLASHINFER_ATTN and CUDNN_ATTN) on the same inputs, each beside FLASH_ATTN without a
// mask on the same real tokens, through the registry as a user calls them. Best-of-N times (two
// warm-ups; each sample the mean of enough back-to-back calls for about 2 ms of GPU time, so that
// the host's launch work overlaps the GPU as in a model's forward pass, as the product benchmark
// times; --calls 1 times single calls), TFLOP/s of the real tokens' work, and the relative L2 difference of each output from
// the reference output. bench/mask_peer.py times PyTorch SDPA with the same boolean masks.
//
//   gpu_mask_bench [--workloads a,b] [--backends A,B] [--rounds N] [--rest-ms N] [--calls N]
//
// Besides registry names, --backends takes the 8-bit kernels called directly, for A/B runs of how
// they take a key mask: SAGE_ATTN/bytes (SAGE_ATTN's default mode reading the mask's bytes in
// every key block instead of walking the blocks that keep a key), QK16_V8 (FLASHINFER_ATTN's
// QK16/V8 mode) and QK16_V8/bytes. On the padded prompts every row also gets its own unmasked time
// on the same real keys ("x own": 1 means the mask costs nothing beyond the keys it drops).
//
// --rest-ms: the GPU idles this long (default 1000) before each timed series, so that no series
// runs at the lower clock a long one before it left (as in gpu_attention_bench).
//
//   flux-77of512-keypad   FLUX.1 joint attention, 512 text + 4096 image keys, the prompt keeps 77
//                         text keys ([B, Skv] mask); reference: the 4173 real keys unmasked
//   flux-77of512-dense    the same keep pattern as a dense [1, 1, Sq, Skv] mask
//   sd3-154of333-keypad   SD3 (hd64, 24 heads), 333 text + 4096 image keys, 154 text keys kept
//   sd3-154of333-prefix   the same with the image keys first (diffusers' order): a kept prefix
//   wan22-ragged-4        four Wan2.2-5B-like sequences (24 heads) of 11440, 8580, 5720 and 2860
//                         tokens packed (cu_seqlens); reference: the four run one by one unmasked
//   flux-blocks-50        FLUX.1 self-attention under a dense [1, 24, Sq, Skv] mask that empties
//                         half of the 128 x 128 blocks at random and cuts a tenth of the rest;
//                         reference time: unmasked FLASH_ATTN times the kept fraction of blocks;
//                         reference output: TORCH_SDPA's CUDA kernel on the same mask
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda_exit.h"
#include "diffattn/builtin_backends.h"
#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "kernels/cuda/sage/run_sage_attn.h"

namespace {

using namespace diffattn;

struct Args {
  std::vector<std::string> workloads;
  std::vector<std::string> backends = {"FLASHINFER_ATTN", "CUDNN_ATTN"};
  int rounds = 10;
  int rest_ms = 1000;
  int calls = 0;  // back-to-back calls per timed sample; 0: enough for about 2 ms (1 to 50)
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_mask_bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--workloads") a.workloads = split(value());
    else if (arg == "--backends") a.backends = split(value());
    else if (arg == "--rounds") a.rounds = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--rest-ms") a.rest_ms = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--calls") a.calls = std::max(1, std::atoi(value().c_str()));
    else {
      std::fprintf(stderr, "gpu_mask_bench: unknown argument %s; see the header of bench/gpu_mask_bench.cu\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 1))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

void* upload(Dev& dev, const void* host, size_t bytes) {
  CHECK_CUDA(cudaMemcpy(dev.p, host, bytes, cudaMemcpyHostToDevice));
  return dev.p;
}

std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(nd(rng));
  return v;
}

const Device kGpu{DeviceKind::kCuda, 0};

TensorView view(void* p, long b, long s, long h, long d) {
  return TensorView::Contiguous(p, DType::kBFloat16, {b, s, h, d}, kGpu);
}

int g_rounds = 10;
int g_rest_ms = 1000;
int g_calls = 0;
PlatformInfo g_platform;

Result<std::unique_ptr<Backend>> make(const std::string& name, long heads, long d) {
  BackendInit init;
  init.num_heads = heads, init.num_kv_heads = heads, init.head_size = d;
  init.explicit_choice = true;
  init.platform = g_platform;
  return global_registry().create(name, init);
}

// Back-to-back calls per timed sample: --calls, else enough for about 2 ms of GPU time at the
// warm-ups' speed, 1 to 50.
int calls_per_sample(float one_call_ms) {
  if (g_calls > 0) return g_calls;
  return std::clamp(static_cast<int>(std::ceil(2.0f / std::max(one_call_ms, 0.04f))), 1, 50);
}

// Best of g_rounds timed samples after two warm-ups timed one call at a time (which size the
// samples), each sample the mean of calls_per_sample back-to-back calls; -1 when a call fails (the
// error is printed).
float best_ms(const std::function<Status()>& fn, std::string* error) {
  CHECK_CUDA(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(g_rest_ms));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const auto sample = [&](int calls) -> float {
    CHECK_CUDA(cudaEventRecord(e0));
    for (int c = 0; c < calls; ++c) {
      const Status s = fn();
      if (!s.ok()) {
        *error = s.message();
        CHECK_CUDA(cudaDeviceSynchronize());
        return -1.f;
      }
    }
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return ms / static_cast<float>(calls);
  };
  float warm = 1e30f, best = 1e30f;
  for (int r = 0; r < 2 && best >= 0.f; ++r) {
    const float ms = sample(1);
    if (ms < 0.f) best = -1.f;
    warm = std::min(warm, ms);
  }
  const int calls = calls_per_sample(warm);
  for (int r = 0; r < g_rounds && best >= 0.f; ++r) {
    const float ms = sample(calls);
    best = ms < 0.f ? -1.f : std::min(best, ms);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return best;
}

// Relative L2 of a against b, both n bf16 values on the device.
double rel_l2(const void* a, const void* b, size_t n) {
  std::vector<__nv_bfloat16> ha(n), hb(n);
  CHECK_CUDA(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
  double dd = 0, rr = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
    if (!std::isfinite(x)) return INFINITY;
    dd += (x - y) * (x - y), rr += y * y;
  }
  return std::sqrt(dd / rr);
}

// One masked workload: the masked problem (its out is overwritten by each backend), its FLOPs on
// the real tokens, the reference time and the reference output; `own`, where set, the unmasked
// problem on the same real keys that each row is also timed on.
struct Masked {
  AttentionProblem problem;
  long heads = 0, d = 0;
  double flops = 0;
  float ref_ms = 0;
  std::string ref_error;  // why the reference's timing failed (then ref_ms < 0)
  const void* ref_out = nullptr;
  const AttentionProblem* own = nullptr;
};

// A row's call: a registry backend's forward, or one of the 8-bit kernels named in the header.
Result<std::function<Status(const AttentionProblem&)>> runner(const std::string& name, long heads, long d) {
  using Fn = std::function<Status(const AttentionProblem&)>;
  sage::SageKernelChoice bytes;
  bytes.key_walk = false;
  if (name == "SAGE_ATTN/bytes")
    return Fn([bytes](const AttentionProblem& p) { return sage::run_sage_attn_cuda(p, sage::PvMode::kFp8, nullptr, bytes); });
  if (name == "QK16_V8") return Fn([](const AttentionProblem& p) { return sage::run_qk16_v8_cuda(p, nullptr); });
  if (name == "QK16_V8/bytes")
    return Fn([bytes](const AttentionProblem& p) { return sage::run_qk16_v8_cuda(p, nullptr, bytes); });
  auto backend = make(name, heads, d);
  if (!backend.ok()) return backend.status();
  std::shared_ptr<Backend> shared = std::move(*backend);
  return Fn([shared](const AttentionProblem& p) { return shared->forward(p, nullptr); });
}

void run_backends(const char* name, const Masked& m, const Args& args) {
  if (m.ref_ms < 0) {  // no ratio means anything without the reference
    std::printf("%-22s FLASH_ATTN (the reference) failed: %s\n", name, m.ref_error.c_str());
    return;
  }
  std::printf("%-22s %-16s %10s %10.3f %8s %9s %9.1f %10s\n", name, "FLASH_ATTN (ref)", "", m.ref_ms, "1.000", "",
              m.flops / m.ref_ms / 1e9, "");
  const size_t n = static_cast<size_t>(m.problem.out.numel());
  for (const std::string& backend_name : args.backends) {
    auto call = runner(backend_name, m.heads, m.d);
    std::string error;
    float ms = -1.f;
    if (call.ok()) {
      ms = best_ms([&] { return (*call)(m.problem); }, &error);
    } else {
      error = call.status().message();
    }
    if (ms < 0) {
      std::printf("%-22s %-16s  error: %s\n", name, backend_name.c_str(), error.c_str());
      continue;
    }
    const double err = rel_l2(m.problem.out.data, m.ref_out, n);
    std::string own;  // the row's own unmasked time on the real keys, and the masked call against it
    if (m.own != nullptr) {
      std::string own_error;
      const float own_ms = best_ms([&] { return (*call)(*m.own); }, &own_error);
      char text[64];
      if (own_ms > 0) std::snprintf(text, sizeof text, "  own %.3f ms, x own %.3f", own_ms, own_ms / ms);
      else std::snprintf(text, sizeof text, "  own: failed");
      own = text;
    }
    std::printf("%-22s %-16s %10.3f %10.3f %8.3f %9.1f %9.1f %10.2e%s\n", name, backend_name.c_str(), ms, m.ref_ms,
                m.ref_ms / ms, m.flops / ms / 1e9, m.flops / m.ref_ms / 1e9, err, own.c_str());
  }
}

// Joint attention with a padded prompt first: keys [0, text) are text, of which the first `keep`
// are real. `dense`: the same keep pattern as a [1, 1, Sq, Skv] mask.
// text_last: the image keys come first and the prompt after them (diffusers' SD3 order), so the kept
// keys are a prefix; otherwise the prompt comes first (FLUX.1's order).
void padded_prompt(const char* name, long heads, long d, long text, long keep, long image, bool dense,
                   std::mt19937& rng, const Args& args, bool text_last = false) {
  const long s = text + image, real = keep + image;
  const size_t row = size_t(heads) * d;
  auto hq = random_bf16(s * row, rng), hk = random_bf16(s * row, rng), hv = random_bf16(s * row, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2), oc(hq.size() * 2);
  upload(q, hq.data(), hq.size() * 2), upload(k, hk.data(), hk.size() * 2), upload(v, hv.data(), hv.size() * 2);
  // The real keys, compacted: the kept text keys then the image keys (text last: the first `real`).
  std::vector<__nv_bfloat16> hkc(real * row), hvc(real * row);
  if (text_last) {
    std::copy(hk.begin(), hk.begin() + real * row, hkc.begin());
    std::copy(hv.begin(), hv.begin() + real * row, hvc.begin());
  } else {
    std::copy(hk.begin(), hk.begin() + keep * row, hkc.begin());
    std::copy(hk.begin() + text * row, hk.end(), hkc.begin() + keep * row);
    std::copy(hv.begin(), hv.begin() + keep * row, hvc.begin());
    std::copy(hv.begin() + text * row, hv.end(), hvc.begin() + keep * row);
  }
  Dev kc(hkc.size() * 2), vc(hvc.size() * 2);
  upload(kc, hkc.data(), hkc.size() * 2), upload(vc, hvc.data(), hvc.size() * 2);
  std::vector<unsigned char> hm(dense ? size_t(s) * s : size_t(s));
  for (size_t i = 0; i < hm.size(); ++i) {
    const long j = long(i % s);
    hm[i] = text_last ? j < real : j < keep || j >= text;
  }
  Dev mask(hm.size());
  upload(mask, hm.data(), hm.size());

  Masked m;
  m.heads = heads, m.d = d;
  m.problem.q = view(q.p, 1, s, heads, d), m.problem.k = view(k.p, 1, s, heads, d);
  m.problem.v = view(v.p, 1, s, heads, d), m.problem.out = view(o.p, 1, s, heads, d);
  m.problem.mask = dense ? TensorView::Contiguous(mask.p, DType::kBool, {1, 1, s, s}, kGpu)
                         : TensorView::Contiguous(mask.p, DType::kBool, {1, s}, kGpu);
  AttentionProblem ref;
  ref.q = m.problem.q, ref.k = view(kc.p, 1, real, heads, d), ref.v = view(vc.p, 1, real, heads, d);
  ref.out = view(oc.p, 1, s, heads, d);
  auto flash = make("FLASH_ATTN", heads, d);
  if (!flash.ok()) {
    std::printf("%-22s FLASH_ATTN (the reference) cannot run: %s\n", name, flash.status().message().c_str());
    return;
  }
  m.ref_ms = best_ms([&] { return (*flash)->forward(ref, nullptr); }, &m.ref_error);
  m.ref_out = oc.p;
  m.flops = 4.0 * heads * s * real * d;
  Dev oo(hq.size() * 2);  // the rows' own unmasked outputs, apart from the reference's
  AttentionProblem own = ref;
  own.out = view(oo.p, 1, s, heads, d);
  m.own = &own;
  run_backends(name, m, args);
}

void ragged(const char* name, long heads, long d, const std::vector<long>& lengths, std::mt19937& rng,
            const Args& args) {
  long total = 0;
  std::vector<int> cu = {0};
  double flops = 0;
  for (long l : lengths) total += l, cu.push_back(int(total)), flops += 4.0 * heads * l * l * d;
  const size_t row = size_t(heads) * d;
  auto hq = random_bf16(total * row, rng), hk = random_bf16(total * row, rng), hv = random_bf16(total * row, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2), o1(hq.size() * 2), c(cu.size() * 4);
  upload(q, hq.data(), hq.size() * 2), upload(k, hk.data(), hk.size() * 2), upload(v, hv.data(), hv.size() * 2);
  upload(c, cu.data(), cu.size() * 4);
  Masked m;
  m.heads = heads, m.d = d, m.flops = flops;
  m.problem.q = view(q.p, 1, total, heads, d), m.problem.k = view(k.p, 1, total, heads, d);
  m.problem.v = view(v.p, 1, total, heads, d), m.problem.out = view(o.p, 1, total, heads, d);
  m.problem.cu_seqlens_q = m.problem.cu_seqlens_k =
      TensorView::Contiguous(c.p, DType::kInt32, {long(cu.size())}, kGpu);
  m.problem.max_seqlen_q = m.problem.max_seqlen_k = *std::max_element(lengths.begin(), lengths.end());
  auto flash = make("FLASH_ATTN", heads, d);
  if (!flash.ok()) {
    std::printf("%-22s FLASH_ATTN (the reference) cannot run: %s\n", name, flash.status().message().c_str());
    return;
  }
  m.ref_ms = best_ms(
      [&] {
        for (size_t i = 0; i < lengths.size(); ++i) {
          const size_t off = size_t(cu[i]) * row * 2;
          AttentionProblem one;
          one.q = view(static_cast<char*>(q.p) + off, 1, lengths[i], heads, d);
          one.k = view(static_cast<char*>(k.p) + off, 1, lengths[i], heads, d);
          one.v = view(static_cast<char*>(v.p) + off, 1, lengths[i], heads, d);
          one.out = view(static_cast<char*>(o1.p) + off, 1, lengths[i], heads, d);
          if (Status s = (*flash)->forward(one, nullptr); !s.ok()) return s;
        }
        return Status::Ok();
      },
      &m.ref_error);
  m.ref_out = o1.p;
  run_backends(name, m, args);
}

// A dense per-head mask that empties `empty` of the 128 x 128 blocks (never the diagonal) and cuts
// `cut` of the kept ones (each cut block drops a random fifth of its keys per row).
void block_mask(const char* name, long heads, long d, long s, double empty, double cut, std::mt19937& rng,
                const Args& args) {
  const size_t row = size_t(heads) * d;
  auto hq = random_bf16(s * row, rng), hk = random_bf16(s * row, rng), hv = random_bf16(s * row, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2), o2(hq.size() * 2), o3(hq.size() * 2);
  upload(q, hq.data(), hq.size() * 2), upload(k, hk.data(), hk.size() * 2), upload(v, hv.data(), hv.size() * 2);
  const long nb = (s + 127) / 128;
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<unsigned char> hm(size_t(heads) * s * s);
  long kept_blocks = 0;
  for (long h = 0; h < heads; ++h)
    for (long t = 0; t < nb; ++t)
      for (long n = 0; n < nb; ++n) {
        const double x = u(rng);
        const int kind = n == t ? 2 : x < empty ? 0 : x < empty + cut * (1 - empty) ? 1 : 2;
        kept_blocks += kind != 0;
        for (long i = t * 128; i < std::min(s, t * 128 + 128); ++i)
          for (long j = n * 128; j < std::min(s, n * 128 + 128); ++j)
            hm[(size_t(h) * s + i) * s + j] = kind == 2 ? 1 : kind == 1 ? (u(rng) >= 0.2) : 0;
      }
  Dev mask(hm.size());
  upload(mask, hm.data(), hm.size());
  Masked m;
  m.heads = heads, m.d = d;
  m.problem.q = view(q.p, 1, s, heads, d), m.problem.k = view(k.p, 1, s, heads, d);
  m.problem.v = view(v.p, 1, s, heads, d), m.problem.out = view(o.p, 1, s, heads, d);
  m.problem.mask = TensorView::Contiguous(mask.p, DType::kBool, {1, heads, s, s}, kGpu);
  AttentionProblem unmasked = m.problem;
  unmasked.mask.reset();
  unmasked.out = view(o2.p, 1, s, heads, d);
  AttentionProblem exact = m.problem;
  exact.out = view(o3.p, 1, s, heads, d);
  auto flash = make("FLASH_ATTN", heads, d);
  auto sdpa = make("TORCH_SDPA", heads, d);
  if (!flash.ok() || !sdpa.ok()) {
    std::printf("%-22s FLASH_ATTN or TORCH_SDPA (the references) cannot run\n", name);
    return;
  }
  const double kept = double(kept_blocks) / double(heads * nb * nb);
  m.ref_ms = best_ms([&] { return (*flash)->forward(unmasked, nullptr); }, &m.ref_error) * float(kept);
  if (Status st = (*sdpa)->forward(exact, nullptr); !st.ok()) {
    std::printf("%-22s TORCH_SDPA (the reference output) failed: %s\n", name, st.message().c_str());
    return;
  }
  m.ref_out = o3.p;
  m.flops = 4.0 * heads * s * s * d * kept;
  run_backends(name, m, args);
  std::printf("%-22s kept blocks %.3f of %ld x %ld per head; reference time = unmasked x kept\n", "", kept, nb, nb);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  g_rounds = args.rounds;
  g_rest_ms = args.rest_ms;
  g_calls = args.calls;
  auto platform = probe_cuda_platform(0);
  if (!platform.ok()) {
    std::fprintf(stderr, "gpu_mask_bench: %s\n", platform.status().message().c_str());
    return 3;
  }
  g_platform = *platform;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), cuDNN %d; best of %d samples after 2 warm-ups and %d ms of idle GPU, each "
              "sample %s, bf16\n",
              prop.name, prop.multiProcessorCount, platform->cudnn_version, g_rounds, g_rest_ms,
              g_calls == 1 ? "one call"
                           : g_calls > 1 ? (std::to_string(g_calls) + " back-to-back calls").c_str()
                                         : "back-to-back calls for about 2 ms (1-50)");
  std::printf("%-22s %-16s %10s %10s %8s %9s %9s %10s\n", "workload", "backend", "ms", "ref ms", "x ref", "TF/s",
              "ref TF/s", "relL2 ref");
  std::mt19937 rng(1234);
  const auto want = [&](const char* n) {
    return args.workloads.empty() || std::find(args.workloads.begin(), args.workloads.end(), n) != args.workloads.end();
  };
  if (want("flux-77of512-keypad")) padded_prompt("flux-77of512-keypad", 24, 128, 512, 77, 4096, false, rng, args);
  if (want("flux-77of512-dense")) padded_prompt("flux-77of512-dense", 24, 128, 512, 77, 4096, true, rng, args);
  if (want("sd3-154of333-keypad")) padded_prompt("sd3-154of333-keypad", 24, 64, 333, 154, 4096, false, rng, args);
  if (want("sd3-154of333-prefix"))
    padded_prompt("sd3-154of333-prefix", 24, 64, 333, 154, 4096, false, rng, args, /*text_last=*/true);
  if (want("wan22-ragged-4")) ragged("wan22-ragged-4", 24, 128, {11440, 8580, 5720, 2860}, rng, args);
  if (want("flux-blocks-50")) block_mask("flux-blocks-50", 24, 128, 4608, 0.5, 0.1, rng, args);
  return 0;
}
