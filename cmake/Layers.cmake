# The layers of diffattn, lowest first: which source folders each owns and which layers it may use.
# src/CMakeLists.txt builds one target per layer from this table, tests/CMakeLists.txt sorts the
# tests by it, and cmake/CheckLayers.cmake fails when a source includes a header of a layer it may
# not use. A layer uses only layers listed before it.
set(DIFFATTN_LAYERS core kernels backends parallel runner capi cli)

set(DIFFATTN_LAYER_core_FOLDERS common config models platform registry select layer)
set(DIFFATTN_LAYER_kernels_FOLDERS kernels)
set(DIFFATTN_LAYER_backends_FOLDERS backends)
set(DIFFATTN_LAYER_parallel_FOLDERS parallel)
set(DIFFATTN_LAYER_runner_FOLDERS runner)
set(DIFFATTN_LAYER_capi_FOLDERS capi)
set(DIFFATTN_LAYER_cli_FOLDERS cli)

set(DIFFATTN_LAYER_core_USES "")
set(DIFFATTN_LAYER_kernels_USES core)
set(DIFFATTN_LAYER_backends_USES core kernels)
# Sequence parallelism: communicators, Ulysses, ring and their hybrid around any backend's layer.
set(DIFFATTN_LAYER_parallel_USES core kernels)
set(DIFFATTN_LAYER_runner_USES core kernels backends parallel)
set(DIFFATTN_LAYER_capi_USES core kernels backends parallel)
set(DIFFATTN_LAYER_cli_USES core kernels backends parallel runner)

# Public headers (include/diffattn/) belong to core, except these.
set(DIFFATTN_PUBLIC_HEADER_LAYERS "c_api.h=capi" "builtin_backends.h=backends")

# The layer owning src/<folder>, or "" when no layer owns it.
function(diffattn_layer_of_folder folder out)
  foreach(layer IN LISTS DIFFATTN_LAYERS)
    if(folder IN_LIST DIFFATTN_LAYER_${layer}_FOLDERS)
      set(${out} ${layer} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# The layer of a quoted include ("registry/option_checks.h", "diffattn/c_api.h"), or "" for a
# header outside src/ and include/diffattn/ (a test's own helper, a third-party header).
function(diffattn_layer_of_include include out)
  string(REGEX MATCH "^[^/]+" top "${include}")
  if(top STREQUAL "diffattn")
    get_filename_component(name "${include}" NAME)
    set(layer core)
    foreach(entry IN LISTS DIFFATTN_PUBLIC_HEADER_LAYERS)
      string(REPLACE "=" ";" pair "${entry}")
      list(GET pair 0 header)
      if(header STREQUAL name)
        list(GET pair 1 layer)
      endif()
    endforeach()
    set(${out} ${layer} PARENT_SCOPE)
    return()
  endif()
  diffattn_layer_of_folder("${top}" layer)
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

# The quoted includes of `file`, e.g. "registry/option_checks.h".
function(diffattn_quoted_includes file out)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]diffattn/|^[ \t]*#[ \t]*include[ \t]*\"")
  set(includes "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*$" "\\1" include "${line}")
    list(APPEND includes "${include}")
  endforeach()
  set(${out} "${includes}" PARENT_SCOPE)
endfunction()

# Whether `layer` may include headers of `other`.
function(diffattn_layer_may_use layer other out)
  if(other STREQUAL "" OR other STREQUAL layer OR other IN_LIST DIFFATTN_LAYER_${layer}_USES)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
