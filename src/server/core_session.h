// CoreSession: the scheduling core as the live controller drives it: the policy, the
// queue tree, the ClusterState, the QuotaLedger, the JobScheduler and the JobLifecycle
// that applies every decision and transition to them, with what the core learns across
// rebuilds (fair-share usage carried over, the runtime predictor) and the last cycle's
// reservation.
//
// Life: the policy is chosen once at Open (ChoosePolicy, MakeLifecycle); the queue tree
// at Open and again when an admin replaces it (ApplyQueueYaml). The cluster state, quota
// ledger and scheduler are built at the first cycle and again only after the queue tree
// changed (BuildState, BuildScheduler, FinishRebuild), or after an in-place node change
// failed (RequestRebuild). Between
// rebuilds nodes join and leave the ClusterState in place, and ApplyNodeChanges regroups
// the scheduler before its next decision.
//
// Invariants: while rebuild_pending() is false, state(), quota() and scheduler() are
// non-null and the lifecycle is bound to them and to tree(); JobLifecycle::
// CheckInvariants holds after every cycle. The lifecycle's records are the JobTable's.
//
// Thread safety: none of its own. It is the controller's core state, guarded by the
// controller's core lock (Controller::mu_): the caller holds it for every call and for as
// long as it uses what an accessor returned. Published copies (the wait context's tree
// and quota ledger) are immutable and may be read without it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "plugins/job_policies.h"
#include "plugins/workload_learner.h"
#include "sched/framework.h"
#include "sched/job_lifecycle.h"
#include "sched/job_record.h"
#include "sched/job_scheduler.h"
#include "sched/runtime_predictor.h"
#include "server/job_views.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

class JobTable;
struct LiveJob;
struct EtaSnapshot;
struct ForecastInput;

class CoreSession {
 public:
  // `placement`: the plugins/registry.h placement profile.
  CoreSession(const GpuCatalog& catalog, uint64_t seed, std::string placement);

  // `given` replaces the preset `name` and its bounds as is; else the preset `name`, its
  // reclaim bound raised to `min_run_before_reclaim` and its victims held for their
  // preemptors up to `victim_hold`. FailedPrecondition for an oracle policy, which only
  // the simulator can run.
  Status ChoosePolicy(const std::optional<SchedulerPolicy>& given, const std::string& name,
                      Micros min_run_before_reclaim, Micros victim_hold);
  // Parses and applies a queue configuration; the core is rebuilt before the next cycle.
  Status ApplyQueueYaml(const std::string& yaml);
  // The lifecycle over `records` (the JobTable's, by slot), telling `listener` (may be
  // null) every transition. After ChoosePolicy and ApplyQueueYaml.
  void MakeLifecycle(std::vector<JobRecord>* records, LifecycleListener* listener);

  // A rebuild: the cluster state of `nodes` (in the order they first became known),
  // then, once the caller applied the drains, the quota ledger and the scheduler (fair
  // share carried over from the old one, taken at `now`) bound to the lifecycle. The
  // caller then restores every job into the lifecycle and calls FinishRebuild.
  Status BuildState(std::vector<NodeSpec> nodes);
  Status BuildScheduler(Micros now);
  void FinishRebuild();
  // Drops the scheduler and quota ledger after the queue tree was replaced (their
  // pointers into the old tree do not survive); fair share is carried over.
  void DropScheduler(Micros now);
  // An in-place change failed: the core is built afresh before the next cycle.
  void RequestRebuild() { rebuild_ = true; }
  bool rebuild_pending() const { return rebuild_; }
  uint64_t rebuilds() const { return rebuilds_; }

  // The queue configuration in force, to put back when a replacement fails.
  struct Queues {
    std::shared_ptr<QueueTree> tree;
    std::string yaml;
  };
  Queues TakeQueues();
  void RestoreQueues(Queues old);

