#!/usr/bin/env bash
# Builds diffattn on the GPU machine, runs the GPU tests, then the GPU benchmark and PyTorch's SDPA
# (FLASH_ATTENTION and CUDNN_ATTENTION pinned) on the same workloads and data, and writes one table
# with ratios to bench/results/gpu-<date>.md (and to $OUT when set).
#
# The device image lacks some build dependencies: carry them in .devdeps/ (filled here with
# `scripts/gpu_bench.sh --pack-deps`) together with build/_deps/py/include.
#
#   scripts/gpu_bench.sh --pack-deps            # on the build machine
#   COMMIT=<sha> scripts/gpu_bench.sh [--no-tests] [--workloads a,b] [--backends A,B] [--iters N]
#                                     [--warmup-ms N] [--rest-ms N] [--prebuilt DIR] [--graph]   # on the GPU machine
# --prebuilt DIR runs binaries built elsewhere (DIR/bin, DIR/tests) instead of building here.
# --graph times diffattn's backends by replaying captured CUDA graphs (no per-call host work; the
# peers are timed as always). The SM clock, power and temperature before each phase go to the logs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" = "--pack-deps" ]; then
  rm -rf .devdeps && mkdir -p .devdeps/usr/include .devdeps/usr/local/include \
    .devdeps/usr/lib/x86_64-linux-gnu/cmake .devdeps/usr/share/cmake
  cp -r /usr/include/gtest /usr/include/gmock /usr/include/nlohmann /usr/include/dlpack .devdeps/usr/include/
  cp /usr/local/cuda/include/cudnn*.h .devdeps/usr/local/include/
  cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a .devdeps/usr/lib/x86_64-linux-gnu/
  cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest .devdeps/usr/lib/x86_64-linux-gnu/cmake/
  cp -r /usr/share/cmake/nlohmann_json .devdeps/usr/share/cmake/
  grep -qx "/.devdeps/" .git/info/exclude || echo "/.devdeps/" >> .git/info/exclude
  echo "packed $(du -sh .devdeps | cut -f1) into .devdeps/; carry .devdeps and build/_deps/py/include"
  exit 0
fi

run_tests=1
only=""
prebuilt=""
bench_args=()
graph_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) run_tests=0 ;;
    --backends) only="$2"; shift ;;
    --prebuilt) prebuilt="$2"; shift ;;
    --workloads|--iters|--warmup|--warmup-ms|--sets|--rest-ms) bench_args+=("$1" "$2"); shift ;;
    --graph) graph_args=(--graph) ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done

# Logs and intermediate files stay in build/device/out; $OUT (when set) gets the table, the merged
# JSON and the logs, since only a few files come back from the GPU machine.
work=build/device/out
mkdir -p "$work"
source scripts/device/env.sh

build=build/device
if [ -n "$prebuilt" ]; then
  build="$prebuilt"
else
  # Compile for this GPU only: a third of the nvcc work of the portable build.
  gencode=()
  if [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1)" = "9.0" ]; then
    gencode=(-DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a)
  fi
  echo "== configure and build ($(nproc) cores)"
  cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" "${gencode[@]}" \
    >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log"; exit 1; }
  targets=(gpu_attention_bench)
  [ "$run_tests" = 1 ] && targets+=(diffattn_tests)
  cmake --build build/device -j "$(nproc)" --target "${targets[@]}" >"$work/build.log" 2>&1 ||
    { grep -E -A3 "error|FAILED" "$work/build.log" | head -n 60; [ -n "${OUT:-}" ] && cp "$work/build.log" "$OUT/"; exit 1; }
fi

if [ "$run_tests" = 1 ]; then
  echo "== GPU tests"
  "$build/tests/diffattn_tests" --gtest_filter='Gpu*:SdpaTileConfig*:SdpaPlan*:CudnnAttnChecks*' \
    >"$work/gpu_tests.log" 2>&1 || true
  grep -E "^\[  (FAILED|PASSED|SKIPPED|NOTE) |^\[==========\]|Failure|Expected|Which is|error" "$work/gpu_tests.log" | head -n 60
fi

echo "== benchmark: each backend in its own process"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
date_tag="$(date -u +%Y-%m-%d)"
jsons=()
clocks() {  # SM clock, power and temperature before a phase: a throttled GPU shows here
  echo "$1: $(nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | head -n1)" \
    >>"$work/clocks.log"
}
rm -f "$work/clocks.log"
# A timeline of the same, every 250 ms, to set beside the benchmark rows' wall-clock times.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 250 \
  >"$work/clock-timeline.csv" 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT
for backend in $("$build/bin/gpu_attention_bench" --list); do
  if [ -n "$only" ]; then case ",$only," in *",$backend,"*) ;; *) continue ;; esac; fi
  clocks "before $backend"
  # The tree's own workloads file: a prebuilt binary's default path is where it was configured.
  if "$build/bin/gpu_attention_bench" --workloads-file bench/workloads.csv --backends "$backend" \
      --json "$work/ours-$backend.json" "${bench_args[@]}" \
      "${graph_args[@]}" \
      >"$work/bench-$backend.log" 2>&1; then
    jsons+=("$work/ours-$backend.json")
  else
    echo "gpu_attention_bench for $backend failed:"
  fi
  tail -n 20 "$work/bench-$backend.log"
done
peer_args=()
for ((i = 0; i < ${#bench_args[@]}; i += 2)); do
  [ "${bench_args[i]}" = "--workloads" ] && continue
  peer_args+=("${bench_args[i]}" "${bench_args[i + 1]}")
done
mkdir -p bench/results
echo "== PyTorch peers on the same data"
clocks "before the peers"
PYTHONUNBUFFERED=1 python3 bench/peers.py --ours "${jsons[@]}" --out "bench/results/gpu-$date_tag.md" \
  --commit "${COMMIT:-unknown}" --driver "$driver" "${peer_args[@]}" >"$work/peers.log" 2>&1 ||
  { tail -n 30 "$work/peers.log"; exit 1; }
cat "bench/results/gpu-$date_tag.md"
if [ -n "${OUT:-}" ]; then
  cp "bench/results/gpu-$date_tag.md" "$OUT/"
  cat "$work"/ours-*.json >"$OUT/ours.json"
  cat "$work/gpu_tests.log" "$work"/bench-*.log "$work/peers.log" "$work/clocks.log" >"$OUT/logs.txt" 2>/dev/null || true
  cp "$work/clock-timeline.csv" "$OUT/" 2>/dev/null || true
fi
