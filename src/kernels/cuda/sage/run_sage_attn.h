#pragma once
// SAGE_ATTN on CUDA views: fused quantization of Q, K (smoothed) and V, then the 8-bit attention
// kernel, on the caller's stream. The arithmetic is kernels/sage/sage_quant.h's.

#include <cstdint>
#include <functional>

#include "diffattn/problem.h"
#include "diffattn/status.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/sage/sage_quant.h"

namespace diffattn::sage {

// `problem` has passed the layer's checks. Checks what the kernels need (head size, dtype, mask
// kind, architecture) before anything is written; in a build without CUDA returns kUnavailable.
// sm_90 runs the Hopper kernel in either P*V mode; sm_80-sm_89 run the Ampere/Ada kernel, in either
// mode on sm_89 and in the 16-bit mode below it (kFp8 is refused there with what to set instead).
// `choice` overrides the kernel's shape where it is set (benchmarks and tests that compare shapes);
// the default takes sage_config.h's rule.
struct SageKernelChoice {
  int consumer_groups = 0;  // 0: sage_consumer_groups; else 2 or 3
  int fuse_q = -1;          // -1: sage_fuse_q's rule; 0: the Q pass; 1: the kernel quantizes Q where it can
  // QK16/V8 only: the Ampere/Ada-class (mma.sync) kernel even on sm_90, as quant.flashinfer_backend
  // 'fa2' asks; it needs FP8 tensor cores (sm_89 or newer).
  bool mma_sync = false;
  // Hopper, non-causal key masks: walk only the key blocks that keep a key, reading the mask's
  // bytes only in blocks that also drop one (SageParams::kv_walk); false reads the bytes in every
  // block. Both give the same bits (tests, and the masked-call benchmark's A/B row).
  bool key_walk = true;
};
Status run_sage_attn_cuda(const AttentionProblem& problem, PvMode pv, void* stream, const SageKernelChoice& choice = {});

// For the tests: of a Hopper call with `consumer_groups` groups on `sm_count` SMs whose K and V go
// to the attention kernel (sage_config.h's sage_kv_in_kernel, or DIFFATTN_SAGE_KV_IN_KERNEL=1;
// FP8 P*V, INT8 Q K^T, no key walk), how many (batch, kv head) pairs the kernel quantizes: the
// others are the K/V pass's (sage_kv_from).
std::int64_t sage_kv_in_kernel_pairs(const AttentionProblem& problem, int consumer_groups, int sm_count);

// For probes that time attention-kernel instantiations of their own (dev/sage_time.cc): the
// backend's checks, launch workspace and quantization kernels, then `launch` (on `stream`) in place
// of the built-in attention kernels, with tiles of 64 * consumer_groups query rows. `fuse_q`, as
// SageKernelChoice::fuse_q: whether Q is left to the three-group FP8 kernel (SageParams::fused_q)
// instead of the Q pass; a `launch` of other kernels takes 0.
struct SageParams;
using SageKernelLaunch = std::function<Status(const SageParams& params, int sm_count, void* stream)>;
Status run_sage_attn_cuda_with(const AttentionProblem& problem, PvMode pv, void* stream, int consumer_groups,
                               const SageKernelLaunch& launch, QkMode qk = QkMode::kInt8, int fuse_q = 0,
                               bool key_walk = true);

// SAGE_ATTN's Ampere/Ada kernel (mma.sync; INT8 Q K^T). PvMode::kFp16, P V in the input dtype (the
// accurate mode's arithmetic), is built as compute_80 PTX so that any GPU from sm_80 runs it;
// PvMode::kFp8, E4M3 P and V on the FP8 tensor cores, as compute_89 and runs from sm_89 on (refused
// below). Calling it directly lets it be checked on a newer GPU. run_sage_attn_cuda selects it on
// sm_80-sm_89.
Status run_sage_attn_ampere_cuda(const AttentionProblem& problem, void* stream, PvMode pv = PvMode::kFp16);

// For the tests: how many float inputs (every bit pattern from 0 to +inf, and a NaN) give bits other
// than IEEE division's to the quantization's call-free divisions (sage_quant.cuh): 127 / amax, amax /
// 127, and 1 / x on (0, 2^126), in that order. Runs on the current device.
Status count_division_mismatches(std::uint64_t (&mismatches)[3]);

// Whether SAGE_ATTN or the QK16/V8 mode (`qk`) quantizes this problem's K and V in one read of each
// (sage_quant_slices.cuh: one launch, a thread-block cluster per kv head, every key of a 16-channel
// slice in a CTA's shared memory) instead of the statistics pass, the means and the K/V pass: on
// sm_90 (major.minor 9.0), up to 6144 keys after padding to 128 (kSliceMaxKeys), K and V 16-byte
// aligned with strides of whole 8 elements; by default for QK16/V8 (V alone), where it measured
// faster, not for SAGE_ATTN's INT8 K, where it measured slower. The environment's
// DIFFATTN_SAGE_KV_SLICES=1 takes it for both, 0 for neither (read at every call; A/B runs and
// tests). Both ways give the same bits.
bool sage_reads_kv_once(const AttentionProblem& problem, int major, int minor, QkMode qk);

// True when this build holds a SAGE_ATTN kernel for compute capability major.minor.
bool sage_cuda_kernel_for(int major, int minor);

// SAGE_ATTN's arithmetic over block-sparse key lists on CUDA views (sm_90): RAINFUSION_ATTN's
// 8-bit fine pass. Q, K and V are quantized over the whole sequences as run_sage_attn_cuda does
// (K's mean and V's channel scales over every key, listed or not); the two-group Hopper kernel
// then walks the lists (on the device) of kKvBlock x kKvBlock tiles, in list order, masking keys
// past a padded tile's valid rows (tile_rows: self-attention only). Rows with an empty list give
// zeros and LSE -inf. Not causal, masked or packed. Everything is checked before anything is
// written; the oracle is run_sage_block_sparse_cpu (kernels/cpu/sage_cpu.h).
Status run_sage_block_sparse_cuda(const AttentionProblem& problem, const flash::DeviceBlockSparseLists& lists,
                                  PvMode pv, void* stream);

// FLASHINFER_ATTN's QK16/V8 mode on CUDA views: on sm_90 the Hopper kernel above with Q K^T as a
// 16-bit wgmma on the caller's Q and K (fp32 scores, no quantization of either), on sm_89 (and on
// sm_90 with SageKernelChoice::mma_sync) the Ada kernel with Q K^T as 16-bit mma.sync; V in FP8
// E4M3 with one scale per (batch, kv head, channel) over the valid keys, P V on the FP8 tensor
// cores with the two-level accumulation. Takes what SAGE_ATTN's kernel takes: bf16/fp16, head sizes
// 64 and 128, key-padding masks, causal, GQA, Sq != Skv, LSE; refuses the rest (and GPUs without
// FP8 tensor cores) before writing. The arithmetic is run_sage_attn_cpu's QkMode::k16, its oracle.
Status run_qk16_v8_cuda(const AttentionProblem& problem, void* stream, const SageKernelChoice& choice = {});
bool qk16_v8_cuda_kernel_for(int major, int minor);

}  // namespace diffattn::sage
