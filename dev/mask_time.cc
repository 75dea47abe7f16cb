// FLASHINFER_ATTN's CUDA path (flash::run_masked_cuda) on masked and ragged DiT calls, each beside
// FLASH_ATTN without a mask on the same real tokens, on one GPU: best-of-N times, TFLOP/s of the
// real tokens' work, and the relative L2 difference between the two outputs on the real rows.
// A development probe; built by scripts/device/pack_prebuilt.sh, run by scripts/device/mask_round.sh.
//
//   flux-77of512-keypad   Flux joint attention, 512 text + 4096 image keys, the prompt keeps 77
//                         text keys ([B, Skv] mask) against the 4173 real keys unmasked
//   flux-77of512-dense    the same keep pattern as a dense [1, 1, Sq, Skv] mask (same density)
//   sd3-154of333-keypad   SD3 (hd64, 24 heads) 333 text + 4096 image keys, 154 text keys kept
//   wan22-ragged-4        four Wan2.2-5B-like sequences (24 heads) of 11440, 8580, 5720, 2860
//                         tokens packed (cu_seqlens) against the four run one by one unmasked
//   flux-blocks-50        Flux self-attention under a dense [1, 24, Sq, Skv] mask that empties
//                         half of the 128x128 blocks at random and cuts a tenth of the rest; against
//                         unmasked FLASH_ATTN times the kept fraction of the blocks
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/flash/run_flash_attn.h"

using namespace diffattn;

namespace {

int g_rounds = 10;

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { cudaMalloc(&p, bytes); }
  ~Dev() { cudaFree(p); }
};

std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(nd(rng));
  return v;
}

TensorView view(void* p, long b, long s, long h, long d) {
  return TensorView::Contiguous(p, DType::kBFloat16, {b, s, h, d}, Device{DeviceKind::kCuda, 0});
}

float best_ms(const std::function<Status()>& fn) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  float best = 1e30f;
  for (int r = 0; r < g_rounds + 2; ++r) {
    cudaEventRecord(e0);
    const Status s = fn();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    if (!s.ok()) {
      std::printf("  failed: %s\n", s.ToString().c_str());
      return -1.f;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 2) best = std::min(best, ms);  // two warm-ups
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return best;
}

// Relative L2 of a against b over the rows [row0, row0 + rows) of [S, H, D] blocks.
double rel_l2(const void* a, const void* b, long rows_total, long hd, long row0_a, long row0_b, long rows) {
  std::vector<__nv_bfloat16> ha(size_t(rows) * hd), hb(size_t(rows) * hd);
  cudaMemcpy(ha.data(), static_cast<const __nv_bfloat16*>(a) + row0_a * hd, ha.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hb.data(), static_cast<const __nv_bfloat16*>(b) + row0_b * hd, hb.size() * 2, cudaMemcpyDeviceToHost);
  (void)rows_total;
  double dd = 0, rr = 0;
  for (size_t i = 0; i < ha.size(); ++i) {
    const double x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
    if (!std::isfinite(x)) return INFINITY;
    dd += (x - y) * (x - y), rr += y * y;
  }
  return std::sqrt(dd / rr);
}

void report(const char* name, double flops, float t_masked, float t_ref, double err) {
  std::printf("%-22s %10.3f %10.3f %8.3f %9.1f %9.1f %10.2e\n", name, t_masked, t_ref, t_ref / t_masked,
              flops / t_masked / 1e9, flops / t_ref / 1e9, err);
}

