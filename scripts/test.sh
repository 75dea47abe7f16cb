#!/usr/bin/env bash
# The whole test suite: build, unit/conformance/parity tests (GPU tests skip without a GPU), the
# installed package built against from outside the tree, the concurrency tests under
# ThreadSanitizer, and a bounded libFuzzer run of the configuration parsers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${PRESET:-default}"
fuzz_seconds="${FUZZ_SECONDS:-30}"

scripts/build.sh
ctest --preset "$preset" -j "$(nproc)"

echo "== the installed package, used by a project outside the tree"
PRESET="$preset" scripts/check_consumer.sh

echo "== concurrency tests under ThreadSanitizer (the selection core alone)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target diffattn_tests
TSAN_OPTIONS="halt_on_error=1" build/tsan/tests/diffattn_tests --gtest_filter='*Concurren*:*Thread*'

echo "== fuzzing the configuration parsers (${fuzz_seconds}s each)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
for target in build/fuzz/fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  corpus="fuzz/corpus/$(basename "$target")"
  work="build/fuzz/corpus-$(basename "$target")"
  mkdir -p "$work"
  log="build/fuzz/$(basename "$target").log"
  if ! "$target" -max_total_time="$fuzz_seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix=build/fuzz/ "$work" "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "== $(basename "$target") found an input that crashes or hangs (saved under build/fuzz/)" >&2
    exit 1
  fi
  tail -n 3 "$log"
done
echo "== all tests passed"
