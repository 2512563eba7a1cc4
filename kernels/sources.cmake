# The kernels area: shared math (math/), CPU kernels (cpu/), CUDA kernels (cuda/).
# The hot CPU loops, compiled -O3 whatever the build type (vectorisation).
set(LS_KERNELS_HOT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dot_generic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dot_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dot_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/qdot_generic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/qdot_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/qdot_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/q4_1_packed.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/qdot_kquant_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/qgemm_amx.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/kquant_generic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/kquant_avx2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/kquant_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_fast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gemm_f32.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/moe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/activation_avx512.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/simd_fallback.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/attention_rows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/attention_split.cpp)
layerstream_add_area(NAME ls_kernels
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/math/ggml_type.cpp
    ${CMAKE_CURRENT_LIST_DIR}/math/convert_row.cpp
    ${CMAKE_CURRENT_LIST_DIR}/math/kquant_encode.cpp
    ${CMAKE_CURRENT_LIST_DIR}/math/scale_search.cpp
    ${CMAKE_CURRENT_LIST_DIR}/kernels.cpp
    ${CMAKE_CURRENT_LIST_DIR}/moe_work.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cpu/thread_pool.cpp
    ${LS_KERNELS_HOT_SOURCES}
    ${CMAKE_CURRENT_LIST_DIR}/cpu/sampling.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cpu/cpu_kernels.cpp
  CUDA_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cuda/cuda_kernels.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/matmul.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/matvec_quarter.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/kquant.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/attention.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/sampling.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/moe.cu
  DEPS ls_core)
set_source_files_properties(${LS_KERNELS_HOT_SOURCES}
  TARGET_DIRECTORY ls_kernels
  PROPERTIES COMPILE_OPTIONS "-O3")
# The quantisers' scale searches: their sums may be reassociated so that the
# loops over a group vectorise (a different rounding of a sum, not a different
# algorithm; `layerstream quantize` is bound by these loops).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/math/scale_search.cpp
  TARGET_DIRECTORY ls_kernels
  PROPERTIES COMPILE_OPTIONS "-O3;-fno-math-errno;-fno-trapping-math;-fassociative-math;-fno-signed-zeros")