// Joint attention with a padded prompt first: keys [0, text) text, of which the first `keep` are
// real. `dense`: the same keep pattern as a [1, 1, Sq, Skv] mask.
void padded_prompt(const char* name, long heads, long d, long text, long keep, long image, bool dense,
                   std::mt19937& rng) {
  const long s = text + image, real = keep + image;
  auto hq = random_bf16(size_t(s) * heads * d, rng), hk = random_bf16(size_t(s) * heads * d, rng),
       hv = random_bf16(size_t(s) * heads * d, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2);
  cudaMemcpy(q.p, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice);
  // The real keys, compacted: the kept text keys then the image keys.
  const size_t row = size_t(heads) * d;
  Dev kc(real * row * 2), vc(real * row * 2), oc(hq.size() * 2);
  cudaMemcpy(kc.p, k.p, keep * row * 2, cudaMemcpyDeviceToDevice);
  cudaMemcpy(static_cast<char*>(kc.p) + keep * row * 2, static_cast<char*>(k.p) + text * row * 2, image * row * 2,
             cudaMemcpyDeviceToDevice);
  cudaMemcpy(vc.p, v.p, keep * row * 2, cudaMemcpyDeviceToDevice);
  cudaMemcpy(static_cast<char*>(vc.p) + keep * row * 2, static_cast<char*>(v.p) + text * row * 2, image * row * 2,
             cudaMemcpyDeviceToDevice);
  std::vector<unsigned char> hm(dense ? size_t(s) * s : size_t(s));
  for (size_t i = 0; i < hm.size(); ++i) {
    const long j = long(i % s);
    hm[i] = j < keep || j >= text;
  }
  Dev m(hm.size());
  cudaMemcpy(m.p, hm.data(), hm.size(), cudaMemcpyHostToDevice);
  AttentionProblem pm;
  pm.q = view(q.p, 1, s, heads, d), pm.k = view(k.p, 1, s, heads, d), pm.v = view(v.p, 1, s, heads, d);
  pm.out = view(o.p, 1, s, heads, d);
  pm.mask = dense ? TensorView::Contiguous(m.p, DType::kBool, {1, 1, s, s}, Device{DeviceKind::kCuda, 0})
                  : TensorView::Contiguous(m.p, DType::kBool, {1, s}, Device{DeviceKind::kCuda, 0});
  AttentionProblem pr;
  pr.q = pm.q, pr.k = view(kc.p, 1, real, heads, d), pr.v = view(vc.p, 1, real, heads, d);
  pr.out = view(oc.p, 1, s, heads, d);
  const float tm = best_ms([&] { return flash::run_masked_cuda(pm, nullptr); });
  const float tr = best_ms([&] { return flash::run_flash_attn_cuda(pr, nullptr); });
  report(name, 4.0 * heads * s * real * d, tm, tr, rel_l2(o.p, oc.p, s, row, 0, 0, s));
}

