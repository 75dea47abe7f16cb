#!/bin/bash
# The block-sparse benchmark's device round, from the repository root on a Hopper machine: checks on
# small shapes (bf16 and fp16, bench/sparse_check_workloads.csv), compute-sanitizer memcheck and
# racecheck on them, then timings against dense FLASH_ATTN on the Wan2.1 480p/720p self-attention
# shapes with the layouts dumped, and the FlexAttention peer (bench/flex_peer.py) on those very
# layouts. Uses $SPARSE_BENCH (default build/default/bin/gpu_sparse_bench, e.g. from the carried
# bundle) when present, else builds it alone with nvcc.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/dev/out}
mkdir -p "$OUT" build/dev
# With the carried bundle (scripts/device/pack_prebuilt.sh), its binaries: the GPU tests of the
# block-sparse kernel and both sparse backends first, and (RUNS=1) the sparse backends end to end
# through `diffattn run` on Wan2.1-14B's self-attention beside FLASH_ATTN; BENCH=0 stops there.
if [ -f .devcarry/bundle.tar.xz ]; then
  pre=build/pre; mkdir -p $pre && tar -xJf .devcarry/bundle.tar.xz -C $pre || exit 1
  SPARSE_BENCH=${SPARSE_BENCH:-$pre/bin/gpu_sparse_bench}
  echo "== GPU tests"
  timeout -s KILL 300 $pre/tests/diffattn_tests \
    --gtest_filter="${TESTS:-GpuBlockSparse*:GpuVsa*:GpuRainfusion*:GpuParity*:GpuFlashAttn.KeyTile*}" > "$OUT/gpu-tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|error" "$OUT/gpu-tests.log" | head -n 40
  if [ "${RUNS:-0}" = 1 ]; then
    for res in ${RES:-480x832 720x1280}; do
      set -- ${res%x*} ${res#*x}
      cubes=$(( ((21 + 3) / 4) * (($1 / 16 + 3) / 4) * (($2 / 16 + 3) / 4) ))
      topk=$(( (cubes + 7) / 8 ))  # 87.5 % sparsity
      run=($pre/bin/diffattn run --model wan2.1-14b --height $1 --width $2 --num-frames 81 --layers 1)
      echo "== diffattn run wan2.1-14b ${1}x${2}x81: FLASH_ATTN"
      timeout 200 "${run[@]}" --diffusion-attention-backend FLASH_ATTN --out-dir "/tmp/run-flash-$1" 2>&1 | grep -E "^self|^cross"
      echo "== diffattn run wan2.1-14b ${1}x${2}x81: FASTVIDEO_VSA topk $topk of $cubes cubes"
      timeout 200 "${run[@]}" --out-dir "/tmp/run-vsa-$1" --diffusion-attention-config \
        "{\"per_role\": {\"self\": {\"backend\": \"FASTVIDEO_VSA\", \"fastvideo_vsa_topk\": $topk}}}" 2>&1 | grep -E "^self|^cross|error"
      for precision in ${RAIN_PRECISIONS:-bf16}; do
        echo "== diffattn run wan2.1-14b ${1}x${2}x81: RAINFUSION_ATTN sparsity 0.8, precision $precision"
        timeout 200 "${run[@]}" --out-dir "/tmp/run-rain-$1-$precision" --diffusion-attention-config \
          "{\"per_role\": {\"self\": {\"backend\": \"RAINFUSION_ATTN\", \"block_sparse\": {\"sparsity\": 0.8, \"precision\": \"$precision\"}}}}" \
          2>&1 | grep -E "^self|^cross|error"
      done
    done 2>&1 | tee "$OUT/runs.log"
  fi
  # PATHS=1: FASTVIDEO_VSA and RAINFUSION_ATTN end to end beside dense FLASH_ATTN on the runner's
  # activations, and FlexAttention given the lists each chose; then stop.
  if [ "${PATHS:-0}" = 1 ]; then
    echo "== the whole sparse paths, and FlexAttention on the lists they chose"
    rm -rf /tmp/paths && mkdir -p /tmp/paths
    timeout 300 $pre/bin/gpu_sparse_paths_bench --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self} \
      --rounds ${ROUNDS:-5} --dump /tmp/paths --csv "$OUT/paths.csv" 2>&1 | tee "$OUT/paths.log"
    PYTHONUNBUFFERED=1 timeout 250 python3 bench/flex_peer.py --paths /tmp/paths --rounds ${ROUNDS:-5} \
      --csv "$OUT/paths-flex.csv" 2>&1 | tee "$OUT/paths-flex.log"
    exit 0
  fi
  [ "${BENCH:-1}" = 1 ] || exit 0
