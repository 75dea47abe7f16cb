#!/usr/bin/env bash
# Runs on a machine with 2 (or more) GPUs: builds diffattn for sm_90a with NCCL, runs the
# sequence-parallel GPU tests (two ranks over NCCL against one GPU, a killed rank, every mode as
# threads on one GPU, the merge kernel),
# then `diffattn run` on Wan2.1-14B self-attention with --ulysses 2 and --ring 2 at 480p and 720p
# (FLASH_ATTN; with 4 GPUs also --ulysses 4 and 2 x 2 at 720p), and writes logs, JSON and a summary table to $OUT (default build/parallel-check).
# One command, under 9 minutes on an H200 pair. Prepare and carry the tree as for the benchmark:
#   scripts/device/prepare.sh            # here: committed tree, cudnn-frontend headers, .devdeps
#   cd .export && scripts/device/parallel_check.sh   # on the GPU machine
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-build/parallel-check}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
start=$(date +%s)
source scripts/device/env.sh
gpus=$(nvidia-smi --list-gpus | wc -l)
{ echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"; echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}";
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; nvidia-smi topo -m; } \
  >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
[ "$gpus" -ge 2 ] || { echo "needs 2 GPUs, found $gpus"; exit 1; }

# NCCL: the toolkit's, else the nvidia-nccl wheel's (its library has no unversioned name: link one).
nccl_args=()
if ! ls /usr/local/cuda/lib*/libnccl.so >/dev/null 2>&1; then
  nccl_dir="$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null || true)"
  if [ -n "$nccl_dir" ]; then
    mkdir -p build/nccl/lib && ln -sf "$(ls "$nccl_dir"/lib/libnccl.so* | head -n1)" build/nccl/lib/libnccl.so
    rm -rf build/nccl/include && ln -sf "$nccl_dir/include" build/nccl/include
    nccl_args=(-DDIFFATTN_NCCL_ROOT="$PWD/build/nccl")
    export LD_LIBRARY_PATH="$nccl_dir/lib:$LD_LIBRARY_PATH"
  fi
fi

echo "== configure and build ($(nproc) cores)"
cmake -S . -B build/sp -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" \
  -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a -DDIFFATTN_BUILD_BENCH=OFF "${nccl_args[@]}" \
  >"$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log"; exit 1; }
grep -E "NCCL" "$out/configure.log"
grep -q "NCCL found" "$out/configure.log" || { echo "NCCL was not found: no multi-GPU build"; exit 1; }
timeout 330 cmake --build build/sp -j "$(nproc)" --target diffattn_tests diffattn_cli >"$out/build.log" 2>&1 ||
  { grep -E -A3 "error|FAILED" "$out/build.log" | head -n 60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

echo "== GPU tests of sequence parallelism"
timeout 150 build/sp/tests/diffattn_tests --gtest_filter='GpuNccl*:GpuInProcess*:GpuPartialMerge*:SequenceParallel*:InProcessCommunicator*:Launcher*' \
  >"$out/tests.log" 2>&1
echo "tests exit $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED|  OK) |^\[==========\]|Failure|Expected|Which is|error" "$out/tests.log" | head -n 60

echo "== diffattn run across 2 GPUs (FLASH_ATTN, Wan2.1-14B)"
summary="$out/summary.md"
echo "| resolution | mode | role | tokens | 1 GPU ms | per-rank ms | speedup | efficiency | relL2 vs 1 GPU |" >"$summary"
echo "|---|---|---|---|---|---|---|---|---|" >>"$summary"
# With 4 GPUs, 720p also runs on all four (the issue's 4-GPU goal), time permitting.
runs=("480 832|--ulysses 2" "480 832|--ring 2" "720 1280|--ulysses 2" "720 1280|--ring 2")
[ "$gpus" -ge 4 ] && runs+=("720 1280|--ulysses 4" "720 1280|--ulysses 2 --ring 2")
for entry in "${runs[@]}"; do
  res="${entry%%|*}"; mode="${entry#*|}"
  set -- $res
  {
    tag="${1}p-$(echo "$mode" | tr -d ' -')"
    left=$(( 530 - ($(date +%s) - start) ))
    if [ "$left" -le 30 ]; then echo "skipping $tag: time budget spent"; continue; fi
    timeout "$left" build/sp/bin/diffattn run --model wan2.1-14b --height "$1" --width "$2" --num-frames 81 \
      --diffusion-attention-backend FLASH_ATTN $mode --layers 1 --warmup 2 --repeats 5 --json \
      >"$out/run-$tag.json" 2>"$out/run-$tag.log"
    echo "$tag exit $?"; tail -n 3 "$out/run-$tag.log"
    python3 - "$out/run-$tag.json" "${1}p" "$mode" >>"$summary" <<'PY' || echo "no JSON from $tag"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["roles"]:
    if "rank_ms" not in r:
        continue
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['role']} | {r['image_tokens']}+{r['text_tokens']} | {r['single_rank_ms']:.2f} | "
          + " ".join(f"{x:.2f}" for x in r["rank_ms"])
          + f" | {r['speedup']:.2f}x | {100 * r['efficiency']:.1f} % | {r['rel_l2']:.2e} |")
PY
  }
done
cat "$summary"
echo "total $(( $(date +%s) - start )) s; results in $out"
