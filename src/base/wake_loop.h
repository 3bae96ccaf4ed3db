// WakeLoop: a thread that runs a callback every interval of wall time, or as soon as it
// is woken, until it is stopped.
//
//   WakeLoop loop;
//   loop.Start([this] { RunCycle(); }, 50'000);  // every 50 ms ...
//   loop.Wake();                                 // ... or now
//   loop.Stop();                                 // joins; idempotent
//
// A cycle starts `interval` after the last one ended (or after Start), or as soon as
// Wake was called since the last one started; Wakes before a cycle starts make one
// cycle. interval <= 0: cycles back to back. A Wake before Start makes the first cycle
// run at once.
// Thread safety: Wake from any thread, also from within a cycle. Start and Stop from one
// thread at a time, never from within a cycle (Stop joins the cycle's thread). Lock
// order: the loop's own lock is held only within Start, Wake and Stop and between
// cycles, never while `cycle` runs; so a cycle may take any lock, and Wake may be called
// with any other lock held (the loop's lock is taken after it).
#pragma once

#include <functional>
#include <thread>

#include "base/clock.h"
#include "base/mutex.h"

namespace tessera {

class WakeLoop {
 public:
  WakeLoop() = default;
  WakeLoop(const WakeLoop&) = delete;
  WakeLoop& operator=(const WakeLoop&) = delete;
  ~WakeLoop() { Stop(); }

  // Starts the thread running `cycle`; false (nothing changed) when it is running
  // already. After Stop it may start again.
  bool Start(std::function<void()> cycle, Micros interval) EXCLUDES(mu_);
  // The next cycle starts now (or, mid-cycle, as soon as this one ends).
  void Wake() EXCLUDES(mu_);
  // Lets the cycle under way end and joins the thread; no effect when not running.
  void Stop() EXCLUDES(mu_);

 private:
  void Run(const std::function<void()>& cycle, Micros interval) EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  bool wake_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // set by Start under mu_, joined by Stop
};

}  // namespace tessera
