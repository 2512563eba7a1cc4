# layerstream_add_area(NAME <ls_area> SOURCES <.cpp...> [CUDA_SOURCES <.cu/.cpp...>] [DEPS <ls_other...>]
#                      [LIBRARY <target>])
#
# Declares one internal area of the library as an OBJECT library and adds its
# objects to `layerstream` (or to LIBRARY: the bench area goes to
# layerstream_bench, which apps do not link). CUDA_SOURCES are compiled only when the CUDA
# backend is built (LAYERSTREAM_HAVE_CUDA). DEPS are the other areas this one
# uses (for include paths and compile definitions); the final library holds
# every area's objects, so nothing else is needed at link time.
function(layerstream_add_area)
  cmake_parse_arguments(A "" "NAME;LIBRARY" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  if(NOT A_LIBRARY)
    set(A_LIBRARY layerstream)
  endif()
  set(srcs ${A_SOURCES})
  if(LAYERSTREAM_HAVE_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  endif()
  add_library(${A_NAME} OBJECT ${srcs})
  target_include_directories(${A_NAME} PUBLIC
    ${PROJECT_SOURCE_DIR}
    ${PROJECT_SOURCE_DIR}/runtime/include
    ${PROJECT_BINARY_DIR}/generated/include)
  target_compile_features(${A_NAME} PUBLIC cxx_std_20)
  target_link_libraries(${A_NAME} PUBLIC spdlog::spdlog Liburing::liburing Threads::Threads ${A_DEPS})
  target_compile_options(${A_NAME} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  layerstream_enable_cuda_for(${A_NAME})
  target_sources(${A_LIBRARY} PRIVATE $<TARGET_OBJECTS:${A_NAME}>)
  set_property(GLOBAL APPEND PROPERTY LAYERSTREAM_AREAS ${A_NAME})
endfunction()
