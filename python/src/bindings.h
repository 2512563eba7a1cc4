// Shared pieces of the nanobind extension layerstream._layerstream: turning a
// Status into the Python exception of its code, size arguments ("512MiB" or
// an int), the Python-side Context, and one bind_* function per file.
//
// GIL rules (every file): calls that run passes, read or write files, or
// measure (Model.open, Model.plan, Context.decode, generation, example-model
// writing) release the GIL; Python objects are touched only with it held.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>

#include "layerstream/layerstream.h"

namespace layerstream::python {

namespace nb = nanobind;

// Raises the Python exception for `status` (layerstream.errors: one class per
// StatusCode; str(e) is the library's message, e.code its StatusCode).
// REQUIRES: the GIL is held and !status.ok().
[[noreturn]] void raise_status(const Status& status);
inline void check(const Status& status) {
  if (!status.ok()) raise_status(status);
}
template <typename T>
T unwrap(Result<T>&& result) {
  if (!result.ok()) raise_status(result.status());
  return std::move(result).value();
}

// A byte size from Python: a non-negative int, or a string parse_size reads
// ("1.5GiB"). InvalidArgumentError naming `what` otherwise.
uint64_t size_arg(nb::handle value, const char* what);

// A Context as Python holds it. `busy` is set while a generation or decode
// uses it (read and written with the GIL held), because a Context serves
// one thread at a time.
struct PyContext {
  std::shared_ptr<Model> model;
  std::unique_ptr<Context> context;
  bool busy = false;

  // Context the caller may use now: RuntimeError when closed or busy.
  Context& idle(const char* what);
};

void bind_errors(nb::module_& m);
void bind_options(nb::module_& m);
void bind_model(nb::module_& m);
void bind_context(nb::module_& m);
void bind_generation(nb::module_& m);
void bind_plan(nb::module_& m);

}  // namespace layerstream::python
