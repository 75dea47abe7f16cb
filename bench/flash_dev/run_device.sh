#!/bin/bash
# Reproduces the recorded FLASH_ATTN measurements in one GPU-machine call: correctness of the
# configured kernels and the tile variants, timings, PyTorch peers on the same shapes, and
# compute-sanitizer memcheck/racecheck/synccheck. Build flash_dev first (see flash_dev.cu) and
# put it next to this script with peers.py; logs go to $OUT (default: ./out).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 120 ./flash_dev check variants > "$OUT/check.log" 2>&1; echo "check rc=$?"; grep -E "FAIL|correctness" "$OUT/check.log"
timeout 240 ./flash_dev time variants --csv "$OUT/flash_variants.csv" > "$OUT/time.log" 2>&1; echo "time rc=$?"
PYTHONUNBUFFERED=1 timeout 200 python3 peers.py --csv "$OUT/peers.csv" > "$OUT/peers.log" 2>&1; echo "peers rc=$?"
(timeout 100 compute-sanitizer --tool memcheck ./flash_dev check quick variants 2>&1 | tail -3
 timeout 100 compute-sanitizer --tool racecheck ./flash_dev check quick variants 2>&1 | tail -3
 timeout 60 compute-sanitizer --tool synccheck ./flash_dev check quick 2>&1 | tail -2) > "$OUT/sanitizer.log" 2>&1
grep -E "SUMMARY|correctness" "$OUT/sanitizer.log"
cat "$OUT/time.log" "$OUT/peers.log"
