#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz carried: the Hopper
# listed walk (dense masks, 128 x 128 block-sparse lists) on each of dense masks' tiles and with and
# without its tail split, in one binary, the arms set through DIFFATTN_DENSE_MASK_TILE and
# DIFFATTN_LISTED_TAIL_SPLIT and alternated round by round. STEPS picks and orders the steps
# (default: all):
#  tests     the GPU tests of TESTS;
#  sanitize  compute-sanitizer memcheck over SANITIZE_TESTS;
#  mask      bench/gpu_mask_bench.cu on MASK_WORKLOADS (FLASHINFER_ATTN beside unmasked FLASH_ATTN);
#  sparse    bench/gpu_sparse_bench.cu on SPARSE_WORK at densities 1 / 0.5 / 0.25 / 0.125;
#  ncu       per-kernel durations of one FLASHINFER_ATTN call on each MASK_WORKLOADS row, per arm.
# ARMS names the arms as TILE/SPLIT (TILE 128, 192 or rule; SPLIT 0 or 1), default
# "128/0 128/1 192/1 192/0"; SPARSE_ARMS those of the sparse step; AB_ROUNDS rounds of them.
# $OUT gets logs.tar.gz with every log, rewritten after each step.
#   STEPS="tests mask" scripts/device/listed_round.sh
set -uo pipefail
source scripts/device/env.sh
round_start || exit 1
arms="${ARMS:-128/0 128/1 192/1 192/0}"
arm_env() { echo "DIFFATTN_DENSE_MASK_TILE=${1%/*} DIFFATTN_LISTED_TAIL_SPLIT=${1#*/}"; }
for step in ${STEPS:-tests sanitize mask sparse ncu}; do
  case "$step" in
    tests)
      TESTS="${TESTS:-GpuDenseMask*:GpuBlockSparse*:GpuVsa*:GpuRainfusion*:GpuParity*:GpuFlashAttn*}" \
        run_gpu_tests "$bd" "$out/r" ;;
    sanitize)
      run_sanitizers "$bd" "${SANITIZE_TESTS:-GpuDenseMask.*:GpuBlockSparse.LargeTiles*}" "$out/r" memcheck \
        "${SANITIZE_TIMEOUT:-150}" ;;
    mask)
      for round in $(seq "${AB_ROUNDS:-2}"); do
        for a in $arms; do
          echo "== arm $a ($(arm_env "$a")), round $round" | tee -a "$out/r/mask-ab.txt"
          env $(arm_env "$a") timeout -s KILL 100 $bd/bin/gpu_mask_bench --backends FLASHINFER_ATTN \
            --workloads "${MASK_WORKLOADS:-flux-blocks-50,flux-77of512-dense}" --rounds "${ROUNDS:-10}" \
            --rest-ms "${REST_MS:-500}" 2>&1 | tee -a "$out/r/mask-ab.txt"
        done
      done ;;
    sparse)
      for round in $(seq "${AB_ROUNDS:-2}"); do
        for a in ${SPARSE_ARMS:-rule/0 rule/1}; do
          echo "== arm $a ($(arm_env "$a")), round $round" | tee -a "$out/r/sparse-ab.txt"
          env $(arm_env "$a") timeout -s KILL 150 $bd/bin/gpu_sparse_bench \
            --work "${SPARSE_WORK:-wan2.1-14b-480p-self}" --densities 1,0.5,0.25,0.125 --rounds "${SPARSE_ROUNDS:-3}" \
            2>&1 | tee -a "$out/r/sparse-ab.txt"
        done
      done ;;
    ncu)
      command -v ncu >/dev/null || { echo "no ncu"; continue; }
      for a in $arms; do
        echo "== ncu, arm $a" | tee -a "$out/r/ncu.txt"
        env $(arm_env "$a") timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum \
          $bd/bin/gpu_mask_bench --backends FLASHINFER_ATTN --workloads "${MASK_WORKLOADS:-flux-blocks-50,flux-77of512-dense}" \
          --rounds 1 --rest-ms 0 --calls 1 2>&1 | grep -E "^  [a-z_]|gpu__time_duration|^==" >>"$out/r/ncu.txt"
      done
      grep -E "^==|flash_fwd_hopper|duration" "$out/r/ncu.txt" | sed -E 's/\(flash::FlashTmaMaps.*//' | head -n 80 ;;
  esac
  pack_logs
done
exit 0
