#!/usr/bin/env bash
# Here (the build machine): packs the default preset's GPU-facing binaries into
# .devcarry/bundle.tar.xz for scripts/device/prebuilt_round.sh, so that a GPU call spends no device
# time compiling. Builds dev/sage_time beside them. Carry .devcarry (and .whl for the peers).
# KEEP_BASE=1: the sage_time of the bundle this one replaces goes in as sage_time_base, so that
# scripts/device/ab_round.sh times a change against the tree packed before it in one job.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bd=build/default
cmake --build --preset default -j "$(nproc)" --target diffattn_tests gpu_attention_bench gpu_sparse_bench gpu_sparse_paths_bench gpu_mask_bench diffattn \
  diffattn_shared 2>/dev/null ||
  cmake --build --preset default -j "$(nproc)"
nvcc -std=c++20 -O3 -Iinclude -Isrc -DDIFFATTN_HAVE_CUDA=1 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -x cu -c dev/sage_time.cc -o "$bd/sage_time.o"
nvcc "$bd/sage_time.o" -o "$bd/sage_time" "$bd/src/libdiffattn_kernels.a" "$bd/src/libdiffattn_core.a" -lcuda
mkdir -p .devcarry
grep -qx "/.devcarry/" .git/info/exclude || echo "/.devcarry/" >> .git/info/exclude
base=()
if [ "${KEEP_BASE:-0}" = 1 ]; then
  [ -f .devcarry/bundle.tar.xz ] || { echo "KEEP_BASE=1: no earlier .devcarry/bundle.tar.xz to take sage_time from" >&2; exit 1; }
  tar -xJOf .devcarry/bundle.tar.xz sage_time > "$bd/sage_time_base" && chmod +x "$bd/sage_time_base"
  base=(sage_time_base)
fi
tar -C "$bd" -cf - tests/diffattn_tests bin/gpu_attention_bench bin/gpu_sparse_bench bin/gpu_sparse_paths_bench bin/gpu_mask_bench \
  bin/diffattn sage_time "${base[@]}" \
  $(cd "$bd" && ls src/libdiffattn.so*) | xz -T"$(nproc)" --lzma2=preset=6,dict=192MiB > .devcarry/bundle.tar.xz
echo "packed $(du -h .devcarry/bundle.tar.xz | cut -f1) from $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty')"
