#!/bin/bash
# The block-sparse kernel's device round, from the repository root on a Hopper machine: checks on
# small shapes (bf16 and fp16, dev/sparse_check_workloads.csv), compute-sanitizer memcheck and
# racecheck on them, then timings against dense FLASH_ATTN on the Wan2.1 480p/720p self-attention
# shapes with the layouts dumped, and the FlexAttention peer (bench/flex_peer.py) on those very
# layouts. Uses build/dev/sparse_dev when present (built where the tree was), else builds it.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/dev/out}
mkdir -p "$OUT" build/dev
sd=build/dev/sparse_dev
if [ ! -x $sd ]; then
  nvcc -std=c++20 -O3 --expt-relaxed-constexpr -Isrc -Iinclude -gencode=arch=compute_90a,code=sm_90a \
    dev/sparse_dev.cu src/kernels/cuda/flash/flash_hopper.cu src/kernels/cuda/flash/flash_hopper_sparse.cu \
    -o $sd -lcuda || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
small=tiny-hd128,ragged-hd128,cross-hd128,ragged-hd64,square-4k-hd128,square-4k-hd64
echo "== checks (bf16, fp16)"
timeout 120 $sd --workloads-file dev/sparse_check_workloads.csv --work $small --densities 1,0.5,0.125,0.01 --check-only 2>&1 | tee "$OUT/check.log"
timeout 120 $sd --workloads-file dev/sparse_check_workloads.csv --work $small --densities 1,0.3 --check-only --fp16 2>&1 | tee -a "$OUT/check.log"
echo "== checks, 64 x 64 tiles (per-group lists; tile rows on the self-attention shapes)"
timeout 120 $sd --workloads-file dev/sparse_check_workloads.csv --work $small --densities 1,0.5,0.125,0.01 --check-only --small 2>&1 | tee -a "$OUT/check.log"
timeout 120 $sd --workloads-file dev/sparse_check_workloads.csv --work $small --densities 1,0.3 --check-only --small --tile-rows --fp16 2>&1 | tee -a "$OUT/check.log"
timeout 120 $sd --workloads-file dev/sparse_check_workloads.csv --work $small --densities 0.7 --check-only --small --tile-rows 2>&1 | tee -a "$OUT/check.log"
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== sanitizers"
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $sd --workloads-file dev/sparse_check_workloads.csv \
      --work tiny-hd128,ragged-hd128,ragged-hd64 --densities 1,0.3 --check-only > "$OUT/sanitize-$tool.log" 2>&1
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $sd --workloads-file dev/sparse_check_workloads.csv \
      --work tiny-hd128,ragged-hd128,ragged-hd64 --densities 1,0.3 --check-only --small --tile-rows >> "$OUT/sanitize-$tool.log" 2>&1
    echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tr '\n' ' '))"
  done
fi
echo "== timings"
mkdir -p /tmp/layouts
timeout 300 $sd --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self} --densities 1,0.5,0.25,0.125 \
  --rounds ${ROUNDS:-5} --dump /tmp/layouts --csv "$OUT/sparse.csv" 2>&1 | tee "$OUT/time.log"
timeout 300 $sd --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self} --densities 1,0.5,0.25,0.125 \
  --rounds ${ROUNDS:-5} --small --csv "$OUT/sparse-64.csv" 2>&1 | tee -a "$OUT/time.log"
echo "== FlexAttention peer on the same layouts"
PYTHONUNBUFFERED=1 timeout 400 python3 bench/flex_peer.py --dump /tmp/layouts \
  --work ${WORK:-wan2.1-14b-480p-self,wan2.1-14b-720p-self} --rounds ${ROUNDS:-5} --csv "$OUT/flex.csv" 2>&1 | tee "$OUT/flex.log"
