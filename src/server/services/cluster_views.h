// ClusterViews: the cluster-wide reads of the API: the nodes and who holds their GPUs,
// the queues, the tenants, Prometheus' text (/metrics, /metrics/gpus), tenants' GPU
// usage (sums and series) and the admin's history pages for what-if replays.
//
// Owns: nothing of the core and no state of its own: it gathers what the views
// (views/*.h, modules/usage_report.h, cluster_history.h) are written from. One may be
// built over a controller at any time, and many may share one.
// Reads: the core only through Controller::Read, whose ServiceStep hands it read-only
// figures (Figures: the queue tree, the quota ledger, the nodes, the counters, the
// policy; VisitNodeInputs; FairShare; the modules' parts: DescribeQueue,
// WriteModuleMetrics) and the jobs as JobFacts; the store (usage intervals, job rows,
// the node history) directly, never with the core lock held: Usage and UsageSeries read
// the store first and take the lock after, for the running jobs' intervals; History
// copies the policy under the lock first and reads the store after.
// Thread safety: as the controller's; every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "server/controller.h"
#include "server/http/auth.h"
#include "server/services/service_step.h"
#include "store/store.h"

namespace tessera {

class ClusterViews {
 public:
  // `controller` and `store` (the controller's) must outlive the service.
  ClusterViews(Controller& controller, Store& store) : controller_(&controller), store_(&store) {}

  // GET /v1/nodes: {"nodes": [...]} as the admin sees them.
  nlohmann::json Nodes();
  // ... as `who` sees them: a tenant sees which tenant holds each GPU but not the job
  // ids or names of other tenants' jobs.
  nlohmann::json Nodes(const Principal& who);
  // GET /v1/queues: {"queues": [...]}, each queue and cohort in the tree's order, with
  // its jobs pending and running, its quota, maxPending, fair share and the modules'
  // members.
  nlohmann::json Queues();
  // The tenants named by the queue configuration, each once, in the tree's order.
  std::vector<std::string> Tenants();
  // Prometheus text: the scheduler, queues, agents and GPU allocation (/metrics).
  std::string Metrics();
  // Prometheus text with the DCGM exporter's names and labels, plus the tenant and job
  // holding each GPU or MIG instance ("tenant", "job_id": Prometheus keeps "job" for
  // the scrape job), from the agents' last samples (/metrics/gpus).
  std::string GpuMetrics();
  // GET /v1/usage: GPU-seconds over [since, until) by `by` (SumUsage); `tenant`
  // non-empty: only that tenant's usage.
  StatusOr<nlohmann::json> Usage(Micros since, Micros until, const std::string& by,
                                 const std::string& tenant = "");
  // GPUs in use per tenant over [since, until) in buckets of `step`: the average
  // number of GPUs (shares and MIG slices by their fraction of a card) each tenant
  // held in each bucket, with its nominal GPU quota. `tenant` non-empty: only it.
  // InvalidArgument for an empty window, a step <= 0 or more than 1,000 buckets.
  StatusOr<nlohmann::json> UsageSeries(Micros since, Micros until, Micros step,
                                       const std::string& tenant = "");
  // GET /v1/admin/history: the jobs submitted in [since, until) with every ended
  // attempt, the node inventory's recorded changes, the policy as it runs and the queue
  // configuration; a page of at most `limit` jobs with ids above `after`, and
  // "next_after" for the next page (null on the last). InvalidArgument for an empty
  // window or a limit outside 1..10000.
  StatusOr<nlohmann::json> History(Micros since, Micros until, uint64_t after, int64_t limit);

 private:
  // A read of the core that cannot fail (Controller::Read with the core lock held).
  void Look(const std::function<void(const ServiceStep&)>& look);
  // The running jobs' intervals overlapping [since, until), appended to `rows`; with
  // `quota_gpus`, each tenant's nominal GPU quota too.
  void AddRunning(Micros since, Micros until, std::vector<UsageRow>& rows,
                  std::map<std::string, double>* quota_gpus = nullptr);
  nlohmann::json NodesAs(const Principal* viewer);

  Controller* controller_;
  Store* store_;
};

}  // namespace tessera
