// Status -> Python exception. The classes live in layerstream/errors.py (a
// hierarchy under LayerstreamError, one per StatusCode); this file looks the
// class up by code and raises it with the library's message.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "layerstream/log.h"
#include "layerstream/units.h"

namespace layerstream::python {

[[noreturn]] void raise_status(const Status& status) {
  nb::object errors = nb::module_::import_("layerstream.errors");
  nb::object cls = errors.attr("error_class")(static_cast<int>(status.code()));
  nb::object exc = cls(status.message(), static_cast<int>(status.code()));
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw nb::python_error();
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
        "Bytes from a size like '512MiB', '1.5G' or '4096' (K, M, G, T and *iB are powers of 1024).");
  m.def("format_bytes", &format_bytes, nb::arg("bytes"), "A byte count for people, e.g. '1.50 GiB'.");
  m.def("set_log_level", [](const std::string& level) { check(set_log_level(level)); }, nb::arg("level"),
        "The library's log level (stderr): trace, debug, info, warn, error, critical or off.");
}

}  // namespace layerstream::python