  // The node set changed: the placer's scale and the scheduler's groups are
  // recomputed (O(nodes)) by the next ApplyNodeChanges, once for any number of changes,
  // so that a fleet of N agents registering costs O(N), not O(N^2).
  void NodesChanged() { nodes_changed_ = true; }
  // Before a decision or a published wait context: brings them up to date. A failure falls
  // back to a rebuild (logged).
  void ApplyNodeChanges();
  // A job was submitted: its tasks teach the workload model.
  void ObserveSubmission(const JobSpec& spec) { learner_.ObserveJob(spec); }
  // Before a decision: when the learned workload moved enough, a fragmentation-aware
  // placement (tessera, fgd) is remade from it (bestfit stands in until the first task).
  void RefreshPlacement();
  WorkloadLearner& learner() { return learner_; }
  const WorkloadLearner& learner() const { return learner_; }
  // What breaks the core's invariants now; empty when they hold or while rebuilding.
  std::vector<std::string> CheckInvariants() const;
  // Takes the scheduler's fair-share usage up to `now` (before it is replaced or stored).
  void CarryUsage(Micros now);

  // What pending jobs' reasons are worked out from (job_views.h), of the core as it is
  // and of `jobs` (whose records the lifecycle runs on) at `now`: all but the fit
  // verdicts and down nodes, which the node registry gives (known_nodes.h). Only
  // `built`, false, while the core is not built. After ApplyNodeChanges: the node set
  // the scheduler and reservation were made for is the one published.
  WaitContext WaitContextOf(const JobTable& jobs, Micros now) const;
  // The forecast's copy of the core into `in` (sim/start_forecast.h), at `now`: the
  // queue tree, cluster state, policy, placement, learned typical workload and
  // fair-share usage. False, nothing copied, while the core is not built.
  bool CopyForForecast(Micros now, ForecastInput& in) const;
  // After CopyForForecast: the durable unfinished jobs of `jobs` into `snap`'s forecast
  // (its ids, and the core predictor's estimates when the policy trains it), the
  // reserved one marked. A pending job behind a gate is left out (it takes no room from
  // the jobs that may start), with `gate_reason(job)` as why ("": the next cycle's).
  void CopyForecastJobs(const JobTable& jobs,
                        const std::function<std::string(const LiveJob&)>& gate_reason,
                        EtaSnapshot& snap) const;

  const SchedulerPolicy& policy() const { return policy_; }
  const QueueTree& tree() const { return *tree_; }
  // Shared with the published wait context, which outlives a replaced tree.
  const std::shared_ptr<QueueTree>& shared_tree() const { return tree_; }
  const std::string& queues_yaml() const { return queues_yaml_; }
  // Null until the first rebuild.
  ClusterState* state() { return state_.get(); }
  const ClusterState* state() const { return state_.get(); }
  QuotaLedger* quota() { return quota_.get(); }
  const QuotaLedger* quota() const { return quota_.get(); }
  JobScheduler* scheduler() { return scheduler_.get(); }
  const JobScheduler* scheduler() const { return scheduler_.get(); }
  JobLifecycle* lifecycle() { return lifecycle_.get(); }
  const JobLifecycle* lifecycle() const { return lifecycle_.get(); }
  // The last cycle's reservation; reset when the node set changes.
  std::optional<Reservation>& reservation() { return reservation_; }
  const std::optional<Reservation>& reservation() const { return reservation_; }
  Pcg32& rng() { return rng_; }
  RuntimePredictor& predictor() { return predictor_; }
  // Fair-share usage waiting for the next scheduler (after a restart or a rebuild).
  std::optional<QueueUsage::Saved>& carried_usage() { return carried_usage_; }

 private:
  StatusOr<Profile> MakePlacement() const;

  const GpuCatalog* catalog_;
  std::string placement_;
  SchedulerPolicy policy_;
  std::string queues_yaml_;
  std::shared_ptr<QueueTree> tree_;  // shared with the published wait context
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<QuotaLedger> quota_;
  std::unique_ptr<JobScheduler> scheduler_;
  // Applies the core's decisions and every job's transitions (bound to state_, quota_
  // and scheduler_ once they are built).
  std::unique_ptr<JobLifecycle> lifecycle_;
  bool rebuild_ = true;
  bool nodes_changed_ = false;  // since the last ApplyNodeChanges or build
  uint64_t rebuilds_ = 0;
  std::optional<Reservation> reservation_;
  Pcg32 rng_;
  RuntimePredictor predictor_;
  // The workload's typical tasks, learned from submissions (fragmentation-aware placement).
  WorkloadLearner learner_;
  std::optional<QueueUsage::Saved> carried_usage_;
};

}  // namespace tessera
