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
#include <string>

#include "layerstream/layerstream.h"

namespace layerstream::python {

namespace nb = nanobind;

// Raises the Python exception for `status` (layerstream.errors: one class per
// StatusCode; str(e) is the library's message, e.code its StatusCode).
// `filename`, when given, is the file the failed call was about: an IoError
// carries it (with the errno of the message) as OSError.filename.
// REQUIRES: the GIL is held and !status.ok().
[[noreturn]] void raise_status(const Status& status, const std::string& filename = "");
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

// UTF-8 bytes as a str; bytes that are not valid UTF-8 (a byte-fallback
// token, text cut inside a character) become U+FFFD instead of raising.
nb::str utf8_text(const std::string& bytes);

// The seed of a sampling call: `seed` itself, or kRandomSeed for None or -1
// (the library then draws a fresh seed, so sampling differs between calls).
uint64_t seed_arg(nb::handle seed);

// A Model as Python holds it: close() drops the reference at once (the
// weights are freed when no context holds the model any more).
struct PyModel {
  std::shared_ptr<Model> model;

  // The model, or ValueError when it is closed.
  Model& open(const char* what) const;
};

// A Context as Python holds it. `busy` is set while a generation or decode
// uses it (read and written with the GIL held), because a Context serves
// one thread at a time.
class Generation;
struct PyContext {
  std::shared_ptr<Model> model;
  std::unique_ptr<Context> context;
  bool busy = false;
  // The generation that makes the context busy (null when none).
  Generation* active = nullptr;

  // Context the caller may use now: ValueError when closed; RuntimeError
  // when busy with a generation another thread iterates. A generation this
  // thread left unfinished (a loop left early) is stopped first, so the
  // context is free at once rather than when the iterator is collected.
  Context& idle(const char* what);
};

void bind_errors(nb::module_& m);
void bind_options(nb::module_& m);
void bind_model(nb::module_& m);
void bind_context(nb::module_& m);
void bind_generation(nb::module_& m);
void bind_plan(nb::module_& m);
void bind_chat(nb::module_& m);

}  // namespace layerstream::python
