# Instruction-set builds of the CPU attention kernel: each file is compiled for its instruction set
# and entered only after a run-time check of the CPU (src/kernels/cpu/sdpa_cpu.cc).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  # GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_ps idiom.
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/dense_tile_avx512.cc
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mfma;-mf16c;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/dense_tile_avx2.cc
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  # SAGE_ATTN's host quantization (function clones for AVX-512F, AVX2 and the baseline): without
  # -fno-trapping-math GCC keeps the E4M3 rounding's selects as branches (it will not run a float
  # operation that might raise a flag on a path that did not ask for it), so the loops stay scalar.
  # Values are unchanged: no flag is read anywhere, and nothing is reassociated or contracted.
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/sage_quant_cpu.cc
    PROPERTIES COMPILE_OPTIONS "$<$<OR:$<CXX_COMPILER_ID:GNU>,$<CXX_COMPILER_ID:Clang>>:-fno-trapping-math>")
else()
  # Other architectures build only the portable kernel.
  list(REMOVE_ITEM DIFFATTN_CXX_SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/dense_tile_avx512.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cpu/dense_tile_avx2.cc)
endif()
