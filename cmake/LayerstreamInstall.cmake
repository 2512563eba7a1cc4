# Installs the library, the public headers (runtime/include/layerstream only)
# and a CMake package config, so an app can:
#   find_package(layerstream CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE layerstream::layerstream)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS layerstream EXPORT layerstreamTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/layerstream
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/generated/include/layerstream/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/layerstream)
install(EXPORT layerstreamTargets NAMESPACE layerstream::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerstream)

# Structured output: the library's objects call xgrammar's static archive,
# installed beside it (its licence and notice with it) for an app's link step.
if(LAYERSTREAM_HAVE_XGRAMMAR)
  install(FILES ${LAYERSTREAM_XGRAMMAR_LIBRARY} DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${LAYERSTREAM_XGRAMMAR_ROOT}/LICENSE ${LAYERSTREAM_XGRAMMAR_ROOT}/NOTICE
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/layerstream/xgrammar OPTIONAL)
endif()

set(LAYERSTREAM_CONFIG_HAVE_CUDA ${LAYERSTREAM_HAVE_CUDA})
set(LAYERSTREAM_CONFIG_HAVE_XGRAMMAR ${LAYERSTREAM_HAVE_XGRAMMAR})
configure_package_config_file(cmake/layerstreamConfig.cmake.in
  ${PROJECT_BINARY_DIR}/layerstreamConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerstream)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/layerstreamConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/layerstreamConfig.cmake
  ${PROJECT_BINARY_DIR}/layerstreamConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindLiburing.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerstream)
