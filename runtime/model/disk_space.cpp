#include "runtime/model/disk_space.h"

#include <sys/statvfs.h>

#include <filesystem>

#include "layerstream/units.h"

namespace layerstream {

Status check_free_disk(const std::string& path, uint64_t bytes, const std::string& what) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(path, ec).parent_path();
  struct statvfs vfs {};
  if (ec || ::statvfs(dir.c_str(), &vfs) != 0) return Status::OK();
  const uint64_t free_bytes = uint64_t(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes >= bytes) return Status::OK();
  return Status::OutOfBudget(what + " needs " + format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) but " +
                             dir.string() + " has " + format_bytes(free_bytes) + " (" + std::to_string(free_bytes) +
                             " bytes) free: choose a smaller size or another directory");
}

}  // namespace layerstream
