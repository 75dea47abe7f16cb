#!/usr/bin/env bash
# Prepares what a GPU call carries: the committed tree (git archive HEAD, so work in progress in
# the checkout cannot break the device build) in .export/, with the cudnn-frontend headers and the
# build dependencies the device image lacks. Then run on the device, carrying .export:
#   cd .export && COMMIT=<sha> scripts/gpu_bench.sh [flags]
# --lean leaves out the command-line tool and the workload runner (replacing main with a stub and
# dropping their tests): the benchmark and the GPU tests need neither, and a half-landed change
# there then cannot stop a benchmark build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rm -rf .export && mkdir -p .export
git archive HEAD | tar -x -C .export
if [ "${1:-}" = "--lean" ]; then
  rm -rf .export/src/cli .export/src/runner .export/tests/cli .export/tests/runner
  mkdir -p .export/src/cli
  echo 'int main() { return 0; }  // lean benchmark export: the CLI is not built' >.export/src/cli/main.cc
fi
mkdir -p .export/build/_deps/py && cp -r build/_deps/py/include .export/build/_deps/py/
scripts/gpu_bench.sh --pack-deps >/dev/null
cp -r .devdeps .export/
grep -qx "/.export/" .git/info/exclude || echo "/.export/" >> .git/info/exclude
echo "carry .export ($(du -sh .export | cut -f1)); on the device: cd .export && COMMIT=$(git rev-parse --short HEAD) scripts/gpu_bench.sh"
