#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# and the peers' wheels in .whl carried: what SAGE_ATTN and QK16/V8 leave to their attention kernel,
# in one job.
#  1. the same-bits test of the in-kernel K/V items (a hang shows here first);
#  2. dev/sage_time on WORKLOADS in MODES, ROUNDS rounds of the arms in ARMS: `pass` (the K/V pass
#     everywhere, DIFFATTN_SAGE_KV_IN_KERNEL=0), `rule` (nothing set), `kv` (=1: wherever a kernel
#     fits); an arm of another name runs with the environment given in ARM_ENV_<name> (e.g.
#     ARMS="pass rule x" ARM_ENV_x="DIFFATTN_SOME_KNOB=1"); then `rule` on standard normal inputs
#     (SAGE_INPUTS=normal, the product benchmark's);
#  3. (BENCH=1) the product benchmark with every peer on BENCH_WORKLOADS;
#  4. the GPU tests of TESTS, and compute-sanitizer's SANITIZE_TOOLS over SANITIZE_TESTS.
# $OUT gets the benchmark table (gpu-*.md) and logs.tar.gz with every log, rewritten after each step.
set -uo pipefail
source scripts/device/env.sh
round_start || exit 1
echo "== same bits"
timeout -s KILL 90 $bd/tests/diffattn_tests --gtest_filter="GpuSageAttn.KAndVQuantizedInTheKernel*" >"$out/r/bits.log" 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|unwritten" "$out/r/bits.log" | head -n 20
pack_logs
arm() {
  case "$1" in
    pass) env DIFFATTN_SAGE_KV_IN_KERNEL=0 "${@:2}" ;;
    rule) env "${@:2}" ;;
    kv) env DIFFATTN_SAGE_KV_IN_KERNEL=1 "${@:2}" ;;
    *) local var="ARM_ENV_$1"; env ${!var:-} "${@:2}" ;;
  esac
}
for round in $(seq "${ROUNDS:-2}"); do
  for a in ${ARMS:-pass rule kv}; do
    echo "== $a, round $round" | tee -a "$out/r/ab.txt"
    arm "$a" timeout -s KILL 90 $bd/sage_time "${WORKLOADS:-wan2.2,hunyuan,square-16k-hd128,sd3,square-4k}" 3 \
      "${MODES:-fp8/3,qk16/3}" 2>&1 | tee -a "$out/r/ab.txt"
  done
  pack_logs
done
echo "== rule, normal inputs" | tee -a "$out/r/ab.txt"
SAGE_INPUTS=normal timeout -s KILL 60 $bd/sage_time "${NORMAL_WORKLOADS:-wan2.2,hunyuan}" 3 "${MODES:-fp8/3,qk16/3}" 2>&1 |
  tee -a "$out/r/ab.txt"
pack_logs
if [ "${BENCH:-1}" = 1 ]; then
  product_bench_with_peers "${BENCH_TIMEOUT:-330}" 40
  pack_logs
fi
echo "== tests"
timeout -s KILL 150 $bd/tests/diffattn_tests --gtest_filter="${TESTS:-GpuSageAttn*:GpuQk16V8*:SageConfig*:GpuDependentLaunch*}" \
  >"$out/r/tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure|unwritten" "$out/r/tests.log" | head -n 30
pack_logs
run_sanitizers "$bd" "${SANITIZE_TESTS:-GpuSageAttn.KAndVQuantizedInTheKernel*}" "$out/r" "${SANITIZE_TOOLS:-memcheck}" \
  "${SANITIZE_TIMEOUT:-120}"
pack_logs
exit 0
