#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: builds the tests for sm_90a, runs SAGE_ATTN's
# GPU tests (and FLASH_ATTN's quick ones beside them), then times SAGE_ATTN against FLASH_ATTN on
# the workloads (dev/sage_time.cc). SAGE_WORKLOADS narrows the timing (a substring of the names);
# SANITIZE=1 adds compute-sanitizer memcheck and racecheck of the SAGE tests. Results go to $OUT.
set -euo pipefail
out="${OUT:-build/sage-check}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
cmake -S . -B build/sage -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" \
  -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a >"$out/configure.log" 2>&1
cmake --build build/sage -j 16 --target diffattn_tests >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
echo "== built"
{ nvcc -std=c++20 -O2 -Iinclude -Isrc -DDIFFATTN_HAVE_CUDA=1 -x cu -c dev/sage_time.cc -o build/sage/sage_time.o &&
  nvcc build/sage/sage_time.o -o build/sage/sage_time build/sage/src/libdiffattn_kernels.a build/sage/src/libdiffattn_core.a -lcuda; } \
  >"$out/sage_time_build.log" 2>&1 || { tail -n 30 "$out/sage_time_build.log"; echo "sage_time did not build"; }
timeout -s KILL 150 build/sage/tests/diffattn_tests --gtest_filter='GpuSageAttn*:SageAttn*:*Sage*' >"$out/sage-tests.log" 2>&1 || true
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|\[sage\]|Expected|Which is|seed" "$out/sage-tests.log" | head -n 80
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 build/sage/tests/diffattn_tests \
      --gtest_filter='GpuSageAttn.FullyMasked*' >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; tail -n 30 "$out/sanitize-$tool.log"; }
  done
fi
[ -x build/sage/sage_time ] && timeout -s KILL 150 build/sage/sage_time "${SAGE_WORKLOADS:-}" "${SAGE_ROUNDS:-5}" 2>&1 | tee "$out/sage-time.txt"
exit 0
