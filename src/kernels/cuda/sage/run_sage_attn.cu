// SAGE_ATTN for CUDA views: checks, the launch workspace, the quantization kernels and the
// attention kernel, all on the caller's stream. Every check runs before anything is launched.

#include "kernels/cuda/sage/run_sage_attn.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/flash/flash_config.h"
#include "kernels/cuda/flash/flash_hopper_launch.cuh"
#include "kernels/cuda/sage/sage_ampere.h"
#include "kernels/cuda/sage/sage_config.h"
#include "kernels/cuda/sage/sage_hopper_launch.cuh"
#include "kernels/cuda/sage/sage_params.h"
#include "kernels/cuda/sage/sage_quant.cuh"
#include "kernels/cuda/sage/sage_quant_slices.cuh"
#include "kernels/cuda/scoped_device.h"
#include "kernels/cuda/workspace_pool.h"

namespace diffattn::sage {
namespace {

// `who` names the backend in messages: SAGE_ATTN, or FLASHINFER_ATTN's QK16/V8 mode.
Status check_problem(const AttentionProblem& pr, const std::string& who) {
  if (pr.q.device.kind != DeviceKind::kCuda)
    return InvalidInput(who + "'s CUDA kernels read CUDA tensors, but q lives on the CPU");
  if (pr.q.dtype != DType::kBFloat16 && pr.q.dtype != DType::kFloat16)
    return Unsupported(who + " takes bf16 or fp16 inputs, got " + std::string(dtype_name(pr.q.dtype)) +
                       "; convert q/k/v or select FLASH_ATTN");
  const std::int64_t d = pr.q.size(3);
  if ((d != 64 && d != 128) || pr.v.size(3) != d)
    return Unsupported(who + "'s CUDA kernel has head sizes 64 and 128 (q, k and v alike), got " + std::to_string(d) +
                       "/" + std::to_string(pr.v.size(3)) + "; select FLASH_ATTN for this layer");
  if (pr.is_varlen())
    return Unsupported(who + " does not take packed variable-length batches; pass a key-padding mask instead, or "
                       "select FLASH_ATTN");
  if (pr.mask_kind() == MaskKind::kDense)
    return Unsupported(who + " takes key-padding masks only, not a dense mask; select TORCH_SDPA for this layer");
  for (const TensorView* t : {&pr.q, &pr.k, &pr.v, &pr.out})
    if (t->stride(3) != 1 && t->size(3) > 1)
      return InvalidInput(who + " needs every tensor's head dimension contiguous (stride 1); pass contiguous copies");
  if (pr.out.stride(0) % 2 != 0 || pr.out.stride(1) % 2 != 0 || pr.out.stride(2) % 2 != 0 ||
      reinterpret_cast<std::uintptr_t>(pr.out.data) % 4 != 0)
    return InvalidInput(who + " stores output pairs with 4-byte stores: out must be 4-byte aligned with even "
                        "strides; pass a contiguous out");
  if (!(pr.softmax_scale() > 0.f))
    return Unsupported(who + " needs a positive softmax scale; select TORCH_SDPA for other scales");
  if (pr.q.size(1) >= (std::int64_t{1} << 30) || pr.k.size(1) >= (std::int64_t{1} << 30))
    return InvalidInput(who + ": sequences longer than 2^30 tokens; split them");
  return Status::Ok();
}

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

// Whether a kernel can copy `t` in 16-byte pieces: 16-byte aligned data, strides that are multiples
// of 8 elements.
bool copies_in_16_byte_pieces(const TensorView& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 &&
         t.stride(2) % 8 == 0;
}

// The launch workspace, taken from the kernels' pool on the stream and handed back on it.
struct Workspace {
  cudaStream_t stream;
  void* base = nullptr;
  ~Workspace() {
    if (base != nullptr) (void)cudaFreeAsync(base, stream);
  }
};

// Whether the Hopper kernel walks the key blocks a key mask keeps (SageParams::kv_walk) rather
// than reading the mask's bytes in every block: non-causal key masks whose bits fit the walk
// builder's shared memory (about 393k keys), unless the caller asked for the bytes
// (SageKernelChoice::key_walk).
constexpr int kWalkWarps = 8;
int walk_words(const SageParams& p) { return (p.seqlen_k + kKvBlock + 31) / 32 + 1; }
int walk_blocks(const SageParams& p) { return static_cast<int>(flash::ceil_div(p.seqlen_k, kKvBlock)); }
bool walks_keys(const SageParams& p, bool hopper, bool asked) {
  return asked && hopper && p.kv_mask != nullptr && !p.causal && p.batch <= 65535 && walk_words(p) <= 12 * 1024;
}

// QkMode::k16 reads the caller's Q and K: no INT8 copies, scales or row shifts.
// With p.fused_q the kernel quantizes Q itself: no INT8 Q or scales. `walk`: the key walk's bits,
// entries and counts (walks_keys).
Status take_workspace(SageParams& p, bool v_fp8, bool qk8, bool walk, bool kv_in_kernel, cudaStream_t stream,
                      Workspace& ws) {
  const char* who = qk8 ? kSageName : kQk16V8Name;
  const std::size_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_size;
  const std::size_t q8 = qk8 ? 1 : 0, q_pass = qk8 && !p.fused_q ? 1 : 0;
  std::vector<std::size_t> sizes = {
      q_pass * B * Hq * p.seqlen_q * D,             // q_int8
      q_pass * B * Hq * p.q_groups * 4,             // q_scale
      q8 * B * Hkv * p.seqlen_k * D,                // k_int8
      q8 * B * Hkv * p.k_groups * 4,                // k_scale
      v_fp8 ? B * Hkv * D * p.kv_padded : 0,        // v_e4m3
      B * Hkv * D * 4,                              // v_scale
      B * Hkv * p.stat_chunks * D * 4,              // k_sum_parts
      v_fp8 ? B * Hkv * p.stat_chunks * D * 4 : 0,  // v_amax_parts
      B * p.stat_chunks * 4,                        // valid_parts
      q8 * B * Hq * p.seqlen_q * 4,                 // q_shift
      B * Hkv * D * 4,                              // k_mean
      B * Hkv * D * 4,                              // v_amax
      walk ? B * walk_words(p) * 4 : 0,             // the key walk's bits
      walk ? B * walk_blocks(p) * 8 : 0,            // its entries
      walk ? B * 4 : 0,                             // its counts
      kv_in_kernel ? (B * Hkv + 1) * 4 : 0,         // kv_ready, then kv_next
      kv_in_kernel && v_fp8 ? B * Hkv * D * 4 : 0}; // v_inv
  std::size_t total = 0;
  for (std::size_t s : sizes) total += align256(s);
  cudaError_t e = cuda::workspace_alloc(&ws.base, total, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    ws.base = nullptr;
    return CudaError(std::string(who) + ": cannot allocate its " + std::to_string(total >> 20) +
                     " MiB workspace for the quantized q/k/v: " + cudaGetErrorString(e) +
                     "; free device memory or select FLASH_ATTN");
  }
  char* at = static_cast<char*>(ws.base);
  std::vector<void*> parts;
  for (std::size_t s : sizes) {
    parts.push_back(at);
    at += align256(s);
  }
  p.q_int8 = static_cast<std::int8_t*>(parts[0]);
  p.q_scale = static_cast<float*>(parts[1]);
  p.k_int8 = static_cast<std::int8_t*>(parts[2]);
  p.k_scale = static_cast<float*>(parts[3]);
  p.v_e4m3 = static_cast<std::uint8_t*>(parts[4]);
  p.v_scale = static_cast<float*>(parts[5]);
  p.k_sum_parts = static_cast<float*>(parts[6]);
  p.v_amax_parts = static_cast<float*>(parts[7]);
  p.valid_parts = static_cast<int*>(parts[8]);
  p.q_shift = static_cast<float*>(parts[9]);
  p.k_mean = static_cast<float*>(parts[10]);
  p.v_amax = static_cast<float*>(parts[11]);
  if (walk) {
    p.kv_walk_bits = static_cast<std::uint32_t*>(parts[12]);
    p.kv_walk = static_cast<std::int32_t*>(parts[13]);
    p.kv_walk_count = static_cast<int*>(parts[14]);
    p.kv_walk_stride = walk_blocks(p);
    p.kv_walk_words = walk_words(p);
  }
  if (kv_in_kernel) {
    p.kv_ready = static_cast<int*>(parts[15]);
    p.kv_next = p.kv_ready + B * Hkv;
    if (v_fp8) p.v_inv = static_cast<float*>(parts[16]);
    e = cudaMemsetAsync(p.kv_ready, 0, (B * Hkv + 1) * 4, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaError(std::string(who) + ": cannot clear its in-kernel K/V counters: " + cudaGetErrorString(e));
    }
  }
  return Status::Ok();
}

// The quantization passes' block orders (sage_prepass_kernel, sage_quant_kv_kernel): by default
// the Q pass row block by row block, every head of one first, and the statistics and K/V passes
// key chunk by key chunk, every kv head of one first. On an H100 both together made the passes
// 3-8 % faster than head by head (FLUX.1 0.102 -> 0.097 ms, SD3 0.056 -> 0.051-0.052, Wan2.2-5B
// 0.213 -> 0.203-0.206, QK16/V8's V pass on Wan2.2-5B 0.093 -> 0.086-0.087; 512-key
// cross-attention's Q pass level; bench/results/sage-quant-order-2026-12-06-h100/). The environment's
// DIFFATTN_SAGE_Q_ORDER=rows and DIFFATTN_SAGE_KV_ORDER=heads take the head-by-head orders instead
// (read at every call; A/B runs and tests). Every order gives the same bits.
bool sage_q_heads_first() {
  const char* knob = std::getenv("DIFFATTN_SAGE_Q_ORDER");
  return knob == nullptr || std::string(knob) != "rows";
}

// K and V quantized inside the attention kernel (SageParams::kv_ready): sage_config.h's
// sage_kv_in_kernel rule, or DIFFATTN_SAGE_KV_IN_KERNEL=0 / =1 (never / wherever the kernel fits;
// read at every call, for A/B runs and the tests).
int sage_kv_in_kernel_request() {
  const char* knob = std::getenv("DIFFATTN_SAGE_KV_IN_KERNEL");
  if (knob == nullptr) return -1;
  return std::string(knob) == "1" ? 1 : std::string(knob) == "0" ? 0 : -1;
}

bool sage_kv_keys_first() {
  const char* knob = std::getenv("DIFFATTN_SAGE_KV_ORDER");
  return knob == nullptr || std::string(knob) != "heads";
}

// `kernel` on `grid` CTAs of kSliceThreads threads in clusters of `cluster` CTAs, with `smem` bytes
// of dynamic shared memory, as a dependent launch where `dependent` (and dependent launches are on).
template <class... Params, class... Args>
cudaError_t launch_in_clusters(void (*kernel)(Params...), int grid, int cluster, std::size_t smem, bool dependent,
                               cudaStream_t stream, Args... args) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(kSliceThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent && cuda::dependent_launch_enabled() ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// sage_kv_slices_kernel's launch: clusters of kD / 16 CTAs (the slices of one kind of one head).
template <bool kBf16, int kD>
cudaError_t launch_kv_slices(const SageParams& p, bool k_kind, bool v_kind, bool dependent, cudaStream_t stream) {
  const int kinds = (k_kind ? 1 : 0) + (v_kind ? 1 : 0);
  return launch_in_clusters(sage_kv_slices_kernel<kBf16, kD>, p.batch * p.heads_kv * kinds * (kD / kSliceChannels),
                            kD / kSliceChannels, slice_smem_bytes(p.kv_padded, p.k_groups), dependent, stream, p,
                            k_kind, v_kind);
}

// qk8 false (QkMode::k16): V's statistics and the V pass only. p.fused_q: no Q pass. `dependent`
// (sm_90): the means and the K/V pass are launched as dependent launches (cuda/dependent_launch.cuh),
// so that the K/V pass loads K and V while the statistics pass finishes and the means run.
// `slices` (uses_kv_slices): K's and V's passes as one sage_kv_slices_kernel instead, after the Q
// pass and the key walk where they run (a dependent launch only after one of them: it loads K and V
// before it waits, which the caller's own earlier kernels may still be writing).
template <bool kBf16, int kD>
Status quantize(const SageParams& p, bool v_fp8, bool qk8, bool dependent, bool slices, cudaStream_t stream) {
  const int bhq = p.batch * p.heads_q, bhkv = p.batch * p.heads_kv;
  const int q_blocks = qk8 && !p.fused_q ? static_cast<int>(flash::ceil_div(p.seqlen_q, kQRowsPerBlock)) * bhq : 0;
  const int stat_blocks = slices ? 0 : p.stat_chunks * bhkv;
  const bool keys_first = sage_kv_keys_first();
  if (q_blocks + stat_blocks > 0)
    sage_prepass_kernel<kBf16, kD><<<q_blocks + stat_blocks, 256, 0, stream>>>(p, qk8, v_fp8, q_blocks,
                                                                               sage_q_heads_first(), keys_first);
  bool after_own = q_blocks + stat_blocks > 0;  // a kernel of this call runs before the next launch
  cudaError_t e = cudaSuccess;
  if (p.kv_walk != nullptr) {
    // The key walk, beside the statistics pass (it waits for that pass before it exits, so the
    // means' wait for it covers both); one block a batch packs the mask and walks it.
    const int words = walk_words(p);
    e = cuda::launch_maybe_dependent(
        dependent && after_own, flash::hopper_detail::key_walk_kernel<kKvBlock>, dim3(p.batch), dim3(32 * kWalkWarps),
        static_cast<std::size_t>(words) * 4, stream, p.kv_walk_bits, words, p.seqlen_k, p.kv_walk_stride,
        /*aligned_only=*/true, /*in_smem=*/true, const_cast<std::int32_t*>(p.kv_walk), p.kv_mask, p.mask_stride_b,
        p.mask_stride_s, const_cast<int*>(p.kv_walk_count));
    after_own = true;
  }
  if (slices) {
    if (e == cudaSuccess) e = launch_kv_slices<kBf16, kD>(p, qk8, v_fp8, dependent && after_own, stream);
  } else {
    if (e == cudaSuccess)
      e = cuda::launch_maybe_dependent(dependent, sage_means_kernel<kD>, dim3(bhkv, kD / 32), dim3(32 * kMeanLanes),
                                       0, stream, p, v_fp8);
    const int pairs = p.kv_ready != nullptr ? p.kv_from : bhkv;  // the rest in the attention kernel
    const int k_blocks = qk8 ? p.k_groups * pairs : 0, v_blocks = v_fp8 ? p.kv_padded / kKvBlock * pairs : 0;
    const int kv_grid = keys_first ? p.kv_padded / kKvBlock * pairs * ((qk8 ? 2 : 0) + (v_fp8 ? 1 : 0)) : k_blocks + v_blocks;
    if (e == cudaSuccess && kv_grid > 0)
      e = cuda::launch_maybe_dependent(dependent, sage_quant_kv_kernel<kBf16, kD>, dim3(kv_grid), dim3(256), 0, stream,
                                       p, k_blocks, keys_first, v_fp8);
  }
  if (e == cudaSuccess && qk8 && p.lse != nullptr)
    sage_q_shift_kernel<kBf16, kD>
        <<<dim3(static_cast<unsigned>(flash::ceil_div(p.seqlen_q, 8)), bhq), 256, 0, stream>>>(p);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // leave no launch error for the caller's next check
    return CudaError(std::string(qk8 ? kSageName : kQk16V8Name) + ": quantization launch failed: " + cudaGetErrorString(e));
  }
  return Status::Ok();
}

SageParams make_params(const AttentionProblem& pr) {
  SageParams p;
  p.q = pr.q.data;
  p.k = pr.k.data;
  p.v = pr.v.data;
  p.q_stride_b = pr.q.stride(0), p.q_stride_s = pr.q.stride(1), p.q_stride_h = pr.q.stride(2);
  p.k_stride_b = pr.k.stride(0), p.k_stride_s = pr.k.stride(1), p.k_stride_h = pr.k.stride(2);
  p.v_stride_b = pr.v.stride(0), p.v_stride_s = pr.v.stride(1), p.v_stride_h = pr.v.stride(2);
  p.out = pr.out.data;
  p.out_stride_b = pr.out.stride(0), p.out_stride_s = pr.out.stride(1), p.out_stride_h = pr.out.stride(2);
  if (pr.lse) {
    p.lse = static_cast<float*>(pr.lse->data);
    p.lse_stride_b = pr.lse->stride(0), p.lse_stride_h = pr.lse->stride(1), p.lse_stride_s = pr.lse->stride(2);
  }
  if (pr.mask) {
    p.kv_mask = static_cast<const std::uint8_t*>(pr.mask->data);
    p.mask_stride_b = pr.mask->stride(0), p.mask_stride_s = pr.mask->stride(1);
  }
  const auto vec = [](const TensorView& t) {
    return reinterpret_cast<std::uintptr_t>(t.data) % 8 == 0 && t.stride(0) % 4 == 0 && t.stride(1) % 4 == 0 &&
           t.stride(2) % 4 == 0;
  };
  p.vec_q = vec(pr.q), p.vec_k = vec(pr.k), p.vec_v = vec(pr.v);
  p.batch = static_cast<int>(pr.q.size(0));
  p.seqlen_q = static_cast<int>(pr.q.size(1));
  p.seqlen_k = static_cast<int>(pr.k.size(1));
  p.heads_q = static_cast<int>(pr.q.size(2));
  p.heads_kv = static_cast<int>(pr.k.size(2));
  p.head_size = static_cast<int>(pr.q.size(3));
  p.scale_log2 = pr.softmax_scale() * 1.4426950408889634f;
  p.causal = pr.causal;
  p.bf16 = pr.q.dtype == DType::kBFloat16;
  p.q_groups = static_cast<int>(flash::ceil_div(p.seqlen_q, kQGroup));
  p.k_groups = static_cast<int>(flash::ceil_div(p.seqlen_k, kKGroup));
  p.kv_padded = static_cast<int>(flash::ceil_div(p.seqlen_k, kKvBlock) * kKvBlock);
  p.stat_chunks = static_cast<int>(flash::ceil_div(p.seqlen_k, kStatChunk));
  return p;
}

// Every float bit pattern from 0 to +inf, and one NaN: q_code_ratio, q_scale_of and reciprocal_rn
// against IEEE division, counting the inputs whose bits differ.
__global__ void division_check_kernel(unsigned long long* mismatches) {
  const unsigned stride = gridDim.x * blockDim.x;
  unsigned long long bad[3] = {0, 0, 0};
  for (unsigned bits = blockIdx.x * blockDim.x + threadIdx.x; bits <= 0x7f800001u; bits += stride) {
    const float x = __uint_as_float(bits);
    const float ratio = x > 0.f ? __fdiv_rn(kInt8Max, x) : 0.f, scale = __fdiv_rn(x, kInt8Max);
    const auto same = [](float a, float b) { return __float_as_uint(a) == __float_as_uint(b) || (a != a && b != b); };
    if (!same(q_code_ratio(x), ratio)) ++bad[0];
    if (!same(q_scale_of(x), scale)) ++bad[1];
    if (x > 0.f && x < 8.5070592e37f && !same(reciprocal_rn(x), __fdiv_rn(1.f, x))) ++bad[2];  // (0, 2^126)
  }
  for (int i = 0; i < 3; ++i)
    if (bad[i] != 0) atomicAdd(mismatches + i, bad[i]);
}

}  // namespace

Status count_division_mismatches(std::uint64_t (&mismatches)[3]) {
  unsigned long long* d = nullptr;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaMalloc(&d, 3 * sizeof(unsigned long long)));
  unsigned long long h[3] = {0, 0, 0};
  cudaError_t e = cudaMemset(d, 0, sizeof h);
  if (e == cudaSuccess) {
    division_check_kernel<<<1024, 256>>>(d);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  if (e != cudaSuccess) return CudaError(std::string("division check: ") + cudaGetErrorString(e));
  for (int i = 0; i < 3; ++i) mismatches[i] = h[i];
  return Status::Ok();
}

bool sage_reads_kv_once(const AttentionProblem& problem, int major, int minor, QkMode qk) {
  const char* knob = std::getenv("DIFFATTN_SAGE_KV_SLICES");
  // Unset: QK16/V8 only (V alone; H100, bench/results/kv-once-2026-12-06-h100/: FLUX.1's whole call
  // 0.376-0.379 -> 0.369-0.372 ms, SD3's 0.279-0.284 -> 0.272 ms). With INT8 K the K slices were
  // slower than the three launches there (FLUX.1's passes 91-95 -> 100-102 us, SD3's 53-54 -> 68-70).
  // Past kSliceMaxKeys keys, the three launches: V's keys split over a cluster ran level with them on
  // Wan2.1 480p, Wan2.2-5B, HunyuanVideo-1.5 and the 16k square (bench/results/goals-2026-12-07-h100/)
  // and were removed.
  const bool wanted = knob == nullptr ? qk == QkMode::k16 : std::string(knob) != "0";
  return wanted && major == 9 && minor == 0 &&
         flash::ceil_div(problem.k.size(1), kKvBlock) * kKvBlock <= kSliceMaxKeys &&
         copies_in_16_byte_pieces(problem.k) && copies_in_16_byte_pieces(problem.v);
}

std::int64_t sage_kv_in_kernel_pairs(const AttentionProblem& problem, int consumer_groups, int sm_count) {
  const std::int64_t m_blocks = flash::ceil_div(problem.q.size(1), 64 * consumer_groups);
  const std::int64_t tiles = m_blocks * problem.q.size(0) * problem.q.size(2);
  const std::int64_t pairs = problem.q.size(0) * problem.k.size(2);
  return pairs - sage_kv_from(tiles, m_blocks, flash::persistent_grid(tiles, sm_count), static_cast<int>(problem.q.size(2)),
                              static_cast<int>(problem.k.size(2)), pairs);
}

bool sage_cuda_kernel_for(int major, int minor) { return major == 8 || (major == 9 && minor == 0); }

bool qk16_v8_cuda_kernel_for(int major, int minor) { return major == 9 ? minor == 0 : major == 8 && minor >= 9; }

namespace {

// The compute capability of q's device as one number (sm_89: 89).
Result<int> device_sm(const AttentionProblem& problem) {
  int major = 0, minor = 0;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, problem.q.device.index));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, problem.q.device.index));
  return major * 10 + minor;
}


