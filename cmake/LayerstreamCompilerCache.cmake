# Use ccache when present: CI and developers rebuild the same sources in
# several configurations (plain, sanitizers), and ccache makes reruns cheap.
find_program(LAYERSTREAM_CCACHE ccache)
if(LAYERSTREAM_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${LAYERSTREAM_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${LAYERSTREAM_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${LAYERSTREAM_CCACHE})
endif()