fi
sd=${SPARSE_BENCH:-build/default/bin/gpu_sparse_bench}
if [ ! -x $sd ]; then
  sd=build/dev/gpu_sparse_bench
  nvcc -std=c++20 -O3 --expt-relaxed-constexpr -Isrc -Iinclude -gencode=arch=compute_90a,code=sm_90a \
    bench/gpu_sparse_bench.cu src/kernels/cuda/flash/flash_hopper.cu src/kernels/cuda/flash/flash_hopper_sparse.cu \
    -o $sd -lcuda || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
small=tiny-hd128,ragged-hd128,cross-hd128,ragged-hd64,square-4k-hd128,square-4k-hd64
# SMALL_AB=1: the 64 x 64 lists on the one-warpgroup walk: checks (bf16, fp16, tile rows),
# memcheck and racecheck, then timings of it and of the variants $SMALL_VARIANTS (binaries named
# ${sd}_<variant> beside the benchmark, built with other walk configurations) on the same lists;
# then stop.
if [ "${SMALL_AB:-0}" = 1 ]; then
  echo "== the one-warpgroup walk: checks"
  for flags in "--small" "--small --fp16 --tile-rows" "--small --tile-rows"; do
    timeout 120 $sd $flags --workloads-file bench/sparse_check_workloads.csv --work $small \
      --densities 1,0.5,0.125,0.01 --check-only 2>&1 | tee -a "$OUT/small-check.log" | grep -E "FAIL|refused|correctness"
  done
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $sd --workloads-file bench/sparse_check_workloads.csv \
      --work tiny-hd128,ragged-hd128,ragged-hd64 --densities 1,0.3,0.01 --check-only --small --tile-rows \
      > "$OUT/small-$tool.log" 2>&1
    echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/small-$tool.log" | tr '\n' ' '))"
  done
  echo "== timings: the one-warpgroup walk and its variants, same lists"
  for bin in "$sd --small" $(for v in ${SMALL_VARIANTS:-}; do echo "${sd}_$v --small"; done | tr ' ' '@'); do
    bin=${bin//@/ }
    echo "-- $bin"
    timeout 200 $bin --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self,square-16k-hd64} \
      --densities ${DENSITIES:-1,0.5,0.25,0.125} --rounds ${ROUNDS:-3} 2>&1 | grep -vE "^workload"
  done | tee "$OUT/small-time.log"
  exit 0
fi
# SAGE_WALK=1: SAGE_ATTN's block-sparse walk (RAINFUSION_ATTN's precision fp8 / mix) beside the
# bf16 walk on the same lists: checks, memcheck and racecheck, timings; then stop.
if [ "${SAGE_WALK:-0}" = 1 ]; then
  echo "== the 8-bit walk: checks (fp8 and fp16 P V, bf16 and fp16 inputs, tile rows)"
  for flags in "--sage fp8" "--sage fp16" "--sage fp8 --fp16 --tile-rows" "--sage fp16 --tile-rows"; do
    timeout 120 $sd $flags --workloads-file bench/sparse_check_workloads.csv --work $small \
      --densities 1,0.5,0.125,0.01 --check-only 2>&1 | tee -a "$OUT/sage-walk-check.log" | grep -E "FAIL|refused|correctness"
  done
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $sd --sage fp8 --workloads-file \
      bench/sparse_check_workloads.csv --work tiny-hd128,ragged-hd64 --densities 1,0.3 --check-only --tile-rows \
      > "$OUT/sage-walk-$tool.log" 2>&1
    echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sage-walk-$tool.log" | tr '\n' ' '))"
  done
  echo "== the 8-bit walk against the bf16 walk, same lists (timings against dense FLASH_ATTN)"
  for flags in "" "--sage fp8" "--sage fp16"; do
    timeout 250 $sd $flags --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self,square-16k-hd64} \
      --densities 1,0.5,0.25,0.125 --rounds ${ROUNDS:-3} --csv "$OUT/sage-walk${flags:+-${flags##* }}.csv" 2>&1
  done | tee "$OUT/sage-walk-time.log"
  exit 0
