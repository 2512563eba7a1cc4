// Names and parsers of the public option enums (layerstream/options.h), the
// one vocabulary of the flags, the API and the internal areas (io::IoPath and
// BackendKind are these enums).
#include <array>
#include <string>
#include <utility>

#include "layerstream/options.h"

namespace layerstream {
namespace {

template <typename E, size_t N>
Result<E> from_name(std::string_view name, const std::array<E, N>& all, const char* what) {
  std::string choices;
  for (E e : all) {
    if (name_of(e) == name) return e;
    choices += (choices.empty() ? "" : ", ") + std::string(name_of(e));
  }
  return Status::InvalidArgument(std::string(what) + " '" + std::string(name) + "' is not one of " + choices);
}

}  // namespace

std::string_view name_of(Backend v) {
  switch (v) {
    case Backend::kAuto: return "auto";
    case Backend::kHost: return "host";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

std::string_view name_of(IoPath v) {
  switch (v) {
    case IoPath::kAuto: return "auto";
    case IoPath::kUring: return "uring";
    case IoPath::kPread: return "pread";
    case IoPath::kBuffered: return "buffered";
  }
  return "?";
}

std::string_view name_of(KvType v) { return v == KvType::kF16 ? "f16" : "f32"; }

std::string_view name_of(Strategy v) {
  switch (v) {
    case Strategy::kResident: return "resident";
    case Strategy::kSerial: return "serial";
    case Strategy::kOverlap: return "overlap";
    case Strategy::kPlanned: return "planned";
    case Strategy::kHost: return "host";
  }
  return "?";
}

std::string_view name_of(Staging v) { return v == Staging::kAlways ? "always" : "auto"; }

Result<Backend> backend_from_name(std::string_view n) {
  return from_name(n, std::array{Backend::kAuto, Backend::kHost, Backend::kCuda}, "backend");
}
Result<IoPath> io_path_from_name(std::string_view n) {
  if (n == "io_uring") return IoPath::kUring;  // the kernel interface's own name
  return from_name(n, std::array{IoPath::kAuto, IoPath::kUring, IoPath::kPread, IoPath::kBuffered}, "I/O path");
}
Result<KvType> kv_type_from_name(std::string_view n) {
  return from_name(n, std::array{KvType::kF32, KvType::kF16}, "KV cache type");
}
Result<Strategy> strategy_from_name(std::string_view n) {
  return from_name(n, std::array{Strategy::kResident, Strategy::kSerial, Strategy::kOverlap, Strategy::kPlanned, Strategy::kHost},
                   "strategy");
}

Result<Staging> staging_from_name(std::string_view n) {
  return from_name(n, std::array{Staging::kAuto, Staging::kAlways}, "staging");
}

}  // namespace layerstream
