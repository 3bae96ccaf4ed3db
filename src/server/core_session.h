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
#include <utility>
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
#include "server/job_number.h"
#include "server/job_views.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

class JobTable;
class NodeRegistry;
class Store;
struct LiveJob;
struct NodeInfo;
struct NodeJob;
struct EtaSnapshot;
struct SchedulerFigures;  // views/metrics_views.h
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
  // At Open: the queue configuration `store` holds (kQueuesKey) applied; when it holds
  // none, `initial` applied and committed as the store's.
  Status LoadQueues(Store& store, const std::string& initial);
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
  // The cluster state is built and current (no rebuild pending): only then are its nodes'
  // ledgers what a job started on a whole node goes by (ModuleStep::CoreReady).
  bool ready() const { return state_ != nullptr && !rebuild_; }
  // `node` is in the cluster state with nothing allocated (CPU, memory, GPUs); false
  // before the first rebuild.
  bool NodeIdle(const std::string& node) const;
  // The rebuilds and what the workload learner has learned, for /metrics.
  SchedulerFigures figures() const;

  // The queue configuration in force, to put back when a replacement fails.
  struct Queues {
    std::shared_ptr<QueueTree> tree;
    std::string yaml;
  };
  Queues TakeQueues();
  void RestoreQueues(Queues old);
  // An admin's new queue configuration `yaml`: applied when it parses and every
  // unfinished durable job of `jobs` still finds its queue (FailedPrecondition naming
  // one that does not), then committed to `store` (kQueuesKey); on any error the old one
  // is back. Once stored, the scheduler is dropped (DropScheduler) at `clock`'s time.
  Status ReplaceQueues(const std::string& yaml, const JobTable& jobs, Store& store,
                       const Clock& clock);

  // The node set changed: the placer's scale and the scheduler's groups are
  // recomputed (O(nodes)) by the next ApplyNodeChanges, once for any number of changes,
  // so that a fleet of N agents registering costs O(N), not O(N^2).
  void NodesChanged() { nodes_changed_ = true; }
  // Before a decision or a published wait context: brings them up to date. A failure falls
  // back to a rebuild (logged).
  void ApplyNodeChanges();
  // A job was submitted: its tasks teach the workload model.
  void ObserveSubmission(const JobSpec& spec) { learner_.ObserveJob(spec); }
  // A new durable job's record (its spec set) joins `queue` pending at `now`, its tasks
  // observed (ObserveSubmission): enqueued now when the core is current, else by the
  // rebuild before the next cycle. The queue must be in the tree.
  void Submit(JobRecord& rec, const std::string& queue, Micros now);
  // Before a decision: when the learned workload moved enough, a fragmentation-aware
  // placement (tessera, fgd) is remade from it (bestfit stands in until the first task).
  void RefreshPlacement();
  WorkloadLearner& learner() { return learner_; }
  const WorkloadLearner& learner() const { return learner_; }
  // What breaks the core's invariants now; empty when they hold or while rebuilding.
  std::vector<std::string> CheckInvariants() const;
  // The restarts whose backoff ended by `now`, offered to the scheduler again
  // (JobLifecycle::ReleaseDue); none while the lifecycle is not bound.
  std::vector<JobId> ReleaseDue(Micros now);
  // At Open (JobTable::RestoreRestarts): each pending job waits out its restart's
  // backoff until the end given, even across the restart (ReleaseDue lets it go).
  void HoldRestarts(const std::vector<std::pair<JobRecord*, Micros>>& backoffs);
  // The core's cycle at `now`: none when it has nothing to decide on (no node present, or
  // no pending job); else the node changes applied, the placement refreshed, then the
  // lifecycle's decisions, whose reservation is kept. The core must be built.
  std::optional<CycleResult> RunCycle(Micros now);
  // After a cycle: whether the lifecycle's invariants hold (checked even when the cycle
  // asked for a rebuild); the first one broken is logged.
  bool CycleKeptInvariants() const;
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

  // ---- the cluster's nodes (core_session_nodes.cc) ----
  // Whether a module holds node `name` from new work (ModuleHost::NodeHold, e.g. for a check).
  using NodeHold = std::function<bool(const std::string& name)>;
  // Takes a job of the JobTable's whose held tasks no longer fit their node, and why (the
  // controller requeues it).
  using MisfitSink = std::function<void(LiveJob& job, const std::string& why)>;
  // A rebuild (BuildState to FinishRebuild) from the up nodes of `nodes`, in the order they
  // first became known, each drained (ApplyDrains), the scheduler built at `now`; then
  // every durable unfinished job of `jobs` put back in its queue, a running or stopping
  // job's tasks on nodes that are up held again, and the respecs dropped (every up
  // node's spec is current); last, the jobs that no longer fit (not held) to `misfit`.
  // Internal, the rebuild left pending, for a job's queue the tree lacks.
  Status Rebuild(NodeRegistry& nodes, JobTable& jobs, const NodeHold& hold, Micros now,
                 const MisfitSink& misfit);
  // Up node `node` registered: added to the cluster state, relabelled in place when only
  // its labels changed, else its new spec waits until it holds nothing (nodes.respec());
  // then its drains applied and the running and stopping tasks of `jobs` placed on it
  // attached again, a job whose task no longer fits handed to `misfit` (which may stop
  // it) and its other tasks left. Nothing before the first rebuild or while one is
  // pending; a failed add or relabel asks for one (logged) and attaches nothing.
  void JoinNode(const NodeInfo& node, NodeRegistry& nodes, JobTable& jobs, const NodeHold& hold,
                const MisfitSink& misfit);
  // Node `name` left (its tasks detached): its respec dropped, removed from the cluster
  // state; a failed removal asks for a rebuild (logged).
  void LeaveNode(const std::string& name, NodeRegistry& nodes);
  // The nodes waiting for a respec take their new spec once they hold nothing (logged);
  // a node no longer up or in the cluster state is dropped from nodes.respec().
  void ApplyRespecs(NodeRegistry& nodes, const NodeHold& hold);
  // Node `node`'s drains into the cluster state (when built and holding it): the node
  // drained when it is, awaits a respec in `nodes` or `hold` says so; each GPU as drained.
  void ApplyDrains(const NodeInfo& node, const NodeRegistry& nodes, const NodeHold& hold);
  // A module's job on the whole of node `node` (PlanNodeJob, node_jobs.h), started at
  // `now` without the cycle's placer: added to `jobs` (JobTable::AddStarted), then held
  // and charged as a running job is after a restart; the caller launches it. Refused,
  // nothing changed, before the first rebuild (FailedPrecondition), for a node the
  // cluster state lacks (NotFound) or when the node's ledger has no room for it now.
  StatusOr<LiveJob*> AddNodeJob(JobTable& jobs, const std::string& node, const NodeJob& request,
                                Micros now);

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
  RuntimePredictor& predictor() { return predictor_; }
  // Fair-share usage waiting for the next scheduler (after a restart or a rebuild).
  std::optional<QueueUsage::Saved>& carried_usage() { return carried_usage_; }

 private:
  StatusOr<Profile> MakePlacement() const;
  // Rebuild's put-back of every job of `jobs` (after BuildScheduler); the jobs that no
  // longer fit, and why, into `misfits`.
  Status PutBackJobs(JobTable& jobs, std::vector<std::pair<JobNumber, std::string>>& misfits);
  // JoinNode's attaching of the tasks placed on node `name`, now `id`.
  void AttachTasks(const std::string& name, NodeId id, JobTable& jobs, const MisfitSink& misfit);

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
