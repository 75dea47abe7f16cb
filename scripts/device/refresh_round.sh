#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# and the peers' wheels in .whl carried: one job that refreshes the reference figures of the 8-bit and
# masked backends at one commit.
#  1. scripts/device/prebuilt_round.sh: the GPU tests of TESTS, compute-sanitizer memcheck and
#     racecheck on SANITIZE_TESTS, and the product benchmark of BACKENDS with every peer on
#     BENCH_WORKLOADS;
#  2. bench/gpu_mask_bench.cu (padded prompts, dense and block masks, a ragged batch) and the PyTorch
#     SDPA peer with the same masks (MASK=0 skips both);
#  3. dev/sage_time on SAGE_FILTER in SAGE_MODES (SAGE_FILTER=none skips it).
# $OUT gets the benchmark table (gpu-*.md) and logs.tar.gz with everything else, since a device call
# returns only a few files; the tarball is rewritten after each step, so a job cut short keeps what ran.
#   COMMIT=sha [BENCH_WORKLOADS=a,b] [BACKENDS=A,B] [SAGE_FILTER=a,b] [SAGE_MODES=m,n] scripts/device/refresh_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out/r"; out="$(cd "$out" && pwd)"
pack() { tar -czf "$out/logs.tar.gz" -C "$out" r; }
source scripts/device/env.sh
OUT="$out/r" TESTS="${TESTS:-GpuSageAttn*:GpuQk16V8*:SageConfig*}" SANITIZE="${SANITIZE:-1}" \
  SANITIZE_TESTS="${SANITIZE_TESTS:-GpuSageAttn.ReadingKAndVOnce*}" SAGE_FILTER=none BENCH=1 \
  BACKENDS="${BACKENDS:-FLASH_ATTN,SAGE_ATTN,FLASHINFER_ATTN}" COMMIT="${COMMIT:-unknown}" \
  scripts/device/prebuilt_round.sh
cp "$out"/r/gpu-*.md "$out/" 2>/dev/null
pack
bd=build/pre  # unpacked by prebuilt_round.sh
if [ "${MASK:-1}" = 1 ]; then
  echo "== gpu_mask_bench"
  timeout -s KILL 150 $bd/bin/gpu_mask_bench --rounds "${ROUNDS:-10}" 2>&1 | tee "$out/r/mask-bench.txt"
  pack
  echo "== PyTorch SDPA with the same masks"
  timeout 120 python3 bench/mask_peer.py --rounds "${ROUNDS:-10}" 2>&1 | tee "$out/r/mask-peer.txt"
  pack
fi
if [ "${SAGE_FILTER:-none}" != none ]; then
  echo "== sage_time"
  timeout -s KILL 150 $bd/sage_time "$SAGE_FILTER" "${SAGE_ROUNDS:-3}" "${SAGE_MODES:-fp8/3,fp8/3f,fp8/3q,qk16/3}" 2>&1 |
    tee "$out/r/sage-time.txt"
  pack
fi
exit 0
