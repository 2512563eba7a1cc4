// io_uring backend: one ring per reader, the file registered (fixed file),
// optional fixed buffers, waits with io_uring_wait_cqe (no busy spin, no
// SQPOLL/IOPOLL). Internal to io/.
#pragma once

#include <memory>

#include "io/read_backend.h"

namespace layerstream::io {

class IoHooks;

// Sets up a ring of `queue_depth` entries reading `fd` (which must outlive the
// backend). Errors carry the errno io_uring setup failed with (ENOSYS, EPERM,
// ENOMEM) so the caller can fall back; *setup_errno receives it.
Result<std::unique_ptr<ReadBackend>> make_uring_backend(int fd, unsigned queue_depth, IoHooks* hooks,
                                                        int* setup_errno);

}  // namespace layerstream::io
