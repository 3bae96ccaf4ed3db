// GET /v1/admin/history: the cluster's recorded history for what-if replays
// (sim/whatif.h): the jobs submitted in a window with every ended run, the node
// inventory's recorded changes (modules/node_history.h), the policy as it runs and the
// queue configuration. Read from the store (thread-safe, every durable row, archived
// jobs included), so it needs nothing of the controller's core but the policy it runs,
// which the caller copies under its lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "store/store.h"

namespace tessera {

// The policy and queues as the controller runs them now.
struct HistoryPolicy {
  nlohmann::json policy;  // name, placement, seed and the bounds (ClusterHistoryPage's "policy")
  std::string queues_yaml;
};

// A page of at most `limit` jobs with ids above `after`, submitted in [since, until);
// "next_after" names the next page (null on the last). InvalidArgument for an empty
// window or a limit outside 1..10000.
StatusOr<nlohmann::json> ClusterHistoryPage(Store& store, const HistoryPolicy& policy,
                                            Micros since, Micros until, uint64_t after,
                                            int64_t limit);

}  // namespace tessera
