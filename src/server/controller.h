// Controller: the real-time driver of the scheduling core. It owns the transaction: one
// lock (mu_), the changes of a locked step collected into a Pending, made durable
// (Publish, without the lock) before any effect reaches an agent, and the job views
// published. Everything else is a service, a feature module or a pure part around it:
// the tables of docs/architecture.md ("The controller: a core and its services") say
// what each owns and which hooks or transactions it uses, and "One job's path" follows
// a job through the files.
//
// A job: JobIntake makes it durable, then the core acknowledges it and hands it to the
// JobScheduler; a cycle's starts are durable before their launches go out; an attempt
// ends as the attempt machine (sched/attempt_machine.h) decides from the agents'
// reports, stops and lost nodes, a gang as one unit.
//
// Recovery: Open reloads jobs, nodes, drains and the queue configuration from the
// Store. Running jobs keep their placement and wait for their nodes' agents; an agent
// that re-registers without one of their tasks, or a node silent past the heartbeat
// timeout, requeues the job; a task the controller does not know as running is
// stopped. Every report an agent gets an answer to is durable first. Node events change
// the core's cluster state in place; it is built afresh only at the first cycle, after
// the queue tree changed, or when an in-place change failed (RebuildScheduler).
//
// Lock discipline:
//   - mu_ guards JobTable, NodeRegistry, CoreSession, TenantIdentities, the modules and
//     the counters that are not atomic, which have no lock of their own. JobLogs and
//     PublishedJobs have theirs: task output is written and the API's job reads are
//     served without mu_.
//   - The store is never waited on with mu_ held: Publish commits without it, and
//     FindOrLoad lets go of it to read an archived job (only in a user's call, never in
//     a hook). Except SetQueues (an admin's rare call, committed under mu_ so that no
//     cycle runs on a configuration that failed to commit) and ModuleStep::LoadRow (one
//     small read per archived job a dependency names, whose outcome is then kept).
//   - Lock order: the server's node-credential lock before mu_; mu_ before the published
//     views' lock and the loop's (loop_: it lets go of its lock before a cycle takes mu_);
//     JobLogs' lock never with mu_ held; the ETA module's forecast lock before mu_, and
//     mu_ before its predictor lock.
// Every public method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/job_codec.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/wake_loop.h"
#include "model/gpu_catalog.h"
#include "plugins/job_policies.h"
#include "sched/attempt_machine.h"
#include "sched/job_lifecycle.h"
#include "sched/job_record.h"
#include "sched/job_scheduler.h"
#include "server/controller_counters.h"
#include "server/core_session.h"
#include "server/http/auth.h"
#include "server/job_logs.h"
#include "server/job_table.h"
#include "server/job_views.h"
#include "server/known_nodes.h"
#include "server/modules/controller_module.h"
#include "server/modules/eta_module.h"
#include "server/modules/gpu_health.h"
#include "server/modules/job_gates_module.h"
#include "server/modules/module_host.h"
#include "server/node_registry.h"
#include "server/pty_sessions.h"
#include "server/scheduler_memory.h"
#include "server/services/job_intake.h"
#include "server/services/service_step.h"
#include "server/tenant_identities.h"
#include "store/store.h"

