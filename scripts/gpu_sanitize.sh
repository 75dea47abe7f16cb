#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over small GPU tests that launch every diffattn CUDA
# kernel: the GPU parity harness (every backend on the parity cases, fully masked rows, refusals,
# graph replay), TORCH_SDPA's tensor-core buckets and CUDNN_ATTN's mask lengths and cuDNN graph.
# Run on the GPU machine after scripts/gpu_bench.sh has built build/device (or pass BUILD=dir).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${BUILD:-build/device}"
out="${OUT:-$build/out}"
mkdir -p "$out"
source scripts/device/env.sh
tests="$build/tests/diffattn_tests"
# Small shapes that launch every tensor-core bucket (masked, causal and boundary tiles), the SIMT
# kernel (float32 and odd head sizes of the parity cases), the key-padding length kernel and
# cuDNN's graph.
filter='GpuParity.*:GpuSdpaCuda.TensorCoreBuckets*:GpuCudnnAttn.MatchesTheOracleOnDiTShapes:GpuCudnnAttn.MasksThatAreNot*'
limit="${SANITIZE_SECONDS:-300}"
status=0
for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool"
  if timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 "$tests" \
      --gtest_filter="$filter" >"$out/sanitize-$tool.log" 2>&1; then
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/sanitize-$tool.log" | tail -n 4
  else
    status=1
    tail -n 40 "$out/sanitize-$tool.log"
  fi
done
exit "$status"
