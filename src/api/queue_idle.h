// A queue's idle policy: when a running job's GPUs count as idle, and what is done then.
//
//   queues:
//     - name: team-a
//       idle: {below: 5%, for: 30m, action: notify}   # notify | requeue | cancel
//
// Every key is optional; a queue without `idle` gets the defaults (below 5 %, for 30 m,
// notify). `below` is a whole percentage 0..100 ("5%" or 5; 0 turns detection off),
// `for` a duration of at least 1 minute (units.h: "30m", "1h"). Errors name the YAML path
// ("queues[1].idle.action: ..."). queue_config.cc accepts the key and checks it with
// ReadIdlePolicy; the controller reads the policies from the same text.
// Thread safety: functions, no shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "model/idle_policy.h"

namespace tessera {

// The `idle` map of a queue at `path`.
StatusOr<IdlePolicy> ReadIdlePolicy(const YAML::Node& node, const std::string& path);
// Every queue's policy by queue name (queues without `idle` get the defaults; cohorts
// have none), from the queue configuration's YAML text. Unparsable text: an error.
StatusOr<std::map<std::string, IdlePolicy>> QueueIdlePolicies(std::string_view yaml);
// "below 5% for 30m: notify" ("off" when below is 0), as `tessera queues` shows it.
std::string IdlePolicyText(const IdlePolicy& policy);
// {"below_pct", "for": "30m", "action", "text"} as GET /v1/queues shows it.
nlohmann::json IdlePolicyJson(const IdlePolicy& policy);

}  // namespace tessera