// The checks, launch workspace and quantization kernels of every SAGE_ATTN CUDA kernel, then
// `launch` with tiles of `tile_rows` query rows. `hopper` adds the sm_90 check.
// `fuse_q`: whether the kernel quantizes Q itself (SageKernelChoice::fuse_q, sage_fuse_q's request;
// the launch of three-group Hopper tiles only), where q's alignment allows its 16-byte copies.
// `key_walk`: SageKernelChoice::key_walk (Hopper launches only).
Status quantize_and_launch(const AttentionProblem& problem, PvMode pv, QkMode qk, void* stream_ptr, int tile_rows,
                           bool hopper, const SageKernelLaunch& launch, int fuse_q = 0, bool key_walk = true,
                           bool kv_in_kernel_ok = true) {
  const bool qk8 = qk == QkMode::kInt8;
  const std::string who = qk8 ? kSageName : kQk16V8Name;
  DIFFATTN_RETURN_IF_ERROR(check_problem(problem, who));
  cuda::ScopedDevice device;
  DIFFATTN_RETURN_IF_ERROR(device.enter(problem.q.device.index));
  int major = 0, minor = 0, sms = 0;
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, problem.q.device.index));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, problem.q.device.index));
  DIFFATTN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, problem.q.device.index));
  if (hopper && !(major == 9 && minor == 0))
    return Unsupported(who + "'s CUDA kernel is built for sm_90 (Hopper), but this device is sm_" +
                       std::to_string(major * 10 + minor) +
                       (qk8 ? "; select FLASH_ATTN" : "; leave quant.dtype_vo unset for 16-bit V here"));
  if (!hopper && major < 8)
    return Unsupported("SAGE_ATTN's Ampere kernel needs sm_80 or newer, but this device is sm_" +
                       std::to_string(major * 10 + minor) + "; select TORCH_SDPA");
  SageParams p = make_params(problem);
  p.num_m_blocks = static_cast<int>(flash::ceil_div(p.seqlen_q, tile_rows));
  const std::int64_t tiles = std::int64_t{p.num_m_blocks} * p.batch * p.heads_q;
  if (tiles >= (std::int64_t{1} << 31)) return InvalidInput(who + ": more than 2^31 query tiles; split the batch");
  p.num_tiles = static_cast<int>(tiles);
  const TensorView& q = problem.q;
  const bool splits_tail =
      !p.causal && sage_tail_split(tiles, sms, flash::ceil_div(p.seqlen_k, kKvBlock)).pieces > 1;  // as launched
  p.fused_q = hopper && qk8 && tile_rows == 3 * 64 &&
              sage_fuse_q(3, pv == PvMode::kFp8, p.head_size, p.seqlen_k, splits_tail, fuse_q) &&
              copies_in_16_byte_pieces(q);
  if (p.num_tiles == 0) return Status::Ok();
  if (p.seqlen_k == 0) {
    // No keys: every row is fully masked (zeros, LSE -inf), as the other backends give.
    return Unsupported(who + " needs at least one key; select FLASH_ATTN for empty key sequences");
  }
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const bool fp8 = pv == PvMode::kFp8;
  Workspace ws{stream};
  const bool walk = walks_keys(p, hopper, key_walk);
  const bool slices = sage_reads_kv_once(problem, major, minor, qk);
  // K and V in the attention kernel (SageParams::kv_ready) where the rule takes it and the kernel has it.
  const std::int64_t pairs = std::int64_t{p.batch} * p.heads_kv;
  const std::int64_t kv_from = sage_kv_from(p.num_tiles, p.num_m_blocks, flash::persistent_grid(p.num_tiles, sms),
                                            p.heads_q, p.heads_kv, pairs);
  const bool kv_in_kernel = kv_in_kernel_ok && hopper && !slices && sage_kv_in_kernel_fits(tile_rows / 64, fp8, qk8, walk) &&
                            sage_kv_in_kernel(p.fused_q, p.seqlen_k, sage_kv_in_kernel_request()) && kv_from < pairs;
  if (kv_in_kernel) {
    p.kv_from = static_cast<int>(kv_from);
    p.kv_k_items = p.k_groups;
    p.kv_head_items = p.k_groups + p.kv_padded / kKvBlock;
  }
  DIFFATTN_RETURN_IF_ERROR(take_workspace(p, fp8, qk8, walk, kv_in_kernel, stream, ws));
  const int d = p.head_size;
  const bool dependent = major >= 9;
  const Status quantized = p.bf16 ? (d == 64 ? quantize<true, 64>(p, fp8, qk8, dependent, slices, stream)
                                             : quantize<true, 128>(p, fp8, qk8, dependent, slices, stream))
                                  : (d == 64 ? quantize<false, 64>(p, fp8, qk8, dependent, slices, stream)
                                             : quantize<false, 128>(p, fp8, qk8, dependent, slices, stream));
  DIFFATTN_RETURN_IF_ERROR(quantized);
  return launch(p, sms, stream);
}

