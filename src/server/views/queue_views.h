// The queues' JSON (GET /v1/queues), from typed inputs the core gathers under its lock:
// the queue tree and its quota ledger, the jobs each queue holds, each queue's bound on
// pending jobs and its fair-share standing. Feature modules add their own members to
// each queue afterwards (ControllerModule::DescribeQueue).
//
// A view: it owns nothing and changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "state/quota_ledger.h"

namespace tessera {

struct QueueViewInputs {
  const QueueTree& tree;
  const QuotaLedger* ledger;  // null while the core is rebuilt: nothing in use
  const GpuCatalog& catalog;
  // Jobs (pending, running or stopping) by queue name.
  const std::map<std::string, std::pair<int64_t, int64_t>>& jobs;
  const std::map<std::string, int64_t>& max_pending;  // by queue name
  // Each queue's fair-share usage and factor, by QueueId's value (null: none).
  const std::vector<nlohmann::json>& fair_share;
};

// One object per queue and cohort, in the tree's order (QueueId 0, 1, ...).
nlohmann::json QueuesJson(const QueueViewInputs& in);

}  // namespace tessera
