# Third-party libraries, all from the distribution (Debian packages named in
# tests/install-deps.sh); nothing is vendored. The one exception, optional,
# is structured output's engine: LayerstreamXgrammar.cmake.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(spdlog REQUIRED CONFIG)
find_package(Liburing REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED CONFIG)  # trace and report export (header-only)
if(LAYERSTREAM_BUILD_EXAMPLES OR LAYERSTREAM_BUILD_BENCH)
  find_package(CLI11 REQUIRED CONFIG)
endif()
# `layerstream serve`'s HTTP (Debian's libcpp-httplib-dev, a compiled library
# found through pkg-config); without it the CLI builds without `serve`.
if(LAYERSTREAM_BUILD_EXAMPLES)
  find_package(PkgConfig)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
  endif()
  if(NOT TARGET PkgConfig::HTTPLIB)
    message(WARNING "cpp-httplib not found (apt install libcpp-httplib-dev): building without `layerstream serve`")
  endif()
endif()
if(LAYERSTREAM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(LAYERSTREAM_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