// The Hopper kernel's consumer groups a caller asked for: two or three, or four where
// sage_four_groups_fit says the four-group kernel exists. Checked before anything is written.
Status check_consumer_groups(const std::string& who, int groups, const AttentionProblem& problem, bool pv_fp8) {
  if (groups == 2 || groups == 3) return Status::Ok();
  if (groups == 4 && sage_four_groups_fit(static_cast<int>(problem.q.size(3)), pv_fp8)) return Status::Ok();
  return InvalidInput(who + "'s Hopper kernel runs 2 or 3 consumer warpgroups (4 at head size 64 with FP8 P*V), not " +
                      std::to_string(groups));
}

}  // namespace

Status run_sage_attn_cuda_with(const AttentionProblem& problem, PvMode pv, void* stream, int consumer_groups,
                               const SageKernelLaunch& launch, QkMode qk, int fuse_q, bool key_walk) {
  DIFFATTN_RETURN_IF_ERROR(check_consumer_groups(qk == QkMode::k16 ? kQk16V8Name : kSageName, consumer_groups,
                                                 problem, qk == QkMode::k16 || pv == PvMode::kFp8));
  return quantize_and_launch(problem, qk == QkMode::k16 ? PvMode::kFp8 : pv, qk, stream, 64 * consumer_groups,
                             /*hopper=*/true, launch, fuse_q, key_walk);
}

