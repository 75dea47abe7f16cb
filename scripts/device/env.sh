# Sourced from the repository root by the scripts that run on the GPU machine: installs the build
# dependencies carried in .devdeps/ (if any), puts PyTorch's cuDNN and the CUDA runtime on the
# library path, and sets cudnn_lib to the cuDNN library diffattn links against there.
if [ -d .devdeps ]; then
  cp -r --update=none .devdeps/usr/. /usr/ 2>/dev/null || cp -rn .devdeps/usr/. /usr/
fi
cudnn_dir="$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])')"
export LD_LIBRARY_PATH="$cudnn_dir/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cudnn_lib="$(ls "$cudnn_dir"/lib/libcudnn.so* | head -n1)"