namespace tessera {

struct ControllerOptions {
  std::string data_dir;            // logs/ and checkpoints/ live here
  std::string checkpoint_root;     // "": <data_dir>/checkpoints
  std::string policy = "tessera";  // plugins/job_policies.h preset or combination
  // plugins/registry.h placement profile; "tessera" and "fgd" learn the workload's
  // typical tasks from submissions (CoreSession::RefreshPlacement).
  std::string placement = "tessera";
  Micros cycle_interval = 50'000;  // the scheduling loop's period
  // A report of an exit runs the core's cycle at once, so that the report and the
  // starts it allows share one commit and the launches go out as it returns. Off:
  // only the loop's cycles decide (the scenario runner, which runs cycles where the
  // simulator does: once after all of an instant's events).
  bool cycle_on_exit = true;
  Micros heartbeat_interval = 500'000;  // told to agents: the shortest interval
  Micros node_timeout = 30'000'000;     // a node silent this long is lost
  // The fleet's heartbeats are spread to at most this many a second: the interval told
  // to agents grows with the number of known nodes (to at most a quarter of
  // node_timeout). Launches and exits do not wait for heartbeats (the agent channel);
  // only liveness, telemetry and task output travel with them.
  int64_t max_heartbeats_per_second = 2'000;
  Micros stop_grace = 30'000'000;  // grace for cancelled / failed gangs
  // Overrides the policy's bound: a job runs this long before reclaim or LAS may
  // preempt it (priority preemption is immediate). Live jobs restart from scratch
  // unless they checkpoint, so the simulator's "never" (0) would thrash.
  Micros min_run_before_reclaim = 60'000'000;
  // Overrides the policy's bound: an evicted job waits while the job it was evicted for
  // has not started, up to this long (SchedulerOptions::victim_hold). Without it a gang
  // waiting for a second GPU evicts the job restarted on its first again and again.
  Micros victim_hold = 120'000'000;
  uint64_t seed = 1;
  GpuHealthOptions health;  // when telemetry drains a GPU
  // The Unix identity each tenant's tasks run as: its run_as entry, else one from the
  // pool, assigned once and kept in the store (tenant_identities.h).
  TenantIdentities::Options identities;
  // Called (outside the lock) for each job whose start has just been made durable;
  // for benchmarks and tests.
  std::function<void(JobNumber job, Micros now)> on_started;
  // Finished jobs kept in memory, newest first; older ones are archived: read from the
  // store by id (GET, logs), no longer in listings. Bounds the controller's memory.
  size_t finished_in_memory = 10'000;
  // How often what the scheduler learned (fair-share usage, runtime predictions) is
  // written to the store; a crash loses at most this much of it.
  Micros history_interval = 60'000'000;
  // Replaces `policy` and its bounds with this policy as is (scenario and what-if runs).
  std::optional<SchedulerPolicy> scheduler_policy;
  // Told every job transition, under the controller's lock (scenario runs, tests).
  LifecycleListener* lifecycle_listener = nullptr;
  // Pending jobs' ETAs (modules/eta_module.h); its seed and stop_grace are replaced by
  // the controller's above.
  EtaModule::Options eta;
};

class Controller final : private LifecycleListener {
 public:
  // Reloads state from `store` (which must outlive the controller). `queues_yaml`
  // is the queue configuration used when the store holds none.
  static StatusOr<std::unique_ptr<Controller>> Open(ControllerOptions options, Store* store,
                                                    const GpuCatalog& catalog, const Clock& clock,
                                                    const std::string& queues_yaml);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // The scheduling loop (a thread running RunCycle every cycle_interval or when
  // woken). Stop joins it; idempotent.
  void Start();
  void Stop();

  // ---- users (HTTP handlers) ----
  // Submissions (POST /v1/jobs, /v1/jobs/batch): the JobIntake service
  // (services/job_intake.h); it takes the core lock itself.
  JobIntake& intake() { return intake_; }
  // What the API's job reads (services/job_reads.h) see without mu_: the published
  // views and the task logs, each with its own lock; only the controller writes them.
  const PublishedJobs& published() const { return views_; }
  const JobLogs& logs() const { return logs_; }
  // A module owned outside the core (ValidationService's), attached after Open and
  // before Start: its Load runs now (the only hook of Open replayed), its hooks after
  // Accounting's (modules/module_host.h). `after_cycle` (may be empty) runs on the
  // loop's thread after each cycle, without mu_. Both must outlive the controller.
  Status Attach(ControllerModule& module, std::function<void()> after_cycle = nullptr)
      EXCLUDES(mu_);
  // The core lock, for the annotations of a service whose state it guards (a service
  // takes it only through Transact and Read).
  Mutex& core_lock() const RETURN_CAPABILITY(mu_) { return mu_; }
  // Admin: replaces the queue configuration (validated, durable, then applied).
  Status SetQueues(const std::string& yaml);

