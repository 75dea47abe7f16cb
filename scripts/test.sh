#!/usr/bin/env bash
# The whole test suite: build, unit/conformance/parity tests (GPU tests skip without a GPU), the
# installed package built against from outside the tree, the Python package (scripts/test_python.sh),
# the concurrency tests under ThreadSanitizer, the whole CPU suite under AddressSanitizer and
# UndefinedBehaviorSanitizer, and a bounded libFuzzer run of the parsers (from the same sanitizer build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${PRESET:-default}"
fuzz_seconds="${FUZZ_SECONDS:-30}"

scripts/build.sh
ctest --preset "$preset" -j "$(nproc)"

echo "== the installed package, used by a project outside the tree"
PRESET="$preset" scripts/check_consumer.sh

echo "== the Python package (NumPy, PyTorch and diffusers on the CPU; a fresh virtual environment)"
scripts/test_python.sh "$preset"

echo "== concurrency tests under ThreadSanitizer (the selection core alone)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target diffattn_tests
TSAN_OPTIONS="halt_on_error=1" build/tsan/tests/diffattn_tests --gtest_filter='*Concurren*:*Thread*'

echo "== the whole CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer"
# One build serves the suite and the fuzz targets; any report, leaks and undefined behaviour included, fails.
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j "$(nproc)"

echo "== fuzzing the parsers (${fuzz_seconds}s each, $(nproc) at a time)"
# Runs one target for its time budget; on a crash or hang prints its log's tail and fails.
fuzz_target() {
  local target="$1" name
  name="$(basename "$target")"
  local work="build/asan/corpus-$name" log="build/asan/$name.log"
  mkdir -p "$work"
  if ! "$target" -max_total_time="$fuzz_seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix=build/asan/ "$work" "fuzz/corpus/$name" >"$log" 2>&1; then
    echo "== $name found an input that crashes or hangs (saved under build/asan/):"
    tail -n 60 "$log"
    return 1
  fi
  echo "-- $name: $(tail -n 3 "$log" | tr '\n' ' ')"
}
export -f fuzz_target
export fuzz_seconds
targets=()
for target in build/asan/fuzz/fuzz_*; do [ -x "$target" ] && targets+=("$target"); done
if [ "${#targets[@]}" -gt 0 ] && ! printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_target "$1"' _ {}; then
  echo "== fuzzing found a crash or a hang (above)" >&2
  exit 1
fi
echo "== all tests passed"