Status run_sage_attn_ampere_cuda(const AttentionProblem& problem, void* stream, PvMode pv) {
  if (pv == PvMode::kFp8) {
    DIFFATTN_ASSIGN_OR_RETURN(const int sm, device_sm(problem));
    if (sm < 89)
      return Unsupported("SAGE_ATTN's FP8 P*V needs FP8 tensor cores (sm_89 or newer), but this device is sm_" +
                         std::to_string(sm) +
                         "; set extra {\"pv\": \"fp16\"} or leave pv unset (the 16-bit P*V is then the default here)");
    // V goes through the quantization kernels (any alignment); the kernel reads their E4M3 copy.
    return quantize_and_launch(problem, PvMode::kFp8, QkMode::kInt8, stream, kSageAmpereTileRows, /*hopper=*/false,
                               [](const SageParams& p, int, void* s) {
                                 return launch_sage_ada_fp8(p, static_cast<cudaStream_t>(s));
                               });
  }
  if (!copies_in_16_byte_pieces(problem.v))
    return InvalidInput("SAGE_ATTN's Ampere kernel copies V in 16-byte pieces: v must be 16-byte aligned with strides "
                        "that are multiples of 8 elements; pass a contiguous v");
  return quantize_and_launch(problem, PvMode::kFp16, QkMode::kInt8, stream, kSageAmpereTileRows, /*hopper=*/false,
                             [](const SageParams& p, int, void* s) {
                               return launch_sage_ampere(p, static_cast<cudaStream_t>(s));
                             });
}