  // After Open: forgets the nodes the admin removed (services/node_actions.h) that have
  // not registered since (their rows stay; a marker says the node is gone).
  Status ForgetRemovedNodes();
  // Task reports dropped because they named a task not placed on the reporting node.
  uint64_t foreign_reports() const { return counters_.foreign_reports.load(); }
  // Counts (and logs) a report from `node` on a task not placed there.
  void CountForeignReports(const std::string& node, const std::vector<TaskReport>& reports);

  // ---- services (services/service_step.h) ----
  // One transaction of a service: `decide` runs with the core lock held on a user's
  // step (which may let go of it to read an archived job). Its error is returned with
  // nothing committed. Else the rows it changed are sealed, `sealed` (if any) reads the
  // outcome under the same lock, and the step is made durable and handed out without
  // the lock (Publish). A WakeLoop asked for wakes the loop at the end, whatever the outcome.
  Status Transact(const std::function<Status(ServiceStep&)>& decide,
                  const std::function<void(const ServiceStep&)>& sealed = nullptr) EXCLUDES(mu_);
  // A read with the core lock held, on a step that commits nothing (as above, it may let
  // go of the lock to read an archived job); `read`'s status.
  Status Read(const std::function<Status(ServiceStep&)>& read) EXCLUDES(mu_);

  // ---- agents ----
  StatusOr<RegisterResponse> Register(const RegisterRequest& request, const std::string& address);
  StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request);
  // Where a node's new launches and stops go the moment they are durable (the agent
  // channel); none: they wait for the node's next heartbeat, which carries them anyway.
  // Called under the controller's lock, so in the order decided: it must not block or
  // call back into the controller.
  using PushSink = std::function<void(const std::string& node, const HeartbeatResponse& commands)>;
  void SetPushSink(PushSink sink);

  // One scheduling cycle now: node timeouts, the core cycle, durable decisions.
  Status RunCycle();
  // What breaks the core's invariants now (JobLifecycle::CheckInvariants); empty when
  // they hold. Every cycle checks them and counts the cycles that broke any.
  std::vector<std::string> CheckInvariants() const;

  // Pending jobs' ETAs, positions and what blocks them, on demand: ForecastEtas and
  // RefreshEtas (modules/eta_module.h), from any thread.
  EtaModule& etas() { return eta_; }

  bool healthy() const { return !store_failed_.load(); }
  // Stored job rows this controller could not read at its start and left out (in the
  // store as they were); set by Load, read-only after.
  using QuarantinedJob = JobTable::Quarantined;
  const std::vector<QuarantinedJob>& quarantined() const { return quarantined_; }
  const GpuCatalog& catalog() const { return *catalog_; }

 private:
  // What a locked step decided, to make durable and then hand out.
  struct Pending {
    std::set<JobNumber> dirty;  // jobs whose rows changed
    WriteBatch batch;
    std::vector<std::pair<std::string, TaskLaunch>> launches;  // node, launch
    std::vector<std::pair<std::string, TaskStop>> stops;
    std::vector<JobNumber> finished;  // jobs that reached a terminal state
    std::vector<LogAppend> logs;      // new task output, written outside the lock
  };

  Controller(ControllerOptions options, Store* store, const GpuCatalog& catalog,
             const Clock& clock);
  Status Load(const std::string& queues_yaml) REQUIRES(mu_);
  // The jobs of the store: pending ones queued, running and stopping ones with their
  // placement (waiting for their nodes), the oldest finished ones archived.
  Status LoadJobRows(Micros now) REQUIRES(mu_);
  // The core's cluster (controller_cluster.cc; CoreSession's Rebuild, JoinNode,
  // LeaveNode, ApplyRespecs and ApplyDrains, with the modules' NodeHolds).
  Status RebuildScheduler(Micros now, Pending& out) REQUIRES(mu_);
  void NodeJoined(const NodeInfo& node, Micros now, Pending& out) REQUIRES(mu_);
  void NodeLeft(const std::string& name) REQUIRES(mu_);  // its tasks detached by NodeDown
  CoreSession::NodeHold NodeHolds() const;
  // A running job whose task no longer fits its node (its agent came back with less)
  // is stopped and requeued rather than held on resources that are gone.
  CoreSession::MisfitSink RequeueMisfits(Micros now, Pending& out) REQUIRES(mu_);
  void Wake() { loop_.Wake(); }  // the next cycle now (from any thread, mu_ held or not)
  // The heartbeat interval told to agents now: the options' floor spread over the fleet.
  Micros HeartbeatInterval() const REQUIRES(mu_) {
    return nodes_.HeartbeatInterval(options_.heartbeat_interval, options_.node_timeout,
                                    options_.max_heartbeats_per_second);
  }

