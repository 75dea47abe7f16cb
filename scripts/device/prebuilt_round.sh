#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# and the peers' wheels in .whl carried: SAGE_ATTN's GPU tests, dev/sage_time, an ncu summary of the
# kernels of one SAGE call per workload of NCU_WORKLOAD (comma-separated), then (BENCH=1) the product
# benchmark with its peers for BACKENDS, and (OVERHEAD=1) the Python per-call overhead on CUDA
# tensors. Everything goes to $OUT.
#   [SAGE_FILTER=a,b] [NCU_WORKLOAD=a,b] [BENCH=1] [BENCH_WORKLOADS=a,b] [OVERHEAD=1] scripts/device/prebuilt_round.sh
# SAGE_FILTER: the workloads (name substrings) dev/sage_time times, all by default, `none` for none;
# SAGE_WORKLOADS=FILE, which dev/sage_time reads from the environment, replaces bench/workloads.csv.
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_dir="$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)" && export LD_LIBRARY_PATH="$nccl_dir/lib:$LD_LIBRARY_PATH"
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "== SAGE tests"
timeout -s KILL 150 $bd/tests/diffattn_tests --gtest_filter="${TESTS:-GpuSageAttn*:*Sage*}" >"$out/sage-tests.log" 2>&1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|\[  SAGE|Expected|Which is" "$out/sage-tests.log" | head -n 60
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 $bd/tests/diffattn_tests \
      --gtest_filter="${SANITIZE_TESTS:-GpuSageAttn.FullyMasked*}" >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; tail -n 20 "$out/sanitize-$tool.log"; }
  done
fi
echo "== sage_time"
timeout -s KILL 200 $bd/sage_time "${SAGE_FILTER:-}" "${SAGE_ROUNDS:-5}" 2>&1 | tee "$out/sage-time.txt"
for w in ${NCU_WORKLOAD:+${NCU_WORKLOAD//,/ }}; do
  echo "== ncu: the kernels of one call on $w"
  timeout 150 ncu --clock-control none --print-summary per-kernel $bd/sage_time "$w" 1 ${NCU_MODES:-} >"$out/ncu-$w.txt" 2>&1
  grep -E "sage_|flash|Duration|^  [a-z_]+.*\(" "$out/ncu-$w.txt" | grep -E "sage_|flash|Duration" | head -n 60
done
if [ "${OVERHEAD:-0}" = 1 ]; then
  echo "== Python per-call overhead, CUDA tensors"
  DIFFATTN_LIBRARY="$PWD/$bd/src/libdiffattn.so" PYTHONPATH="$PWD/python:$PYTHONPATH" timeout 150 \
    python3 python/bench/overhead.py --device cuda 2>&1 | tee "$out/overhead-cuda.txt"
fi
if [ "${BENCH:-0}" = 1 ]; then
  echo "== product benchmark with peers"
  args=(--prebuilt "$bd" --no-tests --backends "${BACKENDS:-FLASH_ATTN,SAGE_ATTN}")
  [ -n "${BENCH_WORKLOADS:-}" ] && args+=(--workloads "$BENCH_WORKLOADS")
  COMMIT="${COMMIT:-unknown}" timeout 400 scripts/gpu_bench.sh "${args[@]}" 2>&1 | tail -n 60
fi
exit 0
