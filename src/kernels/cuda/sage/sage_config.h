#pragma once
// How SAGE_ATTN's Hopper kernel is shaped for a call: plain functions, tested on the CPU
// (tests/gpu/sage_config_test.cc).

#include <algorithm>
#include <cstdint>

namespace diffattn::sage {

// Consumer warpgroups of 64 query rows per CTA: three that run each key block's products and
// softmax in order (the other two keeping the tensor cores busy), or two that overlap their own
// softmax with their next products. The two-group kernel issues on only about half of its cycles,
// waiting on its own products. Measured on an H200 (dev/sage_time.cc, both shapes in one run,
// docs/backends/sage_attn.md): at hd128 three groups win on every workload, in both P V modes
// (long video rows +17-20 %, 512-key cross-attention +14-24 %, Flux +8-10 %, the 4k square
// +3-4 %). At hd64, measured again after the three-group kernel's later gains (the split tail, the
// row sums by the product; dev/sage_groups_hd64.csv, bench/results/sage-rowsum-2026-12-03-h200/
// groups-hd64.txt), three groups are 13-14 % faster at 3072 and 4096 rows in both P V modes, level
// to 4 % faster at 2048, and two groups 10-15 % faster at 1024; so the 16-bit P V mode runs two
// groups at hd64 up to kSageHd64TwoGroupMaxRows query rows, between the last two (FP8 P V: below).
// Where P V is FP8 (`pv_fp8`: SAGE_ATTN's default mode; FLASHINFER_ATTN's QK16/V8 mode, `qk16`, the
// same kernel with a 16-bit Q K^T, always) hd64 calls run four in-order groups (256-row tiles;
// sage_four_groups_fit) from kSageHd64FourGroupMinRows query rows on, two below. Against two and
// three groups in one job on an H200 (2026-12-04, dev/sage_groups_hd64.csv and the hd64 workloads;
// bench/results/sage-hd64-2026-12-04-h200/) four were the fastest at every size timed, 1024 to 16384
// rows, in both modes: 1024 rows 0.053 ms against 0.061 (two) and 0.066 (three) in the FP8 mode,
// 4096 rows 0.312 against 0.343 (three), SD3 7 % and the 16k hd64 square 4 % faster than three.
// The 16-bit P V mode keeps two and three groups (its four-group tile state spilled 300 bytes).
inline constexpr std::int64_t kSageHd64TwoGroupMaxRows = 1536;
inline constexpr std::int64_t kSageHd64FourGroupMinRows = 1024;

// Whether the four-group kernel exists for a call: hd64 with FP8 P V (its 112 registers per
// consumer thread hold that tile state; sage_fwd_hopper.cuh).
constexpr bool sage_four_groups_fit(int head_size, bool pv_fp8) { return head_size == 64 && pv_fp8; }

constexpr int sage_consumer_groups(int head_size, std::int64_t seqlen_q, bool qk16 = false, bool pv_fp8 = true) {
  if (head_size != 64) return 3;
  if (sage_four_groups_fit(head_size, pv_fp8 || qk16)) return seqlen_q >= kSageHd64FourGroupMinRows ? 4 : 2;
  return seqlen_q <= kSageHd64TwoGroupMaxRows ? 2 : 3;
}

// Whether the attention kernel quantizes Q itself (sage_fwd_hopper.cuh, kFusedQ: the producer
// warpgroup's idle warps, a tile ahead) instead of the Q pass: the three-group FP8 kernel can; the
// others read a Q pass's codes. Either way the codes and scales are the same bits. Measured on an
// H200 against the Q pass (dev/sage_time.cc, dev/sage_fuse_sweep.csv, docs/backends/sage_attn.md):
// 5-8 % faster on hd128 calls from 2048 keys up (6k-32k squares, 16k rows against 2k-8k keys);
// slower where a tile's quantization does not fit under the tile before it (512-key
// cross-attention, +8 %) and where the last wave splits into pieces (FLUX.1, +6 %: every piece
// quantizes its tile's Q again, and the fused split kernel spills); neutral at hd64. So the rule
// takes it on hd128 calls of at least kSageFuseQMinKeys keys whose last wave is not split
// (`splits_tail`, sage_tail_split). `requested`: -1 the rule, 0 the Q pass, 1 the kernel wherever it
// can.
inline constexpr std::int64_t kSageFuseQMinKeys = 2048;

constexpr bool sage_fuse_q(int consumer_groups, bool pv_fp8, int head_size, std::int64_t seqlen_k, bool splits_tail,
                           int requested = -1) {
  if (requested == 0 || consumer_groups != 3 || !pv_fp8) return false;
  return requested == 1 || (head_size == 128 && seqlen_k >= kSageFuseQMinKeys && !splits_tail);
}

constexpr std::int64_t sage_m_blocks(std::int64_t seqlen_q, int consumer_groups) {
  const std::int64_t rows = 64 * consumer_groups;
  return (seqlen_q + rows - 1) / rows;
}

// The last wave of the three-group kernel's persistent loop. When its tiles are fewer than half the
// CTAs (FLUX.1's and SD3's 576 tiles leave 48 for the fifth wave on 132 SMs), each of them runs as
// `pieces` consecutive ranges of its key blocks on as many CTAs, and a merge launch combines their
// partial outputs, so the wave takes a fraction of a tile's time. Work items: the whole tiles
// [0, split_begin), then piece k of tail tile t as item split_begin + t * pieces + k.
inline constexpr int kSageMaxPieces = 8;
inline constexpr std::int64_t kSageMinPieceBlocks = 4;  // fewer key blocks per piece: the merge costs more than it saves

struct SageTailSplit {
  std::int64_t split_begin = 0;  // the first split tile (== tiles: none)
  int pieces = 1;
  std::int64_t items = 0;        // work items of the persistent loop
};

constexpr SageTailSplit sage_tail_split(std::int64_t tiles, int sm_count, std::int64_t n_blocks) {
  const SageTailSplit none{tiles, 1, tiles};
  if (tiles <= 0 || sm_count <= 0) return none;
  const std::int64_t tail = tiles % sm_count;
  if (tail == 0) return none;
  const std::int64_t pieces = std::min<std::int64_t>(
      {sm_count / tail, n_blocks / kSageMinPieceBlocks, std::int64_t{kSageMaxPieces}});
  if (pieces < 2) return none;
  return {tiles - tail, static_cast<int>(pieces), tiles - tail + tail * pieces};
}

// Whether a Hopper kernel has a variant that quantizes K and V itself (SageTraits::kKvInKernel):
// the in-order groups (3, or 4 at hd64) with FP8 P V and INT8 Q K^T, without block-sparse lists or
// a key walk (`walks`). Their producer warps 1-3 take the items: idle ones until none is left, the
// ones that quantize Q (kFusedQ) while the next Q buffer is still in use.
constexpr bool sage_kv_in_kernel_fits(int consumer_groups, bool pv_fp8, bool qk8, bool walks) {
  return consumer_groups >= 3 && pv_fp8 && qk8 && !walks;
}

// Whether a call that can (sage_kv_in_kernel_fits) quantizes K and V inside the attention kernel.
// Measured on an H100 against the K/V pass, one job, two rounds (dev/sage_time,
// bench/results/sage-kv-in-kernel-2026-12-06-h100/): with Q from the Q pass 2-6 % faster from 4096
// keys up (SD3 0.303-0.305 -> 0.294-0.296 ms, the 4k hd64 square 0.327 -> 0.312-0.314, 6k-10k
// squares 3-6 %, Wan2.2-5B 1.92-1.94 -> 1.87-1.88), FLUX.1 level, 512-key cross-attention 3 %
// slower; in the kernel that quantizes Q itself 1.4-2.8 % faster from 10k keys (Wan2.2-5B
// 1.83-1.85 -> 1.80-1.82 ms, HunyuanVideo-1.5 1.80-1.81 -> 1.75-1.76, the 16k square 3.58 ->
// 3.49-3.50) but 5-34 % slower below 8k (its Q warps take items only between tiles' Q, and a
// tile's Q waits for its pair). Timed again on 2026-12-07 (H100, bench/results/
// sage-in-kernel-2026-12-07-h100/): SD3 2-3 %, the 16k square 1-3 % faster than the pass. Tried
// there and removed: QK16/V8's V in its kernel (0-2.8 % slower than its V pass) and the statistics
// in the fused-Q kernel too (5-10 % slower on Wan2.2-5B). `requested`: -1 the rule, 0 never, 1
// wherever it fits.
inline constexpr std::int64_t kSageKvInKernelMinKeys = 4096;
inline constexpr std::int64_t kSageKvInKernelFusedMinKeys = 10240;

constexpr bool sage_kv_in_kernel(bool fused_q, std::int64_t seqlen_k, int requested = -1) {
  if (requested >= 0) return requested == 1;
  return seqlen_k >= (fused_q ? kSageKvInKernelFusedMinKeys : kSageKvInKernelMinKeys);
}

// K and V quantized inside the attention kernel (SageParams::kv_ready): the (batch, kv head) pairs
// that the persistent grid's first one and a half waves of tiles read are left to the K/V pass
// before the kernel (SageParams::kv_from), and the kernel's producer warps 1-3 quantize the others
// while those tiles run. Tiles go (batch, query head, row block), so a pair's tiles are consecutive
// and the pairs are needed in order. `grid`: the persistent grid; `m_blocks`: row blocks per head.
constexpr std::int64_t sage_kv_from(std::int64_t tiles, std::int64_t m_blocks, std::int64_t grid, int heads_q,
                                    int heads_kv, std::int64_t pairs) {
  const std::int64_t ahead = std::min(tiles, grid + grid / 2);
  if (ahead <= 0 || m_blocks <= 0 || heads_kv <= 0) return 0;
  const std::int64_t bhq = (ahead - 1) / m_blocks;
  const std::int64_t pair = (bhq / heads_q) * heads_kv + (bhq % heads_q) / (heads_q / heads_kv);
  return std::min(pairs, pair + 1);
}

// Key blocks [begin, end) of piece k of a tile of n_blocks split `pieces` ways.
constexpr std::int64_t sage_piece_begin(std::int64_t n_blocks, int pieces, int k) { return n_blocks * k / pieces; }

}  // namespace diffattn::sage
