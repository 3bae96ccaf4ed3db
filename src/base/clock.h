// Clock: the only way core code learns the time.
//
// Scheduling code takes time as an argument; drivers own a Clock. The server uses
// SystemClock, tests and the simulator a ManualClock that moves only when told,
// so nothing sleeps. Times are integer microseconds since the Unix epoch.
// Thread safety: SystemClock is thread-safe; ManualClock is not.
#pragma once

#include <cstdint>

namespace tessera {

using Micros = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Micros NowMicros() const = 0;
};

class SystemClock final : public Clock {
 public:
  Micros NowMicros() const override;
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = 0) : now_(start) {}
  Micros NowMicros() const override { return now_; }
  void Advance(Micros delta) { now_ += delta; }
  void Set(Micros now) { now_ = now; }

 private:
  Micros now_;
};

// Milliseconds of a monotonic clock (not wall time): deadlines of a process's own waits
// (a kill's wait, a terminal's hello), which a wall clock's steps must not move.
int64_t MonotonicMillis();

}  // namespace tessera
