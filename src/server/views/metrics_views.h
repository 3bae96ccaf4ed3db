// The controller's Prometheus text (/metrics) and its DCGM-named GPU families
// (/metrics/gpus), written from what the core gathers under its lock.
//
// A view: it owns nothing and changes nothing. Every figure it prints is in its
// arguments (the queue tree and quota ledger, the node registry's nodes, the cluster
// state's ledgers, the controller's counters), so the families' names, help and labels
// live here once and the core does not carry them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "metrics/exposition.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "server/controller_counters.h"
#include "server/node_registry.h"
#include "server/views/gpu_holds.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

// Jobs by (queue, "pending" | "running") and the job counters by queue; every queue of
// `tree` appears, with zeros.
void WriteJobMetrics(MetricsWriter& w, const QueueTree& tree,
                     const std::map<std::pair<std::string, std::string>, int64_t>& jobs,
                     const ControllerCounters& counters);

// What the scheduling loop and the placement's workload model did.
struct SchedulerFigures {
  uint64_t rebuilds = 0;        // CoreSession::rebuilds
  int64_t tasks_observed = 0;   // WorkloadLearner::observed
  int64_t models_made = 0;      // WorkloadLearner::models_made
  size_t typical_tasks = 0;     // shapes in the learner's model (0: none yet)
};
void WriteSchedulerMetrics(MetricsWriter& w, const ControllerCounters& counters,
                           const SchedulerFigures& figures);

// Each queue's and cohort's quota per resource; `ledger` null (the core is being
// rebuilt): nothing in use.
void WriteQuotaMetrics(MetricsWriter& w, const QueueTree& tree, const QuotaLedger* ledger,
                       const GpuCatalog& catalog);

// The agents, the nodes' labels, and each GPU's allocation and drain on the nodes that
// are up; `state` null (the core is being rebuilt): no GPU rows.
void WriteNodeMetrics(MetricsWriter& w, const std::map<std::string, NodeInfo>& nodes,
                      const ClusterState* state);

// /metrics/gpus: the agents' last samples with the DCGM exporter's names and labels,
// plus the tenant and job holding each GPU or MIG instance.
std::string GpuMetricsText(const std::map<std::string, NodeInfo>& nodes, const GpuHolds& holds,
                           const GpuCatalog& catalog);

}  // namespace tessera
