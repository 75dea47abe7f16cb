#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over small GPU tests that launch every diffattn CUDA
# kernel of TORCH_SDPA (tensor-core buckets, SIMT path) and CUDNN_ATTN (mask lengths, cuDNN graph).
# Run on the GPU machine after scripts/gpu_bench.sh has built build/device (or pass BUILD=dir).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${BUILD:-build/device}"
out="${OUT:-$build/out}"
mkdir -p "$out"
cudnn_dir="$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])')"
export LD_LIBRARY_PATH="$cudnn_dir/lib:${LD_LIBRARY_PATH:-}"
tests="$build/tests/diffattn_tests"
# Small shapes: every bucket and masked/causal tile path, the SIMT kernel, fully masked rows, cuDNN.
filter='GpuSdpaCuda.TensorCoreBuckets*:GpuSdpaCuda.FullyMasked*:GpuCudnnAttn.MatchesTheOracleOnDiTShapes:GpuCudnnAttn.MasksThatAreNot*'
status=0
for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool"
  if compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 "$tests" --gtest_filter="$filter" \
      >"$out/sanitize-$tool.log" 2>&1; then
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/sanitize-$tool.log" | tail -n 4
  else
    status=1
    tail -n 40 "$out/sanitize-$tool.log"
  fi
done
exit "$status"
