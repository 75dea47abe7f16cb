#!/bin/bash
# Profiles FLASH_ATTN kernels with Nsight Compute on the GPU machine: for each workload named on
# the command line (flash_dev's --work names; default: SD3 hd64 and Wan 480p hd128) one launch of
# the configured kernel with the full section set and SASS-level source counters, exported as CSV
# (details, raw metrics, per-instruction source page), plus the SASS of every kernel in flash_dev.
# Clocks are left alone (--clock-control none). Run from anywhere after dev/run_device.sh has built
# build/dev/flash_dev; output goes to $OUT (default: build/dev/profile).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/dev/profile}
mkdir -p "$OUT"
work=("$@")
[ ${#work[@]} -eq 0 ] && work=(sd3-1024-joint-hd64 wan2.1-14b-480p-self)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
cuobjdump --dump-sass build/dev/flash_dev > "$OUT/flash_dev.sass" 2>&1 || echo "cuobjdump failed"
for w in "${work[@]}"; do
  rep="$OUT/$w"
  timeout 240 ncu --clock-control none -k regex:flash_fwd_hopper --launch-skip 2 --launch-count 1 --set full \
    --import-source yes -f -o "$rep" build/dev/flash_dev time --work "$w" --rounds 1 > "$OUT/$w-ncu.log" 2>&1
  echo "$w: ncu rc=$?"
  ncu --import "$rep.ncu-rep" --page details --csv > "$OUT/$w-details.csv" 2>&1
  ncu --import "$rep.ncu-rep" --page raw --csv > "$OUT/$w-raw.csv" 2>&1
  ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$OUT/$w-sass.csv" 2>&1 ||
    echo "$w: source page export failed"
  rm -f "$rep.ncu-rep"
done
