# Sourced from the repository root by the scripts that run on the GPU machine: installs the build
# dependencies carried in .devdeps/ (if any), puts PyTorch's cuDNN and the CUDA runtime on the
# library path, and sets cudnn_lib to the cuDNN library diffattn links against there.
if [ -d .devdeps ]; then
  cp -r --update=none .devdeps/usr/. /usr/ 2>/dev/null || cp -rn .devdeps/usr/. /usr/
fi
cudnn_dir="$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])')"
export LD_LIBRARY_PATH="$cudnn_dir/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cudnn_lib="$(ls "$cudnn_dir"/lib/libcudnn.so* | head -n1)"

# The GPU tests of $TESTS (if set) from the bundle's test binary in $1, logged to $2/tests.log, then
# the back-to-back test of dependent launches again with them turned off.
run_gpu_tests() {
  [ -n "${TESTS:-}" ] || return 0
  echo "== tests: $TESTS"
  timeout -s KILL 240 "$1"/tests/diffattn_tests --gtest_filter="$TESTS" >"$2/tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|differs" "$2/tests.log" | head -n 40
  echo "== the back-to-back test with plain launches"
  DIFFATTN_DEPENDENT_LAUNCH=0 timeout -s KILL 120 "$1"/tests/diffattn_tests \
    --gtest_filter='*DependentLaunch*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |differs" | head
}

# compute-sanitizer's tools $4 (default: memcheck racecheck) over the tests matching $2 of the
# bundle's test binary in $1, each logged to $3/sanitize-TOOL.log, with a timeout of $5 seconds
# (default 200); prints each tool's verdict and summary. The caller packs its logs afterwards.
run_sanitizers() {
  local tool
  for tool in ${4:-memcheck racecheck}; do
    timeout "${5:-200}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$1"/tests/diffattn_tests \
      --gtest_filter="$2" >"$3/sanitize-$tool.log" 2>&1 \
      && echo "== $tool clean" || { echo "== $tool reported (exit $?)"; tail -n 20 "$3/sanitize-$tool.log"; }
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$3/sanitize-$tool.log" | tail -n 3
  done
}

# The start of a round script whose logs go to $out/r and, packed, to $out/logs.tar.gz: sets out
# ($OUT, default build/round, made absolute) and bd (build/pre, where the carried
# .devcarry/bundle.tar.xz is unpacked), and writes the GPU's name, clock and driver to
# $out/r/gpu.txt. pack_logs rewrites the tarball (after each step, so a job cut short keeps what ran).
round_start() {
  out="${OUT:-build/round}"; mkdir -p "$out/r"; out="$(cd "$out" && pwd)"
  bd=build/pre; mkdir -p "$bd" && tar -xJf .devcarry/bundle.tar.xz -C "$bd" || return 1
  nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee "$out/r/gpu.txt"
}
pack_logs() { tar -czf "$out/logs.tar.gz" -C "$out" r; }

# The product benchmark (scripts/gpu_bench.sh) on the bundle's binaries in $bd with every peer whose
# wheel is carried in .whl: BACKENDS (default FLASH_ATTN, SAGE_ATTN, FLASHINFER_ATTN) on
# BENCH_WORKLOADS (default: all), under a timeout of $1 seconds, its last $2 lines printed; the table
# goes to $out/r and is copied to $out.
product_bench_with_peers() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  echo "== product benchmark with peers"
  local args=(--prebuilt "$bd" --no-tests --backends "${BACKENDS:-FLASH_ATTN,SAGE_ATTN,FLASHINFER_ATTN}")
  [ -n "${BENCH_WORKLOADS:-}" ] && args+=(--workloads "$BENCH_WORKLOADS")
  [ -n "${BENCH_WARMUP_MS:-}" ] && args+=(--warmup-ms "$BENCH_WARMUP_MS")
  OUT="$out/r" COMMIT="${COMMIT:-unknown}" timeout "$1" scripts/gpu_bench.sh "${args[@]}" 2>&1 | tail -n "$2"
  cp "$out"/r/gpu-*.md "$out/" 2>/dev/null
}
