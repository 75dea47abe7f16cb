#pragma once
// The compact key order a key-padding mask gives the Hopper kernel's non-causal launches, per
// batch: its `count` kept keys as blocks of block_n keys, so that the kernel runs them as an
// unmasked call of `count` keys (only the last block can be partial, and it is cut by `count`).
// Each maximal run of kept keys gives its whole blocks from its first key on, read in place (a
// block row >= 0: the block's first key in the batch); what is left of each run (fewer than block_n
// keys) is gathered, runs in key order, into a zero-padded copy whose blocks come after them (a
// block row < 0: row -1 - row of the copy). FLUX.1's padded prompt (77 of 512 text keys, then 4096
// image keys) is 32 image blocks in place and one gathered block of the 77 prompt keys; a kept
// prefix (SD3 in diffusers' order) gathers only its last, partial block.
// The CPU oracle of the device builder (kernels/cuda/flash/flash_hopper_launch.cuh).

#include <cstdint>
#include <vector>

namespace diffattn {

struct CompactKeys {
  std::vector<std::int32_t> block_rows;  // ceil(count / block_n) blocks: in place (>= 0) then gathered
  std::vector<std::int32_t> gathered;    // row r of the copy holds key gathered[r] of the batch
  std::int32_t count = 0;                // kept keys
  bool operator==(const CompactKeys&) const = default;
};

// `keep`: one batch's key mask (Skv entries).
CompactKeys compact_keys(const std::vector<bool>& keep, int block_n);

// The compact block row of a gathered block that starts at row r of the copy.
constexpr std::int32_t gathered_block_row(std::int32_t r) { return -1 - r; }

}  // namespace diffattn
