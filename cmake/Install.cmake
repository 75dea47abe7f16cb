# `cmake --install` puts the public headers, libdiffattn.so (the C interface), the static layers of
# the C++ library, the `diffattn` tool and a CMake package, so that
#   find_package(diffattn) ; target_link_libraries(app PRIVATE diffattn::diffattn)   # C++
#   find_package(diffattn) ; target_link_libraries(app PRIVATE diffattn::c)          # C
# work from any project. Paths of this source tree never reach the installed targets.
include(CMakePackageConfigHelpers)
set(DIFFATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/diffattn)

install(TARGETS diffattn_core diffattn_kernels diffattn_backends diffattn_parallel diffattn_cxx diffattn_shared
  EXPORT diffattnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS diffattn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/diffattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT diffattnTargets NAMESPACE diffattn:: DESTINATION ${DIFFATTN_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/diffattnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/diffattnConfig.cmake INSTALL_DESTINATION ${DIFFATTN_CMAKE_DIR})
# 0.x releases may change the interface between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/diffattnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/diffattnConfig.cmake ${PROJECT_BINARY_DIR}/diffattnConfigVersion.cmake
  DESTINATION ${DIFFATTN_CMAKE_DIR})
