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
#                                                               # on the GPU machine
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
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) run_tests=0 ;;
    --workloads|--backends|--iters|--warmup|--sets) bench_args+=("$1" "$2"); shift ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done

out="${OUT:-build/device/out}"
mkdir -p "$out"
[ -d .devdeps ] && cp -r --update=none .devdeps/usr/. /usr/ 2>/dev/null || cp -rn .devdeps/usr/. /usr/
cudnn_dir="$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])')"
export LD_LIBRARY_PATH="$cudnn_dir/lib:${LD_LIBRARY_PATH:-}"
cudnn_lib="$(ls "$cudnn_dir"/lib/libcudnn.so* | head -n1)"

# Compile for this GPU only: a third of the nvcc work of the portable build.
gencode=()
if [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1)" = "9.0" ]; then
  gencode=(-DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a)
fi
cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" "${gencode[@]}" \
  >"$out/configure.log" 2>&1 ||
  { tail -n 30 "$out/configure.log"; exit 1; }
targets=(gpu_attention_bench)
[ "$run_tests" = 1 ] && targets+=(diffattn_tests)
cmake --build build/device -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
  { grep -E "error|Error" "$out/build.log" | head -n 40; exit 1; }

if [ "$run_tests" = 1 ]; then
  build/device/tests/diffattn_tests --gtest_filter='Gpu*:SdpaTileConfig*:SdpaPlan*:CudnnAttnChecks*' \
    2>&1 | tee "$out/gpu_tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error" || true
fi

driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
date_tag="$(date -u +%Y-%m-%d)"
set -o pipefail
build/device/bin/gpu_attention_bench --json "$out/ours.json" "${bench_args[@]}" 2>&1 | tee "$out/bench.log"
peer_args=()
for ((i = 0; i < ${#bench_args[@]}; i += 2)); do
  case "${bench_args[i]}" in --workloads|--backends) continue ;; esac
  peer_args+=("${bench_args[i]}" "${bench_args[i + 1]}")
done
mkdir -p bench/results
PYTHONUNBUFFERED=1 python3 bench/peers.py --ours "$out/ours.json" --out "bench/results/gpu-$date_tag.md" \
  --commit "${COMMIT:-unknown}" --driver "$driver" "${peer_args[@]}" >"$out/peers.log" 2>&1 ||
  { tail -n 30 "$out/peers.log"; exit 1; }
cp "bench/results/gpu-$date_tag.md" "$out/"
cat "bench/results/gpu-$date_tag.md"
