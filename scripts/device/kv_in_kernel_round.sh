#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh,
# plus a base build's sage_time as sage_time_base when BASE=1) carried: K and V quantized inside the
# attention kernel (DIFFATTN_SAGE_KV_IN_KERNEL=1, SageParams::kv_ready) against the K/V pass.
#  1. the GPU tests of TESTS (the same-bits test of the two ways among them);
#  2. compute-sanitizer memcheck and racecheck over SANITIZE_TESTS;
#  3. dev/sage_time on WORKLOADS in MODES with DIFFATTN_SAGE_KV_IN_KERNEL=0 and =1 in turn,
#     ROUNDS rounds (best of 5 each);
#  4. (BASE=1) sage_time_base against sage_time on BASE_WORKLOADS in BASE_MODES, alternating.
# $OUT gets logs.tar.gz with every log, rewritten after each step.
set -uo pipefail
source scripts/device/env.sh
round_start || exit 1
echo "== tests"
timeout 300 $bd/tests/diffattn_tests --gtest_filter="${TESTS:-GpuSageAttn*:GpuQk16V8*:SageConfig*}" >"$out/r/tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure|unwritten|what" "$out/r/tests.log" | head -n 30
pack_logs
run_sanitizers "$bd" "${SANITIZE_TESTS:-GpuSageAttn.KAndVQuantizedInTheKernel*}" "$out/r" \
  "${SANITIZE_TOOLS:-memcheck racecheck}" "${SANITIZE_TIMEOUT:-150}"
pack_logs
for round in $(seq "${ROUNDS:-2}"); do
  for kv in 0 1; do
    echo "== K/V in the kernel: $kv, round $round" | tee -a "$out/r/ab-kv.txt"
    export DIFFATTN_SAGE_KV_IN_KERNEL=$kv  # 0: the K/V pass everywhere (unset is the rule)
    timeout -s KILL 120 $bd/sage_time "${WORKLOADS:-flux,sd3,square-4k,480p-cross,wan2.2,hunyuan}" 5 \
      "${MODES:-fp8/3,fp8/3q}" 2>&1 | tee -a "$out/r/ab-kv.txt"
  done
  unset DIFFATTN_SAGE_KV_IN_KERNEL
  pack_logs
done
if [ "${BASE:-0}" = 1 ]; then
  for round in $(seq "${ROUNDS:-2}"); do
    for b in sage_time_base sage_time; do
      echo "== $b, round $round" | tee -a "$out/r/ab-base.txt"
      timeout -s KILL 100 $bd/$b "${BASE_WORKLOADS:-hunyuan,wan2.2}" 5 "${BASE_MODES:-qk16/3}" 2>&1 | tee -a "$out/r/ab-base.txt"
    done
  done
  pack_logs
fi
exit 0