  // A job in memory, or an archived one read from the store into `*archived` (read only);
  // null when there is none. mu_ is let go of while the store is read: pointers into the
  // controller's state taken before do not survive.
  const LiveJob* FindOrLoad(JobNumber id, std::optional<LiveJob>* archived) REQUIRES(mu_);
  // Archives the oldest finished jobs beyond finished_in_memory.
  void Archive(Micros now) REQUIRES(mu_);
  // views/job_json.h; not `whole`: without "spec" and "reason" (a published view's body).
  nlohmann::json JobJson(const LiveJob& job, bool whole = true) const REQUIRES(mu_);
  // The job's view (JobViewOf), published for the API's reads after every change of the
  // job (Seal, Submit, Load).
  void PublishView(const LiveJob& job) REQUIRES(mu_);
  // A job's reason as its view holds it (FillJobReason, pending_reasons.h).
  void FillReason(const LiveJob& job, JobView& view) const REQUIRES(mu_);
  // After every cycle: what pending jobs' reasons are worked out from (WaitContextOf).
  void PublishWaitContext() REQUIRES(mu_);
  void Seal(Pending& out) REQUIRES(mu_);  // the dirty jobs' rows into the batch
  // The core's cycle: starts and preemptions into `out`. False when it had nothing to
  // decide on (no nodes, or no pending job).
  bool RunCoreCycle(Micros now, Pending& out) REQUIRES(mu_);
  void StartJob(LiveJob& job, const StartDecision& d, Micros now, Pending& out) REQUIRES(mu_);
  // The core's attempt machine (sched/attempt_machine.h) over the current lifecycle.
  AttemptMachine Attempts() REQUIRES(mu_) { return AttemptMachine(core_.lifecycle()); }
  // Asks a running or stopping job's attempt to stop (sched/attempt_machine.h decides
  // the end) and carries out the effects.
  void StopJob(LiveJob& job, const StopRequest& request, Micros now, Pending& out) REQUIRES(mu_);
  // Carries out what the attempt machine decided for `job`: stops to send, the row's
  // reason and exit code, and an ended attempt's records (RecordEnded).
  void ApplyAttempt(LiveJob& job, AttemptEffects fx, Micros now, Pending& out) REQUIRES(mu_);
  // An attempt ended: its usage, the stored attempt, the job's new state and counters.
  void RecordEnded(LiveJob& job, const EndedAttempt& ended, Micros now, Pending& out) REQUIRES(mu_);
  void NodeDown(NodeInfo& node, const std::string& reason, Micros now, Pending& out) REQUIRES(mu_);
  // ServiceStep::ForgetNode (controller_nodes.cc): the modules told, the removal's marker
  // and cleared drains into `out`, the node no longer known.
  void ForgetNode(const std::string& name, Micros now, Pending& out) REQUIRES(mu_);
  void HandleReports(NodeInfo& node, const std::vector<TaskReport>& reports, Micros now,
                     Pending& out) REQUIRES(mu_);
  // Task `task`'s launch (task_launches.h builds it from what is gathered here).
  TaskLaunch MakeLaunch(const LiveJob& job, int task) const REQUIRES(mu_);