Status run_sage_attn_cuda(const AttentionProblem& problem, PvMode pv, void* stream, const SageKernelChoice& choice) {
  DIFFATTN_ASSIGN_OR_RETURN(const int sm, device_sm(problem));
  if (sm / 10 == 8) return run_sage_attn_ampere_cuda(problem, stream, pv);  // FP8 P*V from sm_89 on
  const bool fp8 = pv == PvMode::kFp8;
  const int groups = choice.consumer_groups != 0
                         ? choice.consumer_groups
                         : sage_consumer_groups(static_cast<int>(problem.q.size(3)), problem.q.size(1), false, fp8);
  return run_sage_attn_cuda_with(
      problem, pv, stream, groups,
      [&](const SageParams& p, int sms, void* s) {
        const auto st = static_cast<cudaStream_t>(s);
        if (groups == 4) return launch_sage_hopper_fp8_g4(p, sms, st);
        if (groups == 3) return fp8 ? launch_sage_hopper_fp8_g3(p, sms, st) : launch_sage_hopper_fp16_g3(p, sms, st);
        return fp8 ? launch_sage_hopper_fp8_g2(p, sms, st) : launch_sage_hopper_fp16_g2(p, sms, st);
      },
      QkMode::kInt8, choice.fuse_q, choice.key_walk);
}

