#!/bin/bash
# Reproduces FLASH_ATTN's development measurements in one GPU-machine call, from the repository
# root: correctness of the configured kernels and the tile variants, timings, the PyTorch peers
# on the same workloads (bench/peers.py), and compute-sanitizer memcheck/racecheck/synccheck.
# Builds build/dev/flash_dev first when it is missing; logs go to $OUT (default build/dev/out).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/dev/out}
mkdir -p "$OUT" build/dev
if [ ! -x build/dev/flash_dev ]; then
  nvcc -std=c++20 -O3 --expt-relaxed-constexpr -Isrc -Iinclude -gencode=arch=compute_90a,code=sm_90a \
    dev/flash_dev.cu src/kernels/cuda/flash/flash_hopper.cu -o build/dev/flash_dev || exit 1
fi
fd=build/dev/flash_dev
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 120 $fd check variants > "$OUT/check.log" 2>&1; echo "check rc=$?"; grep -E "FAIL|correctness" "$OUT/check.log"
timeout 240 $fd time variants --csv "$OUT/flash_variants.csv" > "$OUT/time.log" 2>&1; echo "time rc=$?"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/peers.py --csv "$OUT/peers.csv" > "$OUT/peers.log" 2>&1; echo "peers rc=$?"
(timeout 100 compute-sanitizer --tool memcheck $fd check quick variants 2>&1 | tail -3
 timeout 100 compute-sanitizer --tool racecheck $fd check quick variants 2>&1 | tail -3
 timeout 60 compute-sanitizer --tool synccheck $fd check quick 2>&1 | tail -2) > "$OUT/sanitizer.log" 2>&1
grep -E "SUMMARY|correctness" "$OUT/sanitizer.log"
cat "$OUT/time.log" "$OUT/peers.log"