void ragged(const char* name, long heads, long d, const std::vector<long>& lengths, std::mt19937& rng) {
  long total = 0;
  std::vector<int> cu = {0};
  double flops = 0;
  for (long l : lengths) total += l, cu.push_back(int(total)), flops += 4.0 * heads * l * l * d;
  const size_t row = size_t(heads) * d;
  auto hq = random_bf16(total * row, rng), hk = random_bf16(total * row, rng), hv = random_bf16(total * row, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2), o1(hq.size() * 2), c(cu.size() * 4);
  cudaMemcpy(q.p, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(c.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice);
  AttentionProblem pp;
  pp.q = view(q.p, 1, total, heads, d), pp.k = view(k.p, 1, total, heads, d), pp.v = view(v.p, 1, total, heads, d);
  pp.out = view(o.p, 1, total, heads, d);
  pp.cu_seqlens_q = pp.cu_seqlens_k =
      TensorView::Contiguous(c.p, DType::kInt32, {long(cu.size())}, Device{DeviceKind::kCuda, 0});
  pp.max_seqlen_q = pp.max_seqlen_k = *std::max_element(lengths.begin(), lengths.end());
  const float tm = best_ms([&] { return flash::run_masked_cuda(pp, nullptr); });
  const float tr = best_ms([&] {
    for (size_t i = 0; i < lengths.size(); ++i) {
      const size_t off = size_t(cu[i]) * row * 2;
      AttentionProblem one;
      one.q = view(static_cast<char*>(q.p) + off, 1, lengths[i], heads, d);
      one.k = view(static_cast<char*>(k.p) + off, 1, lengths[i], heads, d);
      one.v = view(static_cast<char*>(v.p) + off, 1, lengths[i], heads, d);
      one.out = view(static_cast<char*>(o1.p) + off, 1, lengths[i], heads, d);
      if (Status s = flash::run_flash_attn_cuda(one, nullptr); !s.ok()) return s;
    }
    return Status::Ok();
  });
  report(name, flops, tm, tr, rel_l2(o.p, o1.p, total, row, 0, 0, total));
}

// A dense per-head mask that empties `empty` of the 128 x 128 blocks and cuts `cut` of the kept
// ones (each cut block drops a random fifth of its keys per row); the reference is unmasked
// FLASH_ATTN's time scaled by the kept fraction of blocks.
void block_mask(const char* name, long heads, long d, long s, double empty, double cut, std::mt19937& rng) {
  const size_t row = size_t(heads) * d;
  auto hq = random_bf16(s * row, rng), hk = random_bf16(s * row, rng), hv = random_bf16(s * row, rng);
  Dev q(hq.size() * 2), k(hk.size() * 2), v(hv.size() * 2), o(hq.size() * 2), o2(hq.size() * 2);
  cudaMemcpy(q.p, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice);
  const long nb = (s + 127) / 128;
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<unsigned char> hm(size_t(heads) * s * s);
  long kept_blocks = 0;
  for (long h = 0; h < heads; ++h)
    for (long t = 0; t < nb; ++t)
      for (long n = 0; n < nb; ++n) {
        const double x = u(rng);
        const int kind = n == t ? 2 : x < empty ? 0 : x < empty + cut * (1 - empty) ? 1 : 2;  // the diagonal stays
        kept_blocks += kind != 0;
        for (long i = t * 128; i < std::min(s, t * 128 + 128); ++i)
          for (long j = n * 128; j < std::min(s, n * 128 + 128); ++j)
            hm[(size_t(h) * s + i) * s + j] = kind == 2 ? 1 : kind == 1 ? (u(rng) >= 0.2) : 0;
      }
  Dev m(hm.size());
  cudaMemcpy(m.p, hm.data(), hm.size(), cudaMemcpyHostToDevice);
  AttentionProblem pm;
  pm.q = view(q.p, 1, s, heads, d), pm.k = view(k.p, 1, s, heads, d), pm.v = view(v.p, 1, s, heads, d);
  pm.out = view(o.p, 1, s, heads, d);
  pm.mask = TensorView::Contiguous(m.p, DType::kBool, {1, heads, s, s}, Device{DeviceKind::kCuda, 0});
  AttentionProblem pr = pm;
  pr.mask.reset();
  pr.out = view(o2.p, 1, s, heads, d);
  const double kept = double(kept_blocks) / double(heads * nb * nb);
  const float tm = best_ms([&] { return flash::run_masked_cuda(pm, nullptr); });
  const float tr = best_ms([&] { return flash::run_flash_attn_cuda(pr, nullptr); });
  // The dense mask's output is checked by the GPU tests; here only its speed against the kept work.
  report(name, 4.0 * heads * s * s * d * kept, tm, tr * float(kept), NAN);
  std::printf("%-22s kept blocks %.3f of %ld x %ld per head\n", "", kept, nb, nb);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (argc > 2) g_rounds = std::atoi(argv[2]);
  std::mt19937 rng(1234);
  std::printf("%-22s %10s %10s %8s %9s %9s %10s\n", "workload", "masked ms", "ref ms", "x ref", "TF/s", "ref TF/s",
              "relL2");
  const auto want = [&](const char* n) { return only.empty() || std::string(n).find(only) != std::string::npos; };
  if (want("flux-77of512-keypad")) padded_prompt("flux-77of512-keypad", 24, 128, 512, 77, 4096, false, rng);
  if (want("flux-77of512-dense")) padded_prompt("flux-77of512-dense", 24, 128, 512, 77, 4096, true, rng);
  if (want("sd3-154of333-keypad")) padded_prompt("sd3-154of333-keypad", 24, 64, 333, 154, 4096, false, rng);
  if (want("wan22-ragged-4")) ragged("wan22-ragged-4", 24, 128, {11440, 8580, 5720, 2860}, rng);
  if (want("flux-blocks-50")) block_mask("flux-blocks-50", 24, 128, 4608, 0.5, 0.1, rng);
  return 0;
}
