// A queue's bound on its pending jobs: what one tenant can leave waiting in the
// controller (each pending job costs memory, and every cycle and restart walks them).
//
//   queues:
//     - name: team-a
//       maxPending: 20000     # jobs submitted and not yet started, arrays' elements each
//
// Optional; a queue without it gets kDefaultMaxPending. A submission that would take a
// queue past its bound is refused whole (429, nothing made). queue_config.cc accepts the
// key and checks it with ReadMaxPending; the controller reads the bounds from the same
// text (QueueMaxPending). Errors name the YAML path ("queues[1].maxPending: ...").
// Thread safety: functions, no shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// 50,000 pending jobs are a few hundred MB of controller memory and a large array's
// worth many times over; a site that needs more says so per queue.
inline constexpr int64_t kDefaultMaxPending = 50'000;
inline constexpr int64_t kMaxMaxPending = 10'000'000;

// The `maxPending` value at `path`: an integer 1..kMaxMaxPending.
StatusOr<int64_t> ReadMaxPending(const YAML::Node& node, const std::string& path);
// Every queue's bound by queue name (queues without `maxPending` get the default;
// cohorts have none), from the queue configuration's YAML text.
StatusOr<std::map<std::string, int64_t>> QueueMaxPending(std::string_view yaml);

}  // namespace tessera
