// Compute pacing: a token bucket measured in nanoseconds of kernel time. Wall time
// refills it at percent/100 (a 25 % share earns 250 us of kernel time per wall ms), up
// to `burst_ns` of credit; measured kernel time is charged against it and may push it
// into debt. A launch waits until the debt is repaid. Time is passed in (no clock
// here); not thread-safe (the caller holds its own lock).
#ifndef TESSERA_LIMITER_TOKEN_BUCKET_H_
#define TESSERA_LIMITER_TOKEN_BUCKET_H_

#include <cstdint>

namespace tessera_limiter {

class TokenBucket {
 public:
  // Starts full. percent in 1..100.
  TokenBucket(int percent, std::int64_t burst_ns, std::int64_t now_ns);

  // Kernel time measured for completed work.
  void Charge(std::int64_t kernel_ns);
  // Refills up to `now_ns` and returns how long a launch must wait for the balance to
  // be back at zero (0 when not in debt).
  std::int64_t DelayNs(std::int64_t now_ns);

  std::int64_t balance_ns() const { return balance_ns_; }

 private:
  void Refill(std::int64_t now_ns);

  int percent_;
  std::int64_t burst_ns_;
  std::int64_t balance_ns_;
  std::int64_t last_ns_;
};

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_TOKEN_BUCKET_H_
