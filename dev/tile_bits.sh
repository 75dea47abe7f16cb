#!/usr/bin/env bash
# Are the CPU tiled kernel's results bit-identical between commit $1 (default HEAD~1) and the work
# tree? Builds dev/tile_bits.cc against each version's kernels/cpu sources (the rest from the work
# tree's build/cpu libraries: run `cmake --build --preset cpu` first) and compares the hashes.
set -euo pipefail
base=${1:-HEAD~1}
root=$(git rev-parse --show-toplevel)
out=$root/build/dev/tile_bits
rm -rf "$out" && mkdir -p "$out/src_old/kernels/cpu"
for f in dense_tile_impl.h dense_tile_params.h sdpa_cpu.cc sdpa_cpu.h dense_tile_portable.cc dense_tile_avx2.cc \
         dense_tile_avx512.cc; do
  git -C "$root" show "$base:src/kernels/cpu/$f" > "$out/src_old/kernels/cpu/$f"
done
build() {  # $1 = name, $2 = folder holding kernels/cpu, $3 = extra include placed first
  local flags="-DDIFFATTN_HAVE_CUDA=0 $3 -I$root/include -I$root/src -I$root/tests -O3 -DNDEBUG -fopenmp -std=gnu++20"
  local cpu=$2/kernels/cpu o=$out/$1
  c++ $flags -c "$cpu/sdpa_cpu.cc" -o "$o.sdpa.o"
  c++ $flags -c "$cpu/dense_tile_portable.cc" -o "$o.portable.o"
  c++ $flags -mavx2 -mfma -mf16c -c "$cpu/dense_tile_avx2.cc" -o "$o.avx2.o"
  c++ $flags -mavx512f -mfma -mf16c -c "$cpu/dense_tile_avx512.cc" -o "$o.avx512.o"
  c++ $flags -c "$root/src/kernels/cpu/score_range.cc" -o "$o.score_range.o"
  c++ $flags -c "$root/dev/tile_bits.cc" -o "$o.driver.o"
  c++ -fopenmp "$o".*.o "$root/build/cpu/src/libdiffattn_core.a" -o "$o"
}
build old "$out/src_old" "-I$out/src_old"
build new "$root/src" ""
old=$("$out/old" | tail -1)
new=$("$out/new" | tail -1)
echo "$base: $old"
echo "work tree: $new"
[ "$old" = "$new" ] && echo "bit-identical" || { echo "DIFFERENT"; exit 1; }
