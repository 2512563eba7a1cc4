#include "runtime/model/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/core/status_macros.h"

namespace layerstream {

Result<std::unique_ptr<FileByteSource>> FileByteSource::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("cannot stat " + path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a regular file");
  }
  return std::unique_ptr<FileByteSource>(new FileByteSource(path, fd, static_cast<uint64_t>(st.st_size)));
}

FileByteSource::~FileByteSource() { ::close(fd_); }

Status FileByteSource::read_at(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return Status::Corruption(path_ + ": read of " + std::to_string(n) + " bytes at byte " + std::to_string(offset) +
                              " is past the end of the file (" + std::to_string(size_) + " bytes)");
  }
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path_ + ": pread at byte " + std::to_string(offset), errno);
    }
    if (r == 0) {
      return Status::IOError(path_ + ": unexpected end of file at byte " + std::to_string(offset) +
                             " (the file shrank while being read?)");
    }
    out += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Status MemoryByteSource::read_at(uint64_t offset, void* dst, size_t n) const {
  if (offset > bytes_.size() || n > bytes_.size() - offset) {
    return Status::Corruption(name_ + ": read of " + std::to_string(n) + " bytes at byte " + std::to_string(offset) +
                              " is past the end (" + std::to_string(bytes_.size()) + " bytes)");
  }
  if (n) std::memcpy(dst, bytes_.data() + offset, n);
  return Status::OK();
}

BufferedReader::BufferedReader(const ByteSource& src, uint64_t start) : src_(src), pos_(start) {}

Status BufferedReader::truncated(size_t n, const char* what) const {
  return Status::Corruption(src_.name() + ": truncated file: reading " + what + " (" + std::to_string(n) +
                            " bytes) at byte " + std::to_string(pos_) + " but only " + std::to_string(remaining()) +
                            " bytes remain (file size " + std::to_string(src_.size()) + ")");
}

Status BufferedReader::read(void* dst, size_t n, const char* what) {
  if (n > remaining()) return truncated(n, what);
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    if (pos_ >= buf_start_ && pos_ < buf_start_ + buf_len_) {
      size_t in_buf = static_cast<size_t>(buf_start_ + buf_len_ - pos_);
      size_t take = std::min(in_buf, n);
      std::memcpy(out, buf_.data() + (pos_ - buf_start_), take);
      out += take;
      n -= take;
      pos_ += take;
      continue;
    }
    if (n >= kBufferBytes) {  // large reads bypass the buffer
      LS_RETURN_IF_ERROR(src_.read_at(pos_, out, n));
      pos_ += n;
      return Status::OK();
    }
    if (buf_.empty()) buf_.resize(kBufferBytes);
    size_t fill = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, remaining()));
    LS_RETURN_IF_ERROR(src_.read_at(pos_, buf_.data(), fill));
    buf_start_ = pos_;
    buf_len_ = fill;
  }
  return Status::OK();
}

Status BufferedReader::skip(uint64_t n, const char* what) {
  if (n > remaining()) return truncated(static_cast<size_t>(std::min<uint64_t>(n, SIZE_MAX)), what);
  pos_ += n;
  return Status::OK();
}

}  // namespace layerstream
