#!/usr/bin/env bash
# On the GPU machine, from the tree scripts/device/prepare_python.sh made: installs the carried wheels,
# builds and installs the Python package with `pip install` (CUDA, sm_90a), runs the Python tests (the
# torch and diffusers ones run here), the per-call overhead benchmark, and the diffusers forward timing
# (Wan2.1-1.3B 480x832x81 and FLUX.1-dev 1024^2, random bf16 weights) against diffusers' own backends.
#   cd .export && [OUT=dir] [MODELS=wan,flux] [RUNS=5] [PHASE=all|build|test|bench] scripts/device/python_gpu_check.sh
# PHASE splits the job under a per-call time limit; later phases reuse /tmp/diffattn-site.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-build/python-gpu}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
phase="${PHASE:-all}"
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
site=/tmp/diffattn-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$site:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

if [ "$phase" = all ] || [ "$phase" = build ]; then
  echo "== pip install . (CUDA, sm_90a)"
  start=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip install --no-build-isolation --no-deps --no-index \
    --target "$site" --upgrade . \
    -C "cmake.define.DIFFATTN_CUDNN_LIB=$cudnn_lib" \
    -C "cmake.define.DIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >"$out/pip-install.log" 2>&1 \
    || { tail -n 40 "$out/pip-install.log"; exit 1; }
  echo "built and installed in $(( $(date +%s) - start )) s"
fi
cd "$out"  # run from outside the tree, so `import diffattn` is the installed package
python3 -c 'import diffattn, torch; s = diffattn.Session(); print(diffattn.__version__, diffattn.__file__); print(s.platform.description); print("torch", torch.__version__)' \
  || exit 1
root="$OLDPWD"

if [ "$phase" = all ] || [ "$phase" = test ]; then
  echo "== Python tests (torch and diffusers included)"
  DIFFATTN_CLI="$site/bin/diffattn" python3 -m pytest -p no:cacheprovider -q -rs "$root/python/tests" 2>&1 | tee "$out/pytest.log" | tail -n 30
fi

if [ "$phase" = all ] || [ "$phase" = bench ]; then
  echo "== per-call overhead of the Python path"
  for backend in FLASH_ATTN TORCH_SDPA; do
    python3 "$root/python/bench/overhead.py" --device cuda --backend "$backend" --json "$out/overhead-$backend.json"
  done
  echo "== diffusers transformers, one forward"
  python3 "$root/python/bench/diffusers_forward.py" --models "${MODELS:-wan,flux}" --runs "${RUNS:-5}" \
    --json "$out/diffusers_forward.json" 2>"$out/diffusers_forward.stderr"
  echo "exit $?"
  grep -E "Resolved|Error|error" "$out/diffusers_forward.stderr" | sort | uniq -c | head -n 20
fi
