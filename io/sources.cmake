# Included by io/CMakeLists.txt.
layerstream_add_area(NAME ls_io
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/reader.cpp
    ${CMAKE_CURRENT_LIST_DIR}/chunked_reader.cpp
    ${CMAKE_CURRENT_LIST_DIR}/file_handle.cpp
    ${CMAKE_CURRENT_LIST_DIR}/uring_backend.cpp
    ${CMAKE_CURRENT_LIST_DIR}/pread_backend.cpp
    ${CMAKE_CURRENT_LIST_DIR}/staging_ring.cpp
    ${CMAKE_CURRENT_LIST_DIR}/fault_injection.cpp
  DEPS ls_core)
