// Status -> Python exception (layerstream/errors.py builds it from the code,
// the library's message and the file), text and seed arguments, sizes, and
// the module-level functions.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "layerstream/log.h"
#include "layerstream/units.h"

namespace layerstream::python {

[[noreturn]] void raise_status(const Status& status, const std::string& filename) {
  nb::object errors = nb::module_::import_("layerstream.errors");
  nb::object filename_arg = filename.empty() ? nb::none() : nb::object(nb::str(filename.c_str(), filename.size()));
  nb::object exc = errors.attr("from_status")(utf8_text(status.message()), static_cast<int>(status.code()),
                                              filename_arg);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

nb::str utf8_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (!text) throw nb::python_error();
  return nb::steal<nb::str>(text);
}

uint64_t seed_arg(nb::handle seed) {
  if (!seed.is_none()) {
    if (!nb::isinstance<nb::int_>(seed) || nb::isinstance<nb::bool_>(seed))
      throw nb::type_error("seed: want an int, or None for a random seed");
    const unsigned long long v = PyLong_AsUnsignedLongLong(seed.ptr());
    if (!PyErr_Occurred()) return v;
    PyErr_Clear();  // negative or above 2^64 - 1
    if (PyLong_AsLongLong(seed.ptr()) != -1 || PyErr_Occurred()) {
      PyErr_Clear();
      raise_status(Status::InvalidArgument("seed: want an int in [0, 2^64), or -1 or None for a random seed, got " +
                                           nb::cast<std::string>(nb::repr(seed))));
    }
  }
  return kRandomSeed;  // the library draws one per chain (GenerateResult.seeds, SamplerChain.seed)
}

uint64_t size_arg(nb::handle value, const char* what) {
  if (nb::isinstance<nb::str>(value)) {
    Result<uint64_t> r = parse_size(nb::cast<std::string>(value));
    if (!r.ok()) raise_status(r.status().WithContext(what));
    return *r;
  }
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    const long long v = nb::cast<long long>(value);
    if (v < 0) raise_status(Status::InvalidArgument(std::string(what) + ": must be >= 0, got " + std::to_string(v)));
    return static_cast<uint64_t>(v);
  }
  raise_status(Status::InvalidArgument(std::string(what) + ": want bytes as an int or a size like '512MiB'"));
}

void bind_errors(nb::module_& m) {
  nb::enum_<StatusCode>(m, "StatusCode", "What kind of error a LayerstreamError is (layerstream::StatusCode).")
      .value("OK", StatusCode::kOk)
      .value("INVALID_ARGUMENT", StatusCode::kInvalidArgument)
      .value("CORRUPTION", StatusCode::kCorruption)
      .value("UNSUPPORTED", StatusCode::kUnsupported)
      .value("NOT_FOUND", StatusCode::kNotFound)
      .value("IO_ERROR", StatusCode::kIOError)
      .value("OUT_OF_BUDGET", StatusCode::kOutOfBudget)
      .value("DEVICE_ERROR", StatusCode::kDeviceError)
      .value("CANCELLED", StatusCode::kCancelled)
      .value("INTERNAL", StatusCode::kInternal);
  m.def("parse_size", [](const std::string& text) { return unwrap(parse_size(text)); }, nb::arg("text"),
        "Bytes from a size like '512MiB', '1.5G' or '4096'.\n\n"
        "K, M, G, T and *iB are powers of 1024.");
  m.def("format_bytes", &format_bytes, nb::arg("bytes"), "A byte count for people, e.g. '1.50 GiB'.");
  m.def("set_log_level", [](const std::string& level) { check(set_log_level(level)); }, nb::arg("level"),
        "The library's log level (stderr).\n\n"
        "level: trace, debug, info, warn, error, critical or off.");
}

}  // namespace layerstream::python
