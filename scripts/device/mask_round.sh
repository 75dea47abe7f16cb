#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# carried: FLASHINFER_ATTN's CUDA path. The dense-mask and parity GPU tests (every backend on every
# parity case, now FLASHINFER_ATTN's masks and ragged batches too), compute-sanitizer memcheck and
# racecheck on the dense-mask tests, bench/gpu_mask_bench.cu, and the PyTorch SDPA peer with the same
# boolean masks (bench/mask_peer.py). Everything goes to $OUT.
#   [TESTS=gtest-filter] [SANITIZE=0] [SANITIZE_TESTS=filter] [SANITIZE_TOOLS="memcheck"] [PEER=0] [ROUNDS=N]
#   [MASK_BACKENDS=A,B] [MASK_WORKLOADS=a,b] [MASK_REPEAT=N] [TEST_TIMEOUT=seconds]
#   scripts/device/mask_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
echo "== GPU tests"
timeout -s KILL "${TEST_TIMEOUT:-300}" $bd/tests/diffattn_tests \
  --gtest_filter="${TESTS:-GpuDenseMask*:GpuParity*:GpuFlashAttn*:GpuBlockSparse*}" >"$out/gpu-tests.log" 2>&1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|PARITY|error" "$out/gpu-tests.log" | head -n 60
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 $bd/tests/diffattn_tests \
      --gtest_filter="${SANITIZE_TESTS:-GpuDenseMask.*}" >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; tail -n 20 "$out/sanitize-$tool.log"; }
  done
fi
echo "== gpu_mask_bench"
for rep in $(seq "${MASK_REPEAT:-1}"); do
  timeout -s KILL 300 $bd/bin/gpu_mask_bench --rounds "${ROUNDS:-10}" ${MASK_BACKENDS:+--backends $MASK_BACKENDS} \
    ${MASK_WORKLOADS:+--workloads $MASK_WORKLOADS} 2>&1 | tee -a "$out/mask-bench.txt"
done
if [ "${PEER:-1}" = 1 ]; then
  echo "== PyTorch SDPA with the same masks"
  timeout 200 python3 bench/mask_peer.py --rounds "${ROUNDS:-10}" 2>&1 | tee "$out/mask-peer.txt"
fi
exit 0
