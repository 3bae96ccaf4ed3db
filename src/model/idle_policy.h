// A queue's idle policy as a value (the YAML reading is api/queue_idle.h): when a
// running job's GPUs count as idle, and what is done then. The live controller and the
// simulator judge idleness the same way (sched/idle_watch.h).
// Thread safety: values, no shared state.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/clock.h"

namespace tessera {

enum class IdleAction : uint8_t { kNotify, kRequeue, kCancel };
std::string_view IdleActionName(IdleAction action);

struct IdlePolicy {
  int below_pct = 5;                      // utilisation under this is idle; 0: never idle
  Micros window = 30LL * 60 * 1'000'000;  // idle this long (and run this long) to flag
  IdleAction action = IdleAction::kNotify;
  bool operator==(const IdlePolicy&) const = default;
};

}  // namespace tessera
