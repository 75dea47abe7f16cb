#pragma once
// The key walk a key-padding mask gives the Hopper attention kernel, per batch: the blocks of at
// most `block_n` keys that it loads, in key order. Two kinds, the one with fewer entries wins
// (ties: runs):
//  - runs: each maximal run of kept keys cut into blocks from its first key on; every key of an
//    entry is kept, so the kernel only limits it to the entry's length (no bits read), except that
//    a run's last, partial entry reads bits where partial_run_reads_bits says its block allows;
//  - aligned: the key blocks [j block_n, (j + 1) block_n) that keep at least one key, with bits
//    read where they also drop one.
// A prompt padded in the middle of a joint sequence (FLUX.1: 77 kept of 512 text keys, then the
// image) is two runs, so its walk loads about the kept keys instead of two part-empty blocks more.
// Causal launches take the aligned kind (their tiles stop at a key block). The CPU oracle of the
// device builder (kernels/cuda/flash/flash_hopper_launch.cuh), whose walks must equal these.

#include <cstdint>
#include <vector>

#include "kernels/sparse/host_device.h"

namespace diffattn {

struct KeyWalkEntry {
  std::int32_t key0 = 0;  // first key
  std::int32_t len = 0;   // keys from key0 the entry may attend (1..block_n)
  bool bits = false;      // the mask's bits decide them (aligned blocks that also drop a key)
  bool operator==(const KeyWalkEntry&) const = default;
};

// Calls f(start, end) for each maximal run [start, end) of kept keys in `keep`, in key order (the
// runs both key-mask oracles walk: this one and compact_keys.h).
template <class F>
void for_each_kept_run(const std::vector<bool>& keep, F&& f) {
  const int skv = static_cast<int>(keep.size());
  for (int j = 0; j < skv;) {
    if (!keep[static_cast<std::size_t>(j)]) {
      ++j;
      continue;
    }
    int end = j;
    while (end < skv && keep[static_cast<std::size_t>(end)]) ++end;
    f(j, end);
    j = end;
  }
}

// `keep`: one batch's key mask (Skv entries). `aligned_only`: the causal case.
std::vector<KeyWalkEntry> key_walk(const std::vector<bool>& keep, int block_n, bool aligned_only);

// Whether a run's entry [key0, key0 + len) that ends inside its block is masked by the mask's bits
// rather than a byte per key: when the block is aligned (the kernel's bits path reads a word per 32
// keys) and holds no key of the next run (first kept key `next`), so that its bits are the run's.
DIFFATTN_HOST_DEVICE constexpr bool partial_run_reads_bits(int key0, int len, int next, int block_n) {
  return len < block_n && key0 % block_n == 0 && next >= key0 + block_n;
}

// The device's encoding of an entry (FlashParams::kv_walk): {key0, len | bits << 16}.
inline std::int32_t key_walk_code(const KeyWalkEntry& e) { return e.len | (e.bits ? 1 << 16 : 0); }

}  // namespace diffattn
