# `make install PREFIX=...` (cmake --install build --prefix PREFIX): the `rlx`
# CLI, librlx.so with the public headers, a CMake package (find_package(rlx)
# gives rlx::rlx), a pkg-config file (pkg-config --cflags --libs rlx) and, when
# built, the Python packages rlx and rlx_torch (python/CMakeLists.txt).
include(CMakePackageConfigHelpers)

# Installed binaries keep the rpath to the OpenBLAS variant they were linked with.
set_target_properties(rlx_cli rlx_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS rlx_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS rlx_shared EXPORT rlxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/rlx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(RLX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)
install(EXPORT rlxTargets NAMESPACE rlx:: FILE rlxTargets.cmake DESTINATION ${RLX_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/rlxConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/install/rlxConfig.cmake
                              INSTALL_DESTINATION ${RLX_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/rlxConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/rlxConfig.cmake
              ${CMAKE_BINARY_DIR}/install/rlxConfigVersion.cmake
        DESTINATION ${RLX_CMAKE_DIR})

# pkg-config: paths relative to the .pc file, so the package can be moved.
file(RELATIVE_PATH RLX_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/cmake/rlx.pc.in ${CMAKE_BINARY_DIR}/install/rlx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
