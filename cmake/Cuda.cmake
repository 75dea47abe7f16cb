# The CUDA part is built when nvcc is present: sm_80 (SASS + PTX) and sm_90a (wgmma/TMA kernels).
set(DIFFATTN_HAVE_CUDA OFF)
set(DIFFATTN_HAVE_NCCL OFF)
if(DIFFATTN_ENABLE_CUDA AND NOT DIFFATTN_CORE_ONLY)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know nvcc 13's C++20 flag: name it.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    # A benchmark build for one GPU may narrow this (e.g. -DDIFFATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a).
    set(DIFFATTN_CUDA_GENCODE
        -gencode=arch=compute_80,code=sm_80
        -gencode=arch=compute_80,code=compute_80
        -gencode=arch=compute_90a,code=sm_90a
        CACHE STRING "nvcc -gencode flags of diffattn's CUDA kernels")
    set(DIFFATTN_PY_DEPS "${PROJECT_SOURCE_DIR}/build/_deps/py")
    set(DIFFATTN_CUDNN_FRONTEND_INCLUDE "${DIFFATTN_PY_DEPS}/include")
    if(NOT EXISTS "${DIFFATTN_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h")
      message(FATAL_ERROR "cudnn_frontend.h not found in ${DIFFATTN_CUDNN_FRONTEND_INCLUDE}: run scripts/setup.sh")
    endif()
    find_library(DIFFATTN_CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
    set(DIFFATTN_HAVE_CUDA ON)
    message(STATUS "diffattn: CUDA backends enabled (sm_80, sm_90a)")
    # NCCL for sequence parallelism across GPUs: the toolkit's copy, or DIFFATTN_NCCL_ROOT (e.g. the
    # nvidia-nccl wheel's folder). Without it the in-process communicator alone is built.
    find_path(DIFFATTN_NCCL_INCLUDE nccl.h HINTS ${DIFFATTN_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
    find_library(DIFFATTN_NCCL_LIB nccl
      HINTS ${DIFFATTN_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_TARGET_DIR}/lib)
    if(DIFFATTN_NCCL_INCLUDE AND DIFFATTN_NCCL_LIB)
      set(DIFFATTN_HAVE_NCCL ON)
      message(STATUS "diffattn: NCCL found (${DIFFATTN_NCCL_LIB}): multi-GPU sequence parallelism enabled")
    else()
      message(STATUS "diffattn: NCCL not found: sequence parallelism runs in-process only")
    endif()
  else()
    message(STATUS "diffattn: nvcc not found, CPU-only build")
  endif()
endif()