Status run_sage_block_sparse_cuda(const AttentionProblem& problem, const flash::DeviceBlockSparseLists& lists,
                                  PvMode pv, void* stream) {
  static_assert(2 * 64 == kKvBlock, "the two-group kernel's query tile is one key block");
  const std::string who = std::string(kSageName) + "'s block-sparse kernel";
  if (lists.q_tile != kKvBlock || lists.k_tile != kKvBlock)
    return InvalidInput(who + " takes lists of " + std::to_string(kKvBlock) + " x " + std::to_string(kKvBlock) +
                        " tiles (query rows x keys), got " + std::to_string(lists.q_tile) + " x " +
                        std::to_string(lists.k_tile));
  if (lists.offsets == nullptr || lists.indices == nullptr)
    return InvalidInput(who + ": the key lists' offsets and indices must be device pointers");
  if (problem.causal || problem.mask || problem.is_varlen())
    return Unsupported(who + " takes no causal, key-masked or packed problem; express such keys in the block lists");
  if (lists.tile_rows != nullptr && problem.q.size(1) != problem.k.size(1))
    return Unsupported(who + " honours tile_rows on self-attention (Sq = Skv) only");
  return quantize_and_launch(problem, pv, QkMode::kInt8, stream, kKvBlock, /*hopper=*/true,
                             [&](const SageParams& p, int sms, void* s) {
                               SageParams listed = p;
                               listed.bs_offsets = lists.offsets;
                               listed.bs_indices = lists.indices;
                               listed.bs_tile_rows = lists.tile_rows;
                               return launch_sage_hopper_listed(listed, pv == PvMode::kFp8, sms,
                                                                static_cast<cudaStream_t>(s));
                             },
                             0, true, /*kv_in_kernel_ok=*/false);  // the listed kernel reads the K/V pass's copies
}

