#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .devcarry/bundle.tar.xz (scripts/device/pack_prebuilt.sh)
# and the peers' wheels in .whl carried: FLASHINFER_ATTN's QK16/V8 GPU tests (and SAGE_ATTN's, whose
# kernel it shares), compute-sanitizer on them (SANITIZE=1), then (BENCH=1) the product benchmark
# with every peer for BACKENDS on BENCH_WORKLOADS. Everything goes to $OUT.
#   [TESTS=gtest-filter] [SANITIZE=1] [BENCH=1] [BACKENDS=A,B] [BENCH_WORKLOADS=a,b] scripts/device/qk16_round.sh
set -uo pipefail
out="${OUT:-build/round}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || exit 1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
filter="${TESTS:-GpuQk16V8.*:GpuSageAttn.*}"
if [ "$filter" != none ]; then
  echo "== GPU tests: $filter"
  timeout -s KILL "${TEST_TIMEOUT:-200}" $bd/tests/diffattn_tests --gtest_filter="$filter" >"$out/gpu-tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|\[qk16v8\]|Expected|Which is" "$out/gpu-tests.log" | head -n 60
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 $bd/tests/diffattn_tests \
      --gtest_filter='GpuQk16V8.FullyMasked*:GpuQk16V8.TheBackend*' >"$out/sanitize-$tool.log" 2>&1 && echo "== $tool clean" \
      || { echo "== $tool reported (exit $?)"; tail -n 20 "$out/sanitize-$tool.log"; }
  done
fi
if [ "${BENCH:-0}" = 1 ]; then
  echo "== product benchmark with peers"
  args=(--prebuilt "$bd" --no-tests --backends "${BACKENDS:-FLASH_ATTN,FLASHINFER_ATTN}")
  [ -n "${BENCH_WORKLOADS:-}" ] && args+=(--workloads "$BENCH_WORKLOADS")
  COMMIT="${COMMIT:-unknown}" timeout "${BENCH_TIMEOUT:-400}" scripts/gpu_bench.sh "${args[@]}" 2>&1 | tail -n 70
fi
exit 0
