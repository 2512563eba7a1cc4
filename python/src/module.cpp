// layerstream._layerstream: the library's public API for Python. The
// pure-Python package (python/layerstream) re-exports it with the exception
// classes; stubs are in python/layerstream/_layerstream.pyi.
#include "bindings.h"

NB_MODULE(_layerstream, m) {
  namespace py = layerstream::python;
  m.doc() = "layerstream: run transformer models larger than GPU memory by streaming layers from RAM and disk.";
  py::bind_errors(m);
  py::bind_options(m);
  py::bind_model(m);
  py::bind_plan(m);
  py::bind_context(m);
  py::bind_generation(m);
  py::bind_chat(m);
}
