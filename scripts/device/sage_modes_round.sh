#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz holding at least
# sage_time (scripts/device/pack_prebuilt.sh packs it with the rest): dev/sage_time on chosen modes,
# one line of workloads per entry of RUNS ("workloads:modes", entries separated by spaces), each
# ROUNDS times; then (NCU="workload:mode") ncu's pipe, scheduler and warp-state sections of that
# call's attention kernel. Everything goes to $OUT.
#   RUNS="sd3,hd64:fp8/3,fp8/3p4 wan2.2:fp8/3,fp8/3p8" [ROUNDS=3] [NCU=sd3:fp8/3] scripts/device/sage_modes_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for round in $(seq 1 "${ROUNDS:-1}"); do
  for run in ${RUNS:?set RUNS}; do
    echo "== round $round: ${run%%:*} / ${run#*:}"
    timeout -s KILL "${RUN_TIMEOUT:-200}" stdbuf -oL $bd/sage_time "${run%%:*}" "${SAGE_ROUNDS:-8}" "${run#*:}" 2>&1 | tee -a "$out/sage-modes.txt"
  done
done
if [ -n "${NCU:-}" ]; then
  w="${NCU%%:*}" m="${NCU#*:}"
  echo "== ncu: $w, $m"
  timeout 200 ncu --clock-control none -k regex:sage_fwd --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats $bd/sage_time "$w" 1 "$m" >"$out/ncu-$w.txt" 2>&1
  grep -E "sage_fwd|Issue Slots|Issued Warp|No Eligible|Eligible Warps|Active Warps|Executed Ipc|Stall|Registers|Duration|Pipe" \
    "$out/ncu-$w.txt" | head -n 60
fi
exit 0