  // ModuleStep::StartNodeJob (controller_nodes.cc, CoreSession::AddNodeJob).
  StatusOr<JobNumber> StartNodeJob(const std::string& node, const NodeJob& request, Micros now,
                                   Pending& out) REQUIRES(mu_);
  void ApplyDrains(const NodeInfo& node) REQUIRES(mu_);  // to the core's state, when it is current
  void SetDrain(NodeInfo& node, int gpu, std::optional<DrainInfo> drain, Pending& out)
      REQUIRES(mu_);
  void HandleTelemetry(NodeInfo& node, const std::string& agent_id,
                       std::vector<GpuTelemetry> sample, Micros now, Pending& out) REQUIRES(mu_);

  // Feature modules (modules/controller_module.h), called through host_ with mu_ held
  // on the steps and facts built here (controller_modules.cc).
  class Step;  // a locked step as a module (ModuleStep) or a service (ServiceStep) sees it
  // A Step for a hook (no facade: it may not let go of mu_); `out` null: read-only.
  std::unique_ptr<ModuleStep> HookStep(Micros now, Pending* out) REQUIRES(mu_);
  JobFacts FactsOf(const LiveJob& job) const REQUIRES(mu_);
  // The modules in hook order (set by the constructor and Attach, then read-only); it
  // owns the core's modules not called by name here (modules/core_modules.h).
  ModuleHost host_;

  // At submission (controller_modules.cc): the priority class resolved, the dependency
  // checked (JobGatesModule::CheckDependency; mu_ may be let go, as FindOrLoad does).
  Status PrepareSubmission(const Principal& who, JobSubmission& job) REQUIRES(mu_);
  // Holds, dependencies, throttles, singletons (modules/job_gates_module.h).
  JobGatesModule gates_ GUARDED_BY(mu_);

  // The lifecycle's events: to the modules, and to options_.lifecycle_listener with the
  // jobs' ids. Told only from within a locked step.
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event) override;
  // Makes `out` durable (without mu_), then hands out its launches and stops.
  Status Publish(Pending out);
  PushSink push_sink_ GUARDED_BY(mu_);

  ControllerOptions options_;
  Store* store_;
  const GpuCatalog* catalog_;
  const Clock* clock_;

  JobLogs logs_;                      // its own lock
  PublishedJobs views_;               // its own lock: what the API's job reads see
  PtySessions ptys_ GUARDED_BY(mu_);  // terminals' secrets and endpoints
  // The core lock, and what it guards down to counters_ (see the top of this file).
  mutable Mutex mu_;
  JobTable jobs_ GUARDED_BY(mu_);
  CoreSession core_ GUARDED_BY(mu_);  // after jobs_: its lifecycle points into the table's records
  // What the scheduler learned, to and from the store (scheduler_memory.h).
  SchedulerMemory memory_ GUARDED_BY(mu_){options_.history_interval};
  NodeRegistry nodes_ GUARDED_BY(mu_);
  FitVerdicts fits_ GUARDED_BY(mu_){*catalog_};  // "never fits", per-GPU defaults (known_nodes.h)
  TenantIdentities identities_ GUARDED_BY(mu_);
  ControllerCounters counters_;  // for /metrics; its atomics without mu_
  std::atomic<bool> store_failed_{false};
  std::vector<QuarantinedJob> quarantined_;  // written by Load only
  // Submissions (services/job_intake.h), acting on the core through IntakePort
  // (controller_jobs.cc).
  class IntakePort;
  std::unique_ptr<JobIntake::Core> MakeIntakePort();
  std::unique_ptr<JobIntake::Core> intake_port_ = MakeIntakePort();
  JobIntake intake_{*intake_port_, *catalog_, *clock_};

  // The scheduling loop: RunCycle, then the attached modules' after-cycle passes, on its
  // own thread. Its lock is taken after mu_ (Wake with mu_ held) and let go of before a
  // cycle takes mu_ (base/wake_loop.h).
  WakeLoop loop_;

  // Pending jobs' ETAs (modules/eta_module.h), wired to the core (controller_views.cc).
  // Last: its thread (stopped by Stop) uses the members above.
  EtaModule MakeEtaModule();
  EtaModule eta_ = MakeEtaModule();
};

}  // namespace tessera
