# LAYERSTREAM_SANITIZE: "" | "address,undefined" | "thread" (any list clang/gcc accept).
# Applied to every C++ target of the build (library, tests, CLI) so that the
# instrumented runtime and the tests agree; never to CUDA device code.
if(LAYERSTREAM_SANITIZE)
  if(LAYERSTREAM_SANITIZE MATCHES "thread" AND LAYERSTREAM_SANITIZE MATCHES "address")
    message(FATAL_ERROR "LAYERSTREAM_SANITIZE: thread and address sanitizers cannot be combined")
  endif()
  set(_ls_san_flags -fsanitize=${LAYERSTREAM_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_ls_san_flags}>")
  add_link_options(-fsanitize=${LAYERSTREAM_SANITIZE})
  message(STATUS "layerstream: sanitizers ${LAYERSTREAM_SANITIZE}")
endif()

# LAYERSTREAM_BUILD_FUZZERS: libFuzzer targets (tests/fuzz/) need clang. The
# whole build gets coverage instrumentation (fuzzer-no-link) so the fuzzers
# see inside the library; only the fuzz executables link libFuzzer itself.
if(LAYERSTREAM_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LAYERSTREAM_BUILD_FUZZERS needs clang (configure with CC=clang CXX=clang++)")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
endif()
