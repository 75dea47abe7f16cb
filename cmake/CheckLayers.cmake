# Fails when a file under src/ or include/diffattn/ includes a header of a layer it may not use
# (cmake/Layers.cmake), or when a folder under src/ belongs to no layer.
# Run: cmake -DDIFFATTN_ROOT=<source dir> -P cmake/CheckLayers.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/Layers.cmake)
if(NOT DIFFATTN_ROOT)
  message(FATAL_ERROR "pass -DDIFFATTN_ROOT=<source dir>")
endif()

set(violations "")
file(GLOB entries RELATIVE ${DIFFATTN_ROOT}/src ${DIFFATTN_ROOT}/src/*)
foreach(entry IN LISTS entries)
  if(IS_DIRECTORY ${DIFFATTN_ROOT}/src/${entry})
    diffattn_layer_of_folder(${entry} layer)
    if(layer STREQUAL "")
      list(APPEND violations "src/${entry}/ belongs to no layer: add it to a layer's FOLDERS in cmake/Layers.cmake")
    endif()
  endif()
endforeach()

file(GLOB_RECURSE files RELATIVE ${DIFFATTN_ROOT}
  ${DIFFATTN_ROOT}/src/*.cc ${DIFFATTN_ROOT}/src/*.h ${DIFFATTN_ROOT}/src/*.cu ${DIFFATTN_ROOT}/src/*.cuh
  ${DIFFATTN_ROOT}/include/diffattn/*.h)
foreach(file IN LISTS files)
  if(file MATCHES "^src/([^/]+)/")
    diffattn_layer_of_folder(${CMAKE_MATCH_1} layer)
  else()
    string(REGEX REPLACE "^include/" "" public "${file}")
    diffattn_layer_of_include(${public} layer)
  endif()
  if(layer STREQUAL "")
    continue()  # reported above as a folder without a layer
  endif()
  diffattn_quoted_includes(${DIFFATTN_ROOT}/${file} includes)
  foreach(include IN LISTS includes)
    diffattn_layer_of_include(${include} other)
    diffattn_layer_may_use(${layer} "${other}" allowed)
    if(NOT allowed)
      set(allowed ${layer} ${DIFFATTN_LAYER_${layer}_USES})
      list(JOIN allowed ", " uses)
      list(APPEND violations
        "${file} (layer ${layer}) includes ${include} (layer ${other}), but ${layer} may use only: ${uses}. Move what both need down to a layer ${layer} may use.")
    endif()
  endforeach()
endforeach()

list(LENGTH files checked)
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "upward includes or unowned folders:\n  ${text}")
endif()
message(STATUS "layers respected in ${checked} files")
