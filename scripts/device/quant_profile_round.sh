#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# carried: where SAGE_ATTN's quantization passes spend their time, and the sanitizers.
#  0. (ORDER_AB=1) the passes' block orders (DIFFATTN_SAGE_Q_ORDER=rows|heads,
#     DIFFATTN_SAGE_KV_ORDER=heads|keys, run_sage_attn.cu): dev/sage_time on ORDER_WORKLOADS in ORDER_MODES under each of the four
#     settings in turn, ORDER_ROUNDS rounds;
#  1. compute-sanitizer memcheck and racecheck over SANITIZE_TESTS (SANITIZE=0 skips them);
#  2. for each workload of PROFILE (comma-separated dev/sage_time substrings), ncu's sections
#     (speed of light, memory workload, occupancy, launch statistics, warp states, scheduler) of
#     one call's quantization kernels (dev/sage_time mode PROFILE_MODE, `quant/q` by default: the
#     passes alone, with the Q pass).
# $OUT gets logs.tar.gz with every log, rewritten after each step.
#   [ORDER_AB=1] [SANITIZE_TESTS=filter] [PROFILE=a,b] [PROFILE_MODE=m] scripts/device/quant_profile_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out/r"; out="$(cd "$out" && pwd)"
pack() { tar -czf "$out/logs.tar.gz" -C "$out" r; }
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
if [ "${ORDER_AB:-0}" = 1 ]; then
  for round in $(seq "${ORDER_ROUNDS:-2}"); do
    for q in rows heads; do
      for kv in heads keys; do
        echo "== Q order $q, K/V order $kv, round $round" | tee -a "$out/r/order-ab.txt"
        DIFFATTN_SAGE_Q_ORDER=$q DIFFATTN_SAGE_KV_ORDER=$kv timeout -s KILL 60 $bd/sage_time \
          "${ORDER_WORKLOADS:-flux,sd3,480p-cross,wan2.2}" 3 "${ORDER_MODES:-quant/q,quant/16,fp8/3}" 2>&1 | tee -a "$out/r/order-ab.txt"
      done
    done
  done
  pack
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  run_sanitizers "$bd" "${SANITIZE_TESTS:-GpuSageAttn.ReadingKAndVOnce*}" "$out/r" "memcheck racecheck" \
    "${SANITIZE_TIMEOUT:-200}"
  pack
fi
for w in ${PROFILE:+${PROFILE//,/ }}; do
  echo "== ncu: the quantization kernels of one call on $w"
  # Skip the first call's kernels (warm-up), profile the next call's.
  timeout 150 ncu --clock-control none -k 'regex:sage_prepass|sage_means|sage_quant_kv|sage_kv_slices' --launch-skip 3 \
    --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats $bd/sage_time "$w" 1 "${PROFILE_MODE:-quant/q}" >"$out/r/ncu-$w.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Stall|Issue Slots Busy|No Eligible" \
    "$out/r/ncu-$w.txt" | head -n 60
  pack
done
exit 0
