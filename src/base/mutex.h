// Mutex, SharedMutex, their scoped locks and CondVar: std::mutex and friends with Clang's
// thread-safety annotations (base/thread_annotations.h), so that guarded members are
// checked by the compiler. The same cost as the std types they wrap.
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Add() EXCLUDES(mu_) { MutexLock lock(mu_); ++count_; }
//
// A function that must let go of a lock for a while (to wait on the store, say) is
// REQUIRES(mu_) and calls mu_.Unlock() ... mu_.Lock() itself: the analysis follows that,
// where it cannot follow a lock object passed in by reference.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "base/thread_annotations.h"

namespace tessera {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the lock is held where it cannot see it (a callback run by
  // the lock's holder). Checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

  // BasicLockable, for std::scoped_lock over several mutexes.
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock()/Lock() let go of it and take it back within it.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::condition_variable over a Mutex. Wait* are called with the mutex held (by a
// MutexLock in scope, or by the caller of a REQUIRES function) and return with it held.
class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  void Wait(Mutex& mu) REQUIRES(mu) {
    Native native(mu);
    cv_.wait(native.lock);
  }
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate done) REQUIRES(mu) {
    Native native(mu);
    cv_.wait(native.lock, std::move(done));
  }
  // Returns done() at the end (or, without a predicate, whether it was woken in time).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout, Predicate done)
      REQUIRES(mu) {
    Native native(mu);
    return cv_.wait_for(native.lock, timeout, std::move(done));
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    Native native(mu);
    return cv_.wait_for(native.lock, timeout) == std::cv_status::no_timeout;
  }
  template <typename ClockT, typename Duration, typename Predicate>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<ClockT, Duration> deadline, Predicate done)
      REQUIRES(mu) {
    Native native(mu);
    return cv_.wait_until(native.lock, deadline, std::move(done));
  }
  template <typename ClockT, typename Duration>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<ClockT, Duration> deadline) REQUIRES(mu) {
    Native native(mu);
    return cv_.wait_until(native.lock, deadline) == std::cv_status::no_timeout;
  }

 private:
  // The held std::mutex as the unique_lock std::condition_variable waits with; left held.
  struct Native {
    explicit Native(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Native() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

// A reader-writer lock: many readers at once, one writer.
class CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() RELEASE() { mu_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderLock() RELEASE() { mu_.UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace tessera