fi
# AMPERE=1: the mma.sync walk (the block-sparse kernel of sm_80..sm_89, run here from its compute_80
# code) against FLASH_ATTN's dense mma.sync kernel: checks, memcheck, timings; then stop.
if [ "${AMPERE:-0}" = 1 ]; then
  echo "== the mma.sync walk: checks (both tilings, bf16 and fp16, tile rows)"
  for flags in "" "--fp16" "--tile-rows" "--small" "--small --fp16 --tile-rows"; do
    timeout 120 $sd --ampere $flags --workloads-file bench/sparse_check_workloads.csv --work $small \
      --densities 1,0.5,0.125,0.01 --check-only 2>&1 | tee -a "$OUT/ampere-check.log" | grep -E "FAIL|refused|correctness"
  done
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $sd --ampere --workloads-file \
    bench/sparse_check_workloads.csv --work tiny-hd128,ragged-hd64 --densities 1,0.3 --check-only --small --tile-rows \
    > "$OUT/ampere-memcheck.log" 2>&1
  echo "memcheck exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/ampere-memcheck.log" | tr '\n' ' '))"
  echo "== the mma.sync walk: timings against the dense mma.sync kernel"
  for flags in "" "--small"; do
    timeout 250 $sd --ampere $flags --work ${WORK:-wan2.1-14b-480p-self,square-16k-hd64} \
      --densities 1,0.5,0.25,0.125 --rounds ${ROUNDS:-3} --csv "$OUT/ampere-sparse${flags:+-64}.csv" 2>&1
  done | tee "$OUT/ampere-time.log"
  exit 0
fi
echo "== checks (bf16, fp16)"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 1,0.5,0.125,0.01 --check-only 2>&1 | tee "$OUT/check.log"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 1,0.3 --check-only --fp16 2>&1 | tee -a "$OUT/check.log"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 0.6 --check-only --tile-rows 2>&1 | tee -a "$OUT/check.log"
echo "== checks, 64 x 64 tiles (per-group lists; tile rows on the self-attention shapes)"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 1,0.5,0.125,0.01 --check-only --small 2>&1 | tee -a "$OUT/check.log"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 1,0.3 --check-only --small --tile-rows --fp16 2>&1 | tee -a "$OUT/check.log"
timeout 120 $sd --workloads-file bench/sparse_check_workloads.csv --work $small --densities 0.7 --check-only --small --tile-rows 2>&1 | tee -a "$OUT/check.log"
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== sanitizers"
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $sd --workloads-file bench/sparse_check_workloads.csv \
      --work tiny-hd128,ragged-hd128,ragged-hd64 --densities 1,0.3 --check-only --tile-rows > "$OUT/sanitize-$tool.log" 2>&1
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $sd --workloads-file bench/sparse_check_workloads.csv \
      --work tiny-hd128,ragged-hd128,ragged-hd64 --densities 1,0.3 --check-only --small --tile-rows >> "$OUT/sanitize-$tool.log" 2>&1
    echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tr '\n' ' '))"
  done
fi
echo "== timings"
mkdir -p /tmp/layouts
timeout 300 $sd --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self,square-16k-hd64} --densities 1,0.5,0.25,0.125 \
  --rounds ${ROUNDS:-5} --dump /tmp/layouts --csv "$OUT/sparse.csv" 2>&1 | tee /tmp/time.log
timeout 300 $sd --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self,square-16k-hd64} --densities 1,0.5,0.25,0.125 \
  --rounds ${ROUNDS:-5} --small --csv "$OUT/sparse-64.csv" 2>&1 | tee -a /tmp/time.log
echo "== FlexAttention peer on the same layouts"
PYTHONUNBUFFERED=1 timeout 400 python3 bench/flex_peer.py --dump /tmp/layouts \
  --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self,square-16k-hd64} --rounds ${ROUNDS:-5} --csv "$OUT/flex.csv" 2>&1 | tee /tmp/flex.log
