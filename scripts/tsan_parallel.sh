#!/usr/bin/env bash
# The sequence-parallel CPU tests (tests/parallel/) under ThreadSanitizer: the in-process ranks are
# threads. The tsan preset builds the selection core only, so this builds the layers the tests need
# (core, kernels, backends, parallel) with TSan in build/tsan-sp and links the tests against them.
# OMP_NUM_THREADS=1: libgomp/libomp are not instrumented, and the ranks' own threads are what matter.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=build/tsan-sp
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDIFFATTN_ENABLE_CUDA=OFF -DDIFFATTN_SANITIZE=thread \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DDIFFATTN_BUILD_BENCH=OFF -DDIFFATTN_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target diffattn_parallel diffattn_backends
lib="$build/src"
clang++-14 -std=c++20 -fsanitize=thread -fopenmp=libomp -g -O1 -Iinclude -Isrc -Itests tests/parallel/*_test.cc \
  -Wl,--start-group "$lib"/libdiffattn_parallel.a "$lib"/libdiffattn_backends.a "$lib"/libdiffattn_kernels.a \
  "$lib"/libdiffattn_core.a -Wl,--end-group -lopenblas -lgtest -lgtest_main -lgmock -lpthread -ldl \
  -o "$build/parallel_tests" 2> >(grep -v warning >&2)
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1" "$build/parallel_tests"
