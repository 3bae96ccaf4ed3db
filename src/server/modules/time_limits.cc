#include "server/time_limits.h"

#include <algorithm>

namespace tessera {

void TimeLimits::Watch(const Attempt& a) {
  if (a.limit <= 0) {
    return;
  }
  const Micros limit_at = a.run_start + a.limit;
  if (a.signal > 0) {
    const Micros signal_at = std::min(limit_at, limit_at - std::max<Micros>(0, a.signal_before));
    heap_.push(Entry{signal_at, seq_++,
                     Due{Due::Kind::kSignal, a.job, a.attempt, a.signal, limit_at}});
  }
  heap_.push(Entry{limit_at, seq_++, Due{Due::Kind::kLimit, a.job, a.attempt, 0, limit_at}});
}

std::vector<TimeLimits::Due> TimeLimits::TakeDue(Micros now) {
  std::vector<Due> out;
  while (!heap_.empty() && heap_.top().at <= now) {
    out.push_back(heap_.top().due);
    heap_.pop();
  }
  return out;
}

}  // namespace tessera
