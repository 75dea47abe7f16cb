#!/bin/bash
# A/B of the whole sparse paths on a Hopper machine, from the repository root, with the carried
# bundle (.devcarry/bundle.tar.xz: tests/diffattn_tests, bin/gpu_sparse_paths_bench, and other builds'
# benches as bin/gpu_sparse_paths_bench_<variant>): the GPU tests ($TESTS), compute-sanitizer
# memcheck and racecheck on $SANITIZE (a test filter), then the benches of $VARIANTS ("new": this
# build's; default "base new") on the same workloads in alternation, $AB_ROUNDS rounds of each,
# each run the median of $ROUNDS.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/dev/out}
mkdir -p "$OUT"
pre=build/pre; mkdir -p $pre && tar -xJf .devcarry/bundle.tar.xz -C $pre || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -n "${TESTS:-}" ]; then
  echo "== GPU tests: $TESTS"
  timeout -s KILL 300 $pre/tests/diffattn_tests --gtest_filter="$TESTS" > "$OUT/gpu-tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|error" "$OUT/gpu-tests.log" | head -n 40
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $pre/tests/diffattn_tests \
      --gtest_filter="$SANITIZE" > "$OUT/$tool.log" 2>&1
    echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/$tool.log" | tr '\n' ' '))"
  done
fi
work=${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self}
for round in $(seq 1 ${AB_ROUNDS:-2}); do
  for which in ${VARIANTS:-base new}; do
    bin=$pre/bin/gpu_sparse_paths_bench; [ $which = new ] || bin=${bin}_$which
    echo "== round $round: $which"
    timeout ${RUN_TIMEOUT:-200} $bin --work $work --rounds ${ROUNDS:-3} --csv "$OUT/paths-$which-$round.csv" 2>&1 |
      tee "$OUT/paths-$which-$round.log"
  done
done
# NCU=1: per-kernel times of one FASTVIDEO_VSA call of this build on $NCU_WORK, and the coarse
# kernels' (scores and top-k) speed-of-light, occupancy and warp-state sections.
if [ "${NCU:-0}" = 1 ]; then
  ncu_work=${NCU_WORK:-wan2.1-14b-720p-self}
  timeout 300 ncu --metrics gpu__time_duration.sum -k regex:'gather_cubes|fill_lists|coarse_|segment_|listed_walk|scatter_cubes' \
    -c 12 $pre/bin/gpu_sparse_paths_bench --work $ncu_work --rounds 1 > "$OUT/ncu-times.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|gpu__time_duration" "$OUT/ncu-times.txt" | paste - - | awk '{print $1, $(NF)}' | head -24
  timeout 300 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    -k regex:coarse_ -c 2 $pre/bin/gpu_sparse_paths_bench --work $ncu_work --rounds 1 > "$OUT/ncu-coarse.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Eligible Warps|No Eligible|Block Limit" "$OUT/ncu-coarse.txt" | head -24
fi
# NCU_WALK=1: the fine branch's walk of one FASTVIDEO_VSA call on $NCU_WORK for every variant of
# $VARIANTS, and the first launch of the flash kernel beside it (RAINFUSION_ATTN's fine pass on
# 128 x 128 lists): speed of light, memory workload (shared memory and L2), tensor-pipe activity
# and warp states.
if [ "${NCU_WALK:-0}" = 1 ]; then
  ncu_work=${NCU_WORK:-wan2.1-14b-720p-self}
  metrics=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
  for which in ${VARIANTS:-base new} flash-listed; do
    bin=$pre/bin/gpu_sparse_paths_bench; kernel=listed_walk
    [ $which = new ] || [ $which = flash-listed ] || bin=${bin}_$which
    [ $which = flash-listed ] && kernel=flash_fwd_hopper
    timeout 300 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --metrics $metrics -k regex:$kernel -c 1 $bin --work $ncu_work --rounds 1 > "$OUT/ncu-walk-$which.txt" 2>&1
    echo "-- ncu $kernel: $which"
    grep -E "^  [a-z_:<>]+.*\(|Duration|Throughput|hmma|bank_|lts__t|Warp Cycles Per Issued|Stall" "$OUT/ncu-walk-$which.txt" |
      cut -c1-150 | head -40
  done
fi
