// Opening a file for reading and finding the alignment O_DIRECT needs.
// Internal to io/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "layerstream/status.h"

namespace layerstream::io {

class IoHooks;

// An owned file descriptor (closed on destruction). Moves, never copies.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

struct OpenedFile {
  UniqueFd fd;
  std::string path;
  uint64_t size = 0;         // bytes (regular file or block device)
  bool direct = false;       // opened with O_DIRECT
  size_t offset_align = 1;   // file offset/length alignment for reads (1 when buffered)
  size_t memory_align = 1;   // buffer address alignment (1 when buffered)
  std::string align_source;  // "statx DIOALIGN", "BLKSSZGET", "st_blksize", "default 4096", "buffered"
};

// Opens `path` read-only. With want_direct, tries O_DIRECT first; when the file
// system refuses it (EINVAL) opens buffered instead and sets *why_not_direct.
// Errors: IOError naming the path and errno (ENOENT, EACCES, ...); InvalidArgument
// for something that is neither a regular file nor a block device.
Result<OpenedFile> open_file(const std::string& path, bool want_direct, IoHooks* hooks,
                             std::string* why_not_direct);

}  // namespace layerstream::io
