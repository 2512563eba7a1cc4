# The kernels area: shared math (math/), CPU kernels (cpu/), CUDA kernels (cuda/).
layerstream_add_area(NAME ls_kernels
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/math/ggml_type.cpp
    ${CMAKE_CURRENT_LIST_DIR}/math/convert_row.cpp
  DEPS ls_core)
