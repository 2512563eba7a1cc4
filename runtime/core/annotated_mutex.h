// Clang thread-safety annotations and a mutex that carries them, so that
// `-Wthread-safety` checks at compile time that state marked LS_GUARDED_BY(mu)
// is only touched with mu held (leveldb's port/thread_annotations.h idea).
// The macros are empty on compilers without the analysis (GCC).
// Areas that use them compile with -Werror=thread-safety under clang (their
// CMakeLists.txt); tests/run.sh's clang build is that check in CI.
#pragma once

#include <mutex>

#if defined(__clang__)
#define LS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define LS_THREAD_ANNOTATION(x)
#endif

#define LS_CAPABILITY(x) LS_THREAD_ANNOTATION(capability(x))
#define LS_SCOPED_CAPABILITY LS_THREAD_ANNOTATION(scoped_lockable)
#define LS_GUARDED_BY(x) LS_THREAD_ANNOTATION(guarded_by(x))
#define LS_PT_GUARDED_BY(x) LS_THREAD_ANNOTATION(pt_guarded_by(x))
#define LS_REQUIRES(...) LS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define LS_ACQUIRE(...) LS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define LS_RELEASE(...) LS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define LS_EXCLUDES(...) LS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace layerstream {

// std::mutex with the capability annotation (libstdc++'s has none).
class LS_CAPABILITY("mutex") Mutex {
 public:
  void lock() LS_ACQUIRE() { mu_.lock(); }
  void unlock() LS_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class LS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) LS_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() LS_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace layerstream
