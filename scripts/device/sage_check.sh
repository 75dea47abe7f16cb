#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: builds the tests for sm_90a, runs SAGE_ATTN's
# GPU tests (and FLASH_ATTN's quick ones beside them), then times SAGE_ATTN against FLASH_ATTN on
# the workloads (dev/sage_time.cc). SAGE_WORKLOADS narrows the timing (a substring of the names);
# SANITIZE=1 adds compute-sanitizer memcheck and racecheck of the SAGE tests. Results go to $OUT.
set -euo pipefail
out="${OUT:-build/sage-check}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd="${SAGE_BUILD:-build/sage}"  # an existing sm_90a build tree (e.g. build/sp) is reused as it stands
if [ ! -x "$bd/tests/diffattn_tests" ]; then
cmake -S . -B build/sage -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" \
  -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a >"$out/configure.log" 2>&1
cmake --build build/sage -j "$(nproc)" --target diffattn_tests >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
echo "== built"
fi
{ nvcc -std=c++20 -O2 -Iinclude -Isrc -DDIFFATTN_HAVE_CUDA=1 -x cu -c dev/sage_time.cc -o "$bd/sage_time.o" &&
  nvcc $bd/sage_time.o -o $bd/sage_time $bd/src/libdiffattn_kernels.a $bd/src/libdiffattn_core.a -lcuda; } \
  >"$out/sage_time_build.log" 2>&1 || { tail -n 30 "$out/sage_time_build.log"; echo "sage_time did not build"; }
timeout -s KILL 150 $bd/tests/diffattn_tests --gtest_filter='GpuSageAttn*:SageAttn*:*Sage*' >"$out/sage-tests.log" 2>&1 || true
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|\[sage\]|Expected|Which is|seed" "$out/sage-tests.log" | head -n 80
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 $bd/tests/diffattn_tests \
      --gtest_filter='GpuSageAttn.FullyMasked*' >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; tail -n 30 "$out/sanitize-$tool.log"; }
  done
fi
[ -x $bd/sage_time ] && timeout -s KILL 150 $bd/sage_time "${SAGE_WORKLOADS:-}" "${SAGE_ROUNDS:-5}" 2>&1 | tee "$out/sage-time.txt"
exit 0
