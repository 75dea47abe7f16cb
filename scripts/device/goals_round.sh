#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (the tests, the three
# GPU benchmarks of attention, masks and sparse paths, gpu_sparse_bench) and the peers' wheels in .whl
# carried: the rows that the open goals of the 8-bit, masked and sparse backends are judged on, at
# one commit, in one job. STEPS picks and orders them (default: all):
#  bench     the product benchmark with every peer on BENCH_WORKLOADS (BACKENDS);
#  pairs     FLASH_ATTN beside FLASHINFER_ATTN and SAGE_ATTN (every option set) in one process on
#            PAIRS_WORKLOADS (default: the long hd128 rows), PAIRS_ROUNDS windows each (default 3),
#            the backends taking turns (gpu_attention_bench --rounds): the ratios to FLASH_ATTN with
#            the machine's drift shared;
#  mask      bench/gpu_mask_bench.cu and the PyTorch SDPA peer with the same masks;
#  paths     FASTVIDEO_VSA and RAINFUSION_ATTN end to end beside dense FLASH_ATTN, and
#            FlexAttention on the lists they chose (PATHS_WORK);
#  sagewalk  the 8-bit block-sparse walk (RAINFUSION_ATTN's fp8 / mix) beside the bf16 walk on the
#            same random lists (WALK_WORK), then ncu on one listed and one dense SAGE_ATTN call;
#  tests     the GPU tests of TESTS;
#  sanitize  compute-sanitizer's SANITIZE_TOOLS (memcheck) over SANITIZE_TESTS;
#  ab        dev/sage_time on AB_WORKLOADS in AB_MODES, AB_ROUNDS rounds of the arms in AB_ARMS, each
#            run with the environment in ARM_ENV_<arm> (none: the defaults).
# $OUT gets the benchmark table (gpu-*.md), verdict.md (bench/goal_verdict.py on the steps' outputs:
# each open goal row, its figure and whether it is met) and logs.tar.gz with every log, rewritten
# after each step.
#   STEPS="bench mask" COMMIT=sha scripts/device/goals_round.sh
set -uo pipefail
source scripts/device/env.sh
round_start || exit 1
for step in ${STEPS:-bench mask paths sagewalk}; do
  case "$step" in
    bench)
      product_bench_with_peers "${BENCH_TIMEOUT:-400}" 60 ;;
    pairs)
      echo "== FLASH_ATTN, FLASHINFER_ATTN and SAGE_ATTN in one process, their windows in turns"
      timeout -s KILL "${PAIRS_TIMEOUT:-240}" $bd/bin/gpu_attention_bench --workloads-file bench/workloads.csv \
        --workloads "${PAIRS_WORKLOADS:-wan2.1-14b-480p-self,wan2.2-ti2v-5b-self,hunyuanvideo-1.5-480p-self,square-16k-hd128}" \
        --backends FLASH_ATTN,FLASHINFER_ATTN,SAGE_ATTN --rounds "${PAIRS_ROUNDS:-3}" --json "$out/r/interleaved.json" \
        2>&1 | tee "$out/r/interleaved.txt" ;;
    mask)
      echo "== gpu_mask_bench"
      timeout -s KILL 150 $bd/bin/gpu_mask_bench --rounds "${ROUNDS:-10}" 2>&1 | tee "$out/r/mask-bench.txt"
      echo "== PyTorch SDPA with the same masks"
      timeout 120 python3 bench/mask_peer.py --rounds "${ROUNDS:-10}" 2>&1 | tee "$out/r/mask-peer.txt" ;;
    paths)
      echo "== the whole sparse paths, and FlexAttention on the lists they chose"
      rm -rf /tmp/paths && mkdir -p /tmp/paths
      timeout 300 $bd/bin/gpu_sparse_paths_bench --work "${PATHS_WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self}" \
        --rounds "${PATHS_ROUNDS:-3}" --dump /tmp/paths --csv "$out/r/paths.csv" 2>&1 | tee "$out/r/paths.log"
      PYTHONUNBUFFERED=1 timeout 200 python3 bench/flex_peer.py --paths /tmp/paths --rounds "${PATHS_ROUNDS:-3}" \
        --csv "$out/r/paths-flex.csv" 2>&1 | tee "$out/r/paths-flex.log" ;;
    sagewalk)
      echo "== the 8-bit walk against the bf16 walk, same lists (timings against dense FLASH_ATTN)"
      for flags in "" "--sage fp8" "--sage fp16"; do
        timeout 200 $bd/bin/gpu_sparse_bench $flags --work "${WALK_WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self}" \
          --densities 1,0.5,0.25,0.125 --rounds "${WALK_ROUNDS:-3}" --csv "$out/r/sage-walk${flags:+-${flags##* }}.csv" 2>&1
      done | tee "$out/r/sage-walk-time.log"
      if command -v ncu >/dev/null; then
        echo "== ncu: the listed kernel (density 1) and the dense SAGE_ATTN kernel, Wan2.1 480p"
        timeout 150 ncu --kernel-name regex:sage_fwd_hopper --launch-count 1 --section SpeedOfLight \
          --section WarpStateStats --section LaunchStats --section Occupancy \
          $bd/bin/gpu_sparse_bench --sage fp8 --work wan2.1-14b-480p-self --densities 1 --rounds 1 \
          >"$out/r/ncu-listed.txt" 2>&1; echo "rc $?"
        timeout 120 ncu --kernel-name regex:sage_fwd_hopper --launch-count 1 --section SpeedOfLight \
          --section WarpStateStats --section LaunchStats --section Occupancy \
          $bd/sage_time wan2.1-14b-480p-self 1 fp8/2 >"$out/r/ncu-dense2.txt" 2>&1; echo "rc $?"
        grep -E "Duration|Registers Per|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput" \
          "$out"/r/ncu-*.txt | head -n 30
      fi ;;
    tests)
      echo "== tests"
      timeout -s KILL 240 $bd/tests/diffattn_tests --gtest_filter="${TESTS:-GpuSageAttn*:GpuQk16V8*:SageConfig*}" \
        >"$out/r/tests.log" 2>&1
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure|unwritten" "$out/r/tests.log" | head -n 30
      ;;
    sanitize)
      run_sanitizers "$bd" "${SANITIZE_TESTS:-GpuDenseMask.*}" "$out/r" "${SANITIZE_TOOLS:-memcheck}" \
        "${SANITIZE_TIMEOUT:-150}" ;;
    ab)
      for round in $(seq "${AB_ROUNDS:-2}"); do
        for a in ${AB_ARMS:-base}; do
          var="ARM_ENV_$a"
          echo "== $a (${!var:-defaults}), round $round" | tee -a "$out/r/ab.txt"
          env ${!var:-} timeout -s KILL 120 $bd/sage_time "${AB_WORKLOADS:-wan2.2,hunyuan,square-16k-hd128}" 3 \
            "${AB_MODES:-qk16/3}" 2>&1 | tee -a "$out/r/ab.txt"
        done
      done ;;
  esac
  verdict_args=()
  table="$(ls "$out"/r/gpu-*.md 2>/dev/null | head -n 1)"
  [ -n "$table" ] && verdict_args+=(--table "$table")
  [ -s "$out/r/interleaved.json" ] && verdict_args+=(--interleaved "$out/r/interleaved.json")
  [ -s "$out/r/mask-bench.txt" ] && verdict_args+=(--mask "$out/r/mask-bench.txt")
  [ -s "$out/r/mask-peer.txt" ] && verdict_args+=(--mask-peer "$out/r/mask-peer.txt")
  [ -s "$out/r/paths.csv" ] && verdict_args+=(--paths "$out/r/paths.csv")
  [ "${#verdict_args[@]}" -gt 0 ] && python3 bench/goal_verdict.py "${verdict_args[@]}" --out "$out/r/verdict.md" >/dev/null &&
    cp "$out/r/verdict.md" "$out/"
  pack_logs
done
[ -s "$out/verdict.md" ] && grep -E "goal rows met|\*\*no\*\*" "$out/verdict.md"
exit 0
