// pread thread-pool backend: `threads` workers each doing blocking pread(2)
// on the shared descriptor. Used when io_uring is unavailable, and (on a
// buffered descriptor) as the buffered path. Internal to io/.
#pragma once

#include <memory>

#include "io/read_backend.h"

namespace layerstream::io {

// `fd` must outlive the backend. threads: 1..1024.
std::unique_ptr<ReadBackend> make_pread_backend(int fd, unsigned threads);

}  // namespace layerstream::io
