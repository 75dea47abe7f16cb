#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz holding the test binary,
# bin/gpu_mask_bench and dev/sage_time (and optionally sage_time_minb4, a build whose statistics
# pass is held to 64 registers): dependent launches (kernels/cuda/dependent_launch.cuh) against
# plain launches in one job, by DIFFATTN_DEPENDENT_LAUNCH=0/1 on the same binaries, alternating,
# ROUNDS times: dev/sage_time on SAGE_FILTER's workloads in MODES (the quantization passes alone,
# modes quant/*, and whole calls), then bin/gpu_mask_bench's masked calls (FLASHINFER_ATTN). First
# the GPU tests of TESTS (with the switch on, then the back-to-back test with it off).
#   [TESTS=...] [ROUNDS=2] [SAGE_FILTER=flux,sd3] [MODES=quant/q,fp8/3] scripts/device/dependent_launch_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
run_gpu_tests "$bd" "$out"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for pdl in 0 1; do
    for b in sage_time sage_time_minb4; do
      [ -x "$bd/$b" ] || continue
      [ "$b" = sage_time_minb4 ] && [ "$pdl" = 0 ] && continue
      echo "== $b, dependent launch $pdl, round $r" | tee -a "$out/sage.txt"
      DIFFATTN_DEPENDENT_LAUNCH=$pdl timeout -s KILL 200 $bd/$b "${SAGE_FILTER:-flux,sd3}" "${SAGE_ROUNDS:-10}" \
        "${MODES:-quant/q,quant/f,quant/16,fp8/3}" 2>&1 | tee -a "$out/sage.txt"
    done
  done
done
if [ "${MASK:-1}" = 1 ]; then
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for pdl in 0 1; do
      echo "== gpu_mask_bench, dependent launch $pdl, round $r" | tee -a "$out/mask.txt"
      DIFFATTN_DEPENDENT_LAUNCH=$pdl timeout -s KILL 200 $bd/bin/gpu_mask_bench --backends FLASHINFER_ATTN \
        --rounds 10 ${MASK_WORKLOADS:+--workloads "$MASK_WORKLOADS"} 2>&1 | tee -a "$out/mask.txt" | grep -v "^ *$"
    done
  done
fi
exit 0
