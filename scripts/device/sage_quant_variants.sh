#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz holding dev/sage_time
# builds named sage_time_<variant> beside sage_time (each the same tree with the quantization
# kernels compiled under other -D settings, e.g. DIFFATTN_SAGE_PREPASS_MIN_BLOCKS): every build in
# turn, ROUNDS times, on SAGE_FILTER's workloads in MODES (default the quantization passes alone),
# into $OUT/variants.txt. Then the GPU tests of TESTS, if set, from the bundle's test binary.
#   [ROUNDS=2] [SAGE_FILTER=flux,sd3] [MODES=quant/q,quant/f,quant/16] scripts/device/sage_quant_variants.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in $(cd "$bd" && ls sage_time sage_time_* 2>/dev/null); do
    echo "== $b, round $r" >>"$out/variants.txt"
    timeout -s KILL 200 $bd/$b "${SAGE_FILTER:-flux,sd3}" "${SAGE_ROUNDS:-20}" "${MODES:-quant/q,quant/f,quant/16}" \
      >>"$out/variants.txt" 2>&1
  done
done
run_gpu_tests "$bd" "$out"
exit 0
