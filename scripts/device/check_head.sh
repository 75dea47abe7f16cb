#!/usr/bin/env bash
# On the GPU machine, from a tree made by scripts/device/prepare.sh: builds the full library, the
# tests, the command-line tool and the GPU benchmark (sm_90a SASS plus compute_80 PTX), runs every
# test, runs FLASH_ATTN's Ampere/Ada kernel from its compute_80 PTX (CUDA_FORCE_PTX_JIT=1), the
# workload comparison of tests/runner/gpu_compare.sh with the given run flags, and then (with
# BENCH=1) the GPU benchmark with its PyTorch peers. Everything lands in $OUT as one archive.
#   cd .export && COMMIT=<sha> OUT=... [BENCH=1] [PREBUILT=DIR] scripts/device/check_head.sh RUN-FLAGS...
# PREBUILT=DIR uses binaries built elsewhere from this same tree (DIR/bin, DIR/tests) instead of
# building here; the tests find their data and the tool through the paths they were built with.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-build/check-head}"
mkdir -p "$out"
source scripts/device/env.sh
build="${PREBUILT:-build/check}"
if [ -z "${PREBUILT:-}" ]; then
  start=$(date +%s)
  cmake -S . -B build/check -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" \
    "-DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_80,code=compute_80;-gencode=arch=compute_90a,code=sm_90a" \
    >"$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log"; exit 1; }
  cmake --build build/check -j "$(nproc)" --target diffattn_tests diffattn_cli gpu_attention_bench \
    >"$out/build.log" 2>&1 || { grep -E -A3 "error|FAILED" "$out/build.log" | head -n 60; exit 1; }
  echo "== built in $(( $(date +%s) - start )) s"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"

echo "== every test (GPU tests run here)"
"$build/tests/diffattn_tests" >"$out/tests.log" 2>&1
echo "exit $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is" "$out/tests.log" | head -n 40

echo "== FLASH_ATTN's Ampere/Ada kernel from compute_80 PTX (CUDA_FORCE_PTX_JIT=1)"
CUDA_FORCE_PTX_JIT=1 timeout 300 "$build/tests/diffattn_tests" \
  --gtest_filter='GpuFlashAttn.AmpereKernel*:GpuSdpaCuda.*' >"$out/tests-ptx-jit.log" 2>&1
echo "exit $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[       OK|^\[==========\]|Failure|Expected|Which is" "$out/tests-ptx-jit.log" | head -n 30

echo "== workload comparison"
DIFFATTN_BIN="$build/bin/diffattn" OUT="$out/compare" tests/runner/gpu_compare.sh "$@"

if [ "${BENCH:-0}" = 1 ]; then
  echo "== GPU benchmark with PyTorch peers"
  OUT="$out" scripts/gpu_bench.sh --prebuilt "$build" --no-tests
fi
# Few files come back from the GPU machine: everything travels as one archive next to this log.
tar -C "$out" -czf /tmp/check-head.tgz . && rm -rf "${out:?}"/* && mv /tmp/check-head.tgz "$out/"
