#!/usr/bin/env bash
# Runs on the GPU machine: builds the GPU benchmark of two source trees (A = before, B = after) for
# this GPU only, then times the same backends from both, alternating A B A B so that clock drift
# over the job falls on both alike, and prints per-workload time ratios B/A (best of the two rounds).
#   scripts/device/compare_trees.sh DIR_A DIR_B [--backends A,B] [--tests] [--phase build|bench|all]
# (from the repo root; each tree needs build/_deps/py/include, as scripts/device/prepare.sh leaves it).
# --tests also runs B's GPU tests (GPU_TEST_FILTER and GPU_TEST_SECONDS narrow them); ROUNDS (default 2)
# and WORKLOADS (names from bench/workloads.csv) shape the timing. --phase splits the job into two calls under a per-call time limit.
# Results go to $OUT when set.
set -euo pipefail
a="$1"; b="$2"; shift 2
backends="FLASH_ATTN"; run_tests=0; phase=all
while [ $# -gt 0 ]; do
  case "$1" in
    --backends) backends="$2"; shift ;;
    --tests) run_tests=1 ;;
    --phase) phase="$2"; shift ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
out="${OUT:-build/compare}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
source scripts/device/env.sh
build_tree() {  # $1 source dir, $2 targets...
  local src="$1"; shift
  cmake -S "$src" -B "$src/build/cmp" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDIFFATTN_CUDNN_LIB="$cudnn_lib" \
    -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a >"$out/configure-$(basename "$src").log" 2>&1
  cmake --build "$src/build/cmp" -j 8 --target "$@" >"$out/build-$(basename "$src").log" 2>&1
}
if [ "$phase" != bench ]; then
targets_b=(gpu_attention_bench); [ "$run_tests" = 1 ] && targets_b+=(diffattn_tests)
build_tree "$a" gpu_attention_bench & pa=$!
build_tree "$b" "${targets_b[@]}" & pb=$!
wait $pa || { echo "build of $a failed"; tail -n 40 "$out/build-$(basename "$a").log"; exit 1; }
wait $pb || { echo "build of $b failed"; tail -n 40 "$out/build-$(basename "$b").log"; exit 1; }
echo "== built both trees"
if [ "$run_tests" = 1 ]; then
  timeout "${GPU_TEST_SECONDS:-1800}" "$b/build/cmp/tests/diffattn_tests" \
    --gtest_filter="${GPU_TEST_FILTER:-Gpu*:SdpaTileConfig*:SdpaPlan*:CudnnAttnChecks*}" >"$out/gpu-tests.log" 2>&1 || true
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure" "$out/gpu-tests.log" | tail -n 30
fi
fi
[ "$phase" = build ] && exit 0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for side in a b; do
    dir="$a"; [ "$side" = b ] && dir="$b"
    for be in ${backends//,/ }; do
      (cd "$dir" && build/cmp/bin/gpu_attention_bench --backends "$be" ${WORKLOADS:+--workloads "$WORKLOADS"} --json "$out/$side-$be-$round.json") \
        >"$out/bench-$side-$be-$round.log" 2>&1 || echo "bench $side $be round $round failed"
    done
  done
done
python3 - "$out" "$backends" <<'PY'
import json, sys, glob
out, backends = sys.argv[1], sys.argv[2].split(",")
def best(side, be):
    rows = {}
    for f in sorted(glob.glob(f"{out}/{side}-{be}-*.json")):
        for r in json.load(open(f))["rows"]:
            if r["error"] or r["ms"] <= 0: continue
            k = r["workload"]
            rows[k] = min(rows.get(k, 1e30), r["ms"])
    return rows
lines = ["| backend | workload | before ms | after ms | after/before |", "|---|---|---|---|---|"]
for be in backends:
    A, B = best("a", be), best("b", be)
    for w in A:
        if w in B:
            lines.append(f"| {be} | {w} | {A[w]:.3f} | {B[w]:.3f} | {B[w]/A[w]:.3f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/compare.md", "w").write(text + "\n")
PY
