#!/usr/bin/env bash
# Here (with network): makes .export as scripts/device/prepare.sh does, and adds .export/.whl with the
# Python wheels the GPU image lacks, pinned, for scripts/device/python_gpu_check.sh. Then, on the
# device, carrying .export:   cd .export && scripts/device/python_gpu_check.sh
# Wheels (the image already has torch, numpy, pytest, safetensors, huggingface-hub, Pillow, regex,
# requests, filelock, packaging, pathspec, zipp):
#   diffusers==0.42.1 importlib-metadata==10.2.0 (diffusers' one missing need) scikit-build-core==1.1.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
scripts/device/prepare.sh
wheels=(diffusers==0.42.1 importlib-metadata==10.2.0 scikit-build-core==1.1.2)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .export/.whl "${wheels[@]}"
ls -la .export/.whl
echo "carry .export; on the device: cd .export && scripts/device/python_gpu_check.sh"
