// Kernel-time pacing for one process. Each paced launch is bracketed by two timing
// events on its stream; completed pairs are read lazily (cuEventQuery) at later
// launches and their elapsed GPU time is charged to a token bucket that refills at
// the compute share of wall time. A launch made while the bucket is in debt first
// sleeps the launching thread until the debt is repaid. At most kMaxPending launches
// are in flight unmeasured: beyond that the oldest is waited for (cuEventSynchronize),
// which bounds how far the GPU can run ahead of the bucket.
// Thread-safe (one mutex; sleeping happens outside it).
#ifndef TESSERA_LIMITER_PACER_H_
#define TESSERA_LIMITER_PACER_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "limiter/limiter_runtime.h"
#include "limiter/token_bucket.h"

namespace tessera_limiter {

class Pacer {
 public:
  static constexpr std::int64_t kBurstNs = 100'000'000;  // 100 ms of credit
  static constexpr std::size_t kMaxPending = 64;

  Pacer(const RealDriver& real, int percent);

  // Before a launch: charges completed work, sleeps while in debt, then records the
  // start event. Returns the measurement to hand to AfterLaunch (may be empty).
  struct Measure {
    CUcontext context = nullptr;
    CUevent start = nullptr;
    CUevent stop = nullptr;
  };
  Measure BeforeLaunch(CUstream stream, bool per_thread);
  // After the launch: records the stop event when the launch was accepted.
  void AfterLaunch(const Measure& measure, CUstream stream, bool per_thread,
                   CUresult launch_result);

  // Totals for the exit log line.
  std::int64_t charged_ns() const;
  std::int64_t slept_ns() const;
  std::int64_t launches() const;

 private:
  struct Pending {
    CUcontext context;
    CUevent start;
    CUevent stop;
  };
  void PollLocked(bool wait_oldest);
  bool TakeEventsLocked(CUcontext context, CUevent* start, CUevent* stop);
  void RecycleLocked(CUcontext context, CUevent start, CUevent stop);
  void ChargeLocked(const Pending& done);

  const RealDriver& real_;
  mutable std::mutex mu_;
  TokenBucket bucket_;
  std::deque<Pending> pending_;
  std::unordered_map<CUcontext, std::vector<CUevent>> free_events_;
  std::int64_t charged_ns_ = 0;
  std::int64_t slept_ns_ = 0;
  std::int64_t launches_ = 0;
};

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_PACER_H_