Status run_qk16_v8_cuda(const AttentionProblem& problem, void* stream, const SageKernelChoice& choice) {
  DIFFATTN_ASSIGN_OR_RETURN(const int sm, device_sm(problem));
  if (sm != 90 || choice.mma_sync) {
    if (sm < 89)
      return Unsupported(std::string(kQk16V8Name) + " runs P*V on FP8 tensor cores (sm_89 or newer), but this device is "
                         "sm_" + std::to_string(sm) + "; leave quant.dtype_vo unset for 16-bit V, or run on CPU tensors");
    if (!copies_in_16_byte_pieces(problem.q) || !copies_in_16_byte_pieces(problem.k))
      return InvalidInput(std::string(kQk16V8Name) + "'s Ada kernel copies q and k in 16-byte pieces: they must be "
                          "16-byte aligned with strides that are multiples of 8 elements; pass contiguous q and k");
    return quantize_and_launch(problem, PvMode::kFp8, QkMode::k16, stream, kSageAmpereTileRows, /*hopper=*/false,
                               [](const SageParams& p, int, void* s) {
                                 return launch_qk16_v8_ada(p, static_cast<cudaStream_t>(s));
                               });
  }
  for (const TensorView* t : {&problem.q, &problem.k})
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      return InvalidInput(std::string(kQk16V8Name) + " loads q and k with the tensor memory accelerator: their data must "
                          "be 16-byte aligned; pass contiguous q and k");
  const int groups = choice.consumer_groups != 0
                         ? choice.consumer_groups
                         : sage_consumer_groups(static_cast<int>(problem.q.size(3)), problem.q.size(1), /*qk16=*/true);
  DIFFATTN_RETURN_IF_ERROR(check_consumer_groups(kQk16V8Name, groups, problem, /*pv_fp8=*/true));
  return quantize_and_launch(
      problem, PvMode::kFp8, QkMode::k16, stream, 64 * groups, /*hopper=*/true,
      [&](const SageParams& p, int sms, void* s) {
        const auto st = static_cast<cudaStream_t>(s);
        if (groups == 4) return launch_qk16_v8_hopper_g4(p, sms, st);
        return groups == 3 ? launch_qk16_v8_hopper_g3(p, sms, st) : launch_qk16_v8_hopper_g2(p, sms, st);
      },
      0, choice.key_walk);
}

}  // namespace diffattn::sage
