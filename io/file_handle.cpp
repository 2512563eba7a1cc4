#include "io/file_handle.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "io/io_hooks.h"

namespace layerstream::io {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

int open_with_hooks(const std::string& path, bool direct, IoHooks* hooks) {
  if (hooks) {
    if (int err = hooks->before_open(path, direct)) {
      errno = err;
      return -1;
    }
  }
  int flags = O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0);
  int fd;
  do {
    fd = ::open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Fills offset_align / memory_align / align_source for an O_DIRECT descriptor.
void find_direct_alignment(OpenedFile& f, const struct stat& st) {
  struct statx stx {};
  // Raw syscall: glibc's struct statx may predate the DIOALIGN fields.
  if (::syscall(SYS_statx, f.fd.get(), "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) && is_pow2(stx.stx_dio_offset_align)) {
    f.offset_align = stx.stx_dio_offset_align;
    f.memory_align = is_pow2(stx.stx_dio_mem_align) ? stx.stx_dio_mem_align : f.offset_align;
    f.align_source = "statx DIOALIGN";
    return;
  }
  int lbs = 0;
  if (S_ISBLK(st.st_mode) && ::ioctl(f.fd.get(), BLKSSZGET, &lbs) == 0 && is_pow2(static_cast<uint64_t>(lbs))) {
    f.offset_align = f.memory_align = static_cast<size_t>(lbs);
    f.align_source = "BLKSSZGET";
    return;
  }
  if (is_pow2(static_cast<uint64_t>(st.st_blksize)) && st.st_blksize >= 512 && st.st_blksize <= 65536) {
    f.offset_align = f.memory_align = static_cast<size_t>(st.st_blksize);
    f.align_source = "st_blksize";
    return;
  }
  f.offset_align = f.memory_align = 4096;
  f.align_source = "default 4096";
}

}  // namespace

Result<OpenedFile> open_file(const std::string& path, bool want_direct, IoHooks* hooks,
                             std::string* why_not_direct) {
  OpenedFile f;
  f.path = path;
  if (want_direct) {
    int fd = open_with_hooks(path, true, hooks);
    if (fd >= 0) {
      f.fd = UniqueFd(fd);
      f.direct = true;
    } else if (errno == EINVAL || errno == EOPNOTSUPP) {
      if (why_not_direct) *why_not_direct = "O_DIRECT refused by the file system (" + Status::FromErrno("open", errno).message() + ")";
    } else {
      return Status::FromErrno("open " + path + " (O_DIRECT)", errno);
    }
  }
  if (!f.direct) {
    int fd = open_with_hooks(path, false, hooks);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
    f.fd = UniqueFd(fd);
  }
  struct stat st {};
  if (::fstat(f.fd.get(), &st) != 0) return Status::FromErrno("fstat " + path, errno);
  if (S_ISREG(st.st_mode)) {
    f.size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    uint64_t bytes = 0;
    if (::ioctl(f.fd.get(), BLKGETSIZE64, &bytes) != 0) return Status::FromErrno("BLKGETSIZE64 " + path, errno);
    f.size = bytes;
  } else {
    return Status::InvalidArgument("cannot read " + path + ": not a regular file or block device");
  }
  if (f.direct) {
    find_direct_alignment(f, st);
  } else {
    f.align_source = "buffered";
  }
  return f;
}

}  // namespace layerstream::io
