#!/usr/bin/env bash
# On a GPU machine: builds the diffattn tool for this GPU, runs `diffattn run` with the given flags,
# then PyTorch SDPA (FLASH_ATTENTION and CUDNN_ATTENTION pinned) on the same role shapes as peers.
# Everything lands in $OUT (or build/gpu-compare/): terminal.txt, env.txt, peers.txt,
# report/report.json, report/report.html.
#   COMMIT=<sha> tests/runner/gpu_compare.sh --model wan2.2-ti2v-5b --compare TORCH_SDPA,CUDNN_ATTN,FLASH_ATTN
# DIFFATTN_BIN=PATH uses a tool built already. Build dependencies the device image lacks travel in .devdeps/ (scripts/gpu_bench.sh --pack-deps).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-build/gpu-compare}"
mkdir -p "$out"
source scripts/device/env.sh
diffattn="${DIFFATTN_BIN:-}"  # a tool built already (e.g. by scripts/device/check_head.sh); empty: build it here
if [ -z "$diffattn" ]; then
start=$(date +%s)
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_BUILD_TESTS=OFF -DDIFFATTN_BUILD_BENCH=OFF \
  -DDIFFATTN_CUDNN_LIB="$cudnn_lib" -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a >"$out/build.log" 2>&1 ||
  { tail -n 30 "$out/build.log"; exit 1; }
cmake --build build/gpu -j "$(nproc)" --target diffattn_cli >>"$out/build.log" 2>&1 ||
  { grep -E -A3 "error|FAILED" "$out/build.log" | head -n 60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
diffattn=build/gpu/bin/diffattn
fi
{
  echo "date_utc $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -n1)"
  echo "commit ${COMMIT:-unknown}"
  echo "torch $(python3 -c 'import torch; print(torch.__version__, "cudnn", torch.backends.cudnn.version())')"
} >"$out/env.txt"
"$diffattn" run "$@" --out-dir "$out/report" 2>&1 | tee "$out/terminal.txt"
python3 bench/peers.py --report "$out/report/report.json" | tee "$out/peers.txt"
