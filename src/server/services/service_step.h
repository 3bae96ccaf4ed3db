// ServiceStep: the locked step a service's transaction runs in (Controller::Transact and
// Controller::Read). A service (services/*.h) holds no part of the core: it acts on it
// only through this step, with the core lock held for it by the controller, and the
// controller seals, makes durable and hands out what the step decided.
//
// It is a ModuleStep (modules/controller_module.h: jobs as JobFacts, stops, a pending
// job cancelled, ...) with what users' actions need besides: the jobs a user's name
// stands for and the holds on them (the gates), a job's reason set, the loop woken, a
// job's JSON as the API shows it (an archived one's too) and where a task's terminal
// listens; what the admin's actions on nodes need (a node down, a node forgotten); and,
// read-only, what the cluster's views gather (the queue tree, the quota ledger, nodes and
// who holds their GPUs, counters, the policy). Modules are not handed one: hooks get a
// ModuleStep.
// Thread safety: a step is used on the thread that holds the core lock, for the call only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job_relations.h"
#include "base/status.h"
#include "model/queue_tree.h"
#include "plugins/job_policies.h"
#include "server/controller_counters.h"
#include "server/job_number.h"
#include "server/modules/controller_module.h"
#include "server/modules/job_gates_module.h"
#include "server/pty_sessions.h"
#include "server/views/metrics_views.h"
#include "server/views/node_views.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

class ServiceStep : public ModuleStep {
 public:
  // The gates (modules/job_gates_module.h), which act only through the step passed to
  // them (this one): the jobs a user's name stands for (DependencyJobs: an array's
  // elements by its id; this user's step may read the store, letting go of the core
  // lock as FindOrLoad does), a hold watched (Watch), a lifted one looked at again
  // (Recheck) and the pass run now (Update).
  virtual JobGatesModule& gates() = 0;
  // The job's row reason from now on: the row is stored and the view republished with
  // the step. No effect on a job not in memory; on a read-only step a programming error
  // (the process aborts with a message, as Put).
  virtual void SetReason(JobNumber job, std::string reason) = 0;
  // The scheduling loop is woken once the transaction ends, whatever its outcome.
  virtual void WakeLoop() = 0;
  // The job's JSON as GET /v1/jobs/{id} shows it (its spec too); null for a job not in
  // memory. Read it after the step is sealed (Transact's `sealed`) to see the stored row.
  virtual nlohmann::json Describe(JobNumber job) const = 0;

  // ---- the API's job reads (services/job_reads.h) ----
  // As Describe, of a job in memory or archived out of it (read from the store as
  // FindOrLoad reads it, letting go of the core lock); null when there is none or `show`,
  // asked first with its facts, says no.
  virtual nlohmann::json DescribeFound(JobNumber job,
                                       const std::function<bool(const JobFacts&)>& show) = 0;
  // Where task `task` of attempt `attempt` of `job` has its terminal, as its agent
  // reported, and the attempt's secret (server/pty_sessions.h); nullopt: not reported.
  using Terminal = PtyTerminal;
  virtual std::optional<Terminal> TerminalOf(JobNumber job, int task, int attempt) const = 0;

  // ---- the admin's actions on nodes (services/node_actions.h) ----
  // The jobs running or stopping with a task still running on `node`, in id order.
  virtual std::vector<JobNumber> JobsOnNode(const std::string& node) const = 0;
  // `node` is down from now on with `reason`: its tasks still running are lost with it
  // (requeued or failed by their restart policies), as when its heartbeats stop. No
  // effect on an unknown node or on a step that commits nothing.
  virtual void NodeDown(const std::string& node, const std::string& reason) = 0;
  // The core forgets `node` (put down first: NodeDown): the modules are told
  // (OnNodeRemoved), its removal marker (read at Open and cleared at its next first
  // registration) and its cleared drains are durable with the step, and it is no longer
  // known: a NodeInfo of it read before does not survive, and its jobs' views are sealed
  // without it. Not from within a visit. No effect on an unknown node or on a step that
  // commits nothing.
  virtual void ForgetNode(const std::string& node) = 0;
  // A token row made durable with the step (as Put's key-value rows; the same rules).
  virtual void PutToken(TokenRow row) = 0;

  // ---- the cluster's views (services/cluster_views.h): reads only ----
  // What the views read of the core; the references hold for the step only.
  struct CoreFigures {
    const QueueTree& tree;
    const QuotaLedger* quota;    // null while the core is rebuilt: nothing in use
    const ClusterState* state;   // null while the core is rebuilt
    const std::map<std::string, NodeInfo>& nodes;  // every known node, up or down
    const ControllerCounters& counters;
    SchedulerFigures scheduler;
    const SchedulerPolicy& policy;  // as it runs
    const std::string& placement;   // ControllerOptions::placement
    uint64_t seed;                  // ControllerOptions::seed
  };
  virtual CoreFigures Figures() const = 0;
  // The nodes' view inputs (views/node_views.h) of every node, or only of `only`.
  virtual void VisitNodeInputs(const std::string& only,
                               const std::function<void(const NodeViewInputs&)>& visit) const = 0;
  // Queue `q`'s fair-share usage and factor (FairShareJson, scheduler_memory.h).
  virtual nlohmann::json FairShare(QueueId q) const = 0;
  // What the feature modules add to a queue's JSON and to /metrics, in their order.
  virtual void DescribeQueue(const std::string& queue, nlohmann::json& out) const = 0;
  virtual void WriteModuleMetrics(MetricsWriter& w) const = 0;
};

}  // namespace tessera
