# Helpers that every test and benchmark goes through, so labels, timeouts and
# skip detection are the same everywhere.
#
# layerstream_add_test(NAME <name> SOURCES <files...> LABELS <unit|integration|gpu|...>
#                      [TIMEOUT <seconds>] [LIBS <targets...>])
# Builds a GoogleTest executable and registers each TEST as a ctest test.
# A test that calls GTEST_SKIP() is reported by ctest as skipped ("Not Run"),
# never as passed.
function(layerstream_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE layerstream_internal layerstream_testing GTest::gtest GTest::gtest_main ${T_LIBS})
  layerstream_enable_cuda_for(${T_NAME})
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
               SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  # gtest_discover_tests flattens PROPERTIES, so of several labels only the
  # first would stick ("LABELS unit tsan" sets a property named "tsan"); set
  # the whole list on the discovered tests once they are known.
  set(_labels_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake)
  file(WRITE ${_labels_file}
    "if(${T_NAME}_TESTS)\n  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_labels_file})
  # The GPU suite, for bench/gpu/prepare.sh (build/<dir>/gpu-tests.txt).
  if("gpu" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY LAYERSTREAM_GPU_TESTS ${T_NAME})
  endif()
endfunction()

# layerstream_add_cli_test(NAME <name> SOURCES <files...> LABELS <...> [TIMEOUT <seconds>] [LIBS <targets...>])
# A suite that runs the `layerstream` CLI (tests/common/cli.h run_cli): as
# layerstream_add_test, with LAYERSTREAM_CLI_PATH set to the CLI binary and
# the CLI built first. Nothing when the CLI is not part of the build.
function(layerstream_add_cli_test)
  if(NOT TARGET layerstream_cli)
    return()
  endif()
  cmake_parse_arguments(T "" "NAME" "" ${ARGN})
  layerstream_add_test(${ARGN})
  target_compile_definitions(${T_NAME} PRIVATE LAYERSTREAM_CLI_PATH="$<TARGET_FILE:layerstream_cli>")
  add_dependencies(${T_NAME} layerstream_cli)
endfunction()

# layerstream_add_bench(NAME <name> SOURCES <files...> [LIBS <targets...>] [SMOKE_ARGS <args...>])
# Builds a Google Benchmark executable and registers a short run of it under
# the bench-smoke label (proves it runs; figures come from full runs).
function(layerstream_add_bench)
  cmake_parse_arguments(B "" "NAME" "SOURCES;LIBS;SMOKE_ARGS" ${ARGN})
  add_executable(${B_NAME} ${B_SOURCES})
  target_link_libraries(${B_NAME} PRIVATE layerstream_internal benchmark::benchmark ${B_LIBS})
  layerstream_enable_cuda_for(${B_NAME})
  if(LAYERSTREAM_BUILD_TESTS)
    if(NOT B_SMOKE_ARGS)
      set(B_SMOKE_ARGS --benchmark_min_time=0.01)
    endif()
    add_test(NAME ${B_NAME}.smoke COMMAND ${B_NAME} ${B_SMOKE_ARGS})
    set_tests_properties(${B_NAME}.smoke PROPERTIES LABELS bench-smoke TIMEOUT 300)
  endif()
endfunction()
