#include "limiter/token_bucket.h"

#include <algorithm>
#include <cstdint>

namespace tessera_limiter {

TokenBucket::TokenBucket(int percent, std::int64_t burst_ns, std::int64_t now_ns)
    : percent_(std::clamp(percent, 1, 100)),
      burst_ns_(std::max<std::int64_t>(burst_ns, 0)),
      balance_ns_(burst_ns_),
      last_ns_(now_ns) {}

void TokenBucket::Charge(std::int64_t kernel_ns) {
  if (kernel_ns > 0) balance_ns_ -= kernel_ns;
}

void TokenBucket::Refill(std::int64_t now_ns) {
  if (now_ns <= last_ns_) return;
  // Beyond this much wall time the bucket is full whatever its debt was before it
  // (bounded so that the product below cannot overflow).
  const std::int64_t debt = std::max<std::int64_t>(-balance_ns_, 0);
  const std::int64_t enough = (burst_ns_ + debt) / percent_ * 100 + 100;
  const std::int64_t elapsed = std::min(now_ns - last_ns_, enough);
  balance_ns_ = std::min(burst_ns_, balance_ns_ + elapsed * percent_ / 100);
  last_ns_ = now_ns;
}

std::int64_t TokenBucket::DelayNs(std::int64_t now_ns) {
  Refill(now_ns);
  if (balance_ns_ >= 0) return 0;
  return (-balance_ns_ * 100 + percent_ - 1) / percent_;
}

}  // namespace tessera_limiter
