#!/usr/bin/env bash
# On the GPU machine, from the repository root, with a bundle of two dev/sage_time builds
# (sage_time_base, the tree before a kernel change, and sage_time) and the test binary carried in
# .devcarry/bundle.tar.xz: the GPU tests of TESTS, racecheck and memcheck over SANITIZE_TESTS,
# then both builds timed in turn, ROUNDS times, on SAGE_WORKLOADS (a workloads file, default
# dev/sage_sweep.csv) in MODES, so that a change is measured against its base in one job; then
# (MASK_AB=1) bin/gpu_mask_bench_base and bin/gpu_mask_bench likewise (MASK_BACKENDS, default FLASHINFER_ATTN), and (NCU_MASK=1) an ncu
# summary of the kernels of the masked calls of bin/gpu_mask_bench, if carried; (NCU_SAGE=a,b) an ncu
# summary of every kernel of one FP8 call of both dev/sage_time builds on workloads a and b; (SASS=s,t)
# the SASS of both builds' kernels whose mangled names contain s or t, with opcode histograms
# (dev/sass_hist.py).
# Everything goes to $OUT, in few files (the device tool brings back a limited number); the test
# and sanitizer summaries are printed again at the end.
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
if [ -n "${TESTS:-}" ]; then
  echo "== tests: $TESTS"
  timeout -s KILL 200 $bd/tests/diffattn_tests --gtest_filter="$TESTS" >"$out/tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is" "$out/tests.log" | head -n 40
fi
if [ -n "${SANITIZE_TESTS:-}" ]; then
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 $bd/tests/diffattn_tests \
      --gtest_filter="$SANITIZE_TESTS" >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|Hazard" "$out/sanitize-$tool.log" | head; }
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests ran|PASSED|FAILED" "$out/sanitize-$tool.log" | head -n 4
  done
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in sage_time_base sage_time; do
    [ -x "$bd/$b" ] || continue
    echo "== $b, round $r" | tee -a "$out/ab-sage.txt"
    SAGE_WORKLOADS="${SAGE_WORKLOADS:-dev/sage_sweep.csv}" timeout -s KILL 200 $bd/$b "${FILTER:-}" 5 "${MODES:-fp8/3}" \
      2>&1 | tee -a "$out/ab-sage.txt"
  done
done
# MASK_AB=1: bin/gpu_mask_bench_base (the base build) and bin/gpu_mask_bench in turn, ROUNDS times.
if [ "${MASK_AB:-0}" = 1 ]; then
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for b in gpu_mask_bench_base gpu_mask_bench; do
      [ -x "$bd/bin/$b" ] || continue
      echo "== $b, round $r" | tee -a "$out/ab-mask.txt"
      timeout -s KILL 200 $bd/bin/$b --backends "${MASK_BACKENDS:-FLASHINFER_ATTN}" --rounds 10 \
        ${MASK_WORKLOADS:+--workloads "$MASK_WORKLOADS"} 2>&1 | tee -a "$out/ab-mask.txt" | grep -v "^ *$"
    done
  done
fi
if [ "${NCU_MASK:-0}" = 1 ] && [ -x "$bd/bin/gpu_mask_bench" ]; then
  echo "== ncu: the kernels of the masked calls"
  timeout 200 ncu --clock-control none --print-summary per-kernel $bd/bin/gpu_mask_bench \
    --workloads "${MASK_WORKLOADS:-flux-77of512-keypad,sd3-154of333-keypad,wan22-ragged-4}" \
    --backends FLASHINFER_ATTN --rounds 1 --rest-ms 0 >"$out/ncu-mask.txt" 2>&1
  grep -E "flash|pack|walk|kernel|Duration" "$out/ncu-mask.txt" | cut -c1-200 | head -n 80
fi
if [ -n "${NCU_SAGE:-}" ]; then
  for b in sage_time_base sage_time; do
    [ -x "$bd/$b" ] || continue
    echo "== ncu: $b on $NCU_SAGE" | tee -a "$out/ncu-sage.txt"
    SAGE_WORKLOADS="${SAGE_WORKLOADS:-dev/sage_sweep.csv}" timeout 300 ncu --clock-control none --print-summary per-kernel \
      --kernel-name regex:sage --metrics gpu__time_duration.sum $bd/$b "$NCU_SAGE" 1 fp8/3 >>"$out/ncu-sage.txt" 2>&1
  done
  grep -E "^== ncu|^ +void|^ +sage|gpu__time_duration" "$out/ncu-sage.txt" | sed -E 's/\(sage::SageTmaMaps.*//' | cut -c1-150 | head -n 60
fi
if [ -n "${SASS:-}" ]; then
  for b in sage_time_base sage_time; do
    [ -x "$bd/$b" ] || continue
    cuobjdump -sass "$bd/$b" | python3 dev/sass_hist.py "$out" "$b" ${SASS//,/ } >>"$out/sass-hist.txt"
  done
  grep -E "^== |instructions" "$out/sass-hist.txt" | cut -c1-200
fi
echo "== summary"
[ -f "$out/tests.log" ] && grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]" "$out/tests.log" | tail -n 8
for tool in memcheck racecheck; do
  [ -f "$out/sanitize-$tool.log" ] && grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) " "$out/sanitize-$tool.log"
done
exit 0
