# Structured output (runtime/grammar: JSON mode, JSON schema, regex, EBNF/GBNF
# grammars as a token mask) runs on xgrammar's C++ core, a static library
# that tests/install-xgrammar.sh fetches (a pinned source release) and builds
# once into LAYERSTREAM_XGRAMMAR_ROOT. It is the one dependency not taken from
# the distribution, and it is optional:
#   AUTO  use it when the root holds a build (default); without one the
#         library builds and a request for structured output gets Unsupported;
#   ON    fail the configure step without it;
#   OFF   never use it.
# Every configuration (plain, sanitizers) links the same archive: it is built
# once, without instrumentation and without LTO, with the same C++ standard
# library, so clang's sanitizer builds link it as they link libstdc++.
#
# Defines LAYERSTREAM_HAVE_XGRAMMAR and, when ON, the imported target
# layerstream::xgrammar (the installed package config recreates it).
set(LAYERSTREAM_STRUCTURED_OUTPUT "AUTO" CACHE STRING
  "Structured output through xgrammar: AUTO (when LAYERSTREAM_XGRAMMAR_ROOT holds a build), ON, OFF")
set_property(CACHE LAYERSTREAM_STRUCTURED_OUTPUT PROPERTY STRINGS AUTO ON OFF)
set(LAYERSTREAM_XGRAMMAR_ROOT "$ENV{HOME}/.cache/layerstream/xgrammar" CACHE PATH
  "Where tests/install-xgrammar.sh put xgrammar (include/, lib/libxgrammar.a)")

set(LAYERSTREAM_HAVE_XGRAMMAR OFF)
if(NOT LAYERSTREAM_STRUCTURED_OUTPUT STREQUAL "OFF")
  find_library(LAYERSTREAM_XGRAMMAR_LIBRARY NAMES libxgrammar.a
    PATHS ${LAYERSTREAM_XGRAMMAR_ROOT}/lib NO_DEFAULT_PATH)
  find_path(LAYERSTREAM_XGRAMMAR_INCLUDE_DIR xgrammar/xgrammar.h
    PATHS ${LAYERSTREAM_XGRAMMAR_ROOT}/include NO_DEFAULT_PATH)
  if(LAYERSTREAM_XGRAMMAR_LIBRARY AND LAYERSTREAM_XGRAMMAR_INCLUDE_DIR)
    add_library(layerstream::xgrammar STATIC IMPORTED GLOBAL)
    set_target_properties(layerstream::xgrammar PROPERTIES
      IMPORTED_LOCATION ${LAYERSTREAM_XGRAMMAR_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${LAYERSTREAM_XGRAMMAR_INCLUDE_DIR}
      INTERFACE_LINK_LIBRARIES Threads::Threads)
    set(LAYERSTREAM_HAVE_XGRAMMAR ON)
    set(_ls_xgrammar_pin "")
    if(EXISTS ${LAYERSTREAM_XGRAMMAR_ROOT}/VERSION)
      file(STRINGS ${LAYERSTREAM_XGRAMMAR_ROOT}/VERSION _ls_xgrammar_pin LIMIT_COUNT 1)
    endif()
    message(STATUS "layerstream: structured output with ${LAYERSTREAM_XGRAMMAR_LIBRARY} (${_ls_xgrammar_pin})")
  elseif(LAYERSTREAM_STRUCTURED_OUTPUT STREQUAL "ON")
    message(FATAL_ERROR "LAYERSTREAM_STRUCTURED_OUTPUT=ON but ${LAYERSTREAM_XGRAMMAR_ROOT} holds no xgrammar build: "
      "run tests/install-xgrammar.sh (or set LAYERSTREAM_XGRAMMAR_ROOT)")
  else()
    message(STATUS "layerstream: no xgrammar in ${LAYERSTREAM_XGRAMMAR_ROOT}: building without structured output "
      "(tests/install-xgrammar.sh fetches and builds it)")
  endif()
endif()
