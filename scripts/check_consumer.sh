#!/usr/bin/env bash
# Installs a built preset into build/<preset>/install, then configures, builds and runs the
# consumer project (tests/consumer: one C++ and one C program) against the installed package only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${PRESET:-default}"
build="build/$preset"
prefix="$PWD/$build/install"
consumer="$build/consumer"

rm -rf "$prefix" "$consumer"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S tests/consumer -B "$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$consumer"
"$consumer/consumer_cxx"
"$consumer/consumer_c"
