// The seams between the controller's core and its feature modules.
//
// The core (server/controller.h) holds the core lock, the pending transaction of each
// locked step, publishing and the scheduling loop. A feature (idle watch, node
// history, ...) is a ControllerModule: it owns its state and its invariants, and the
// core calls it only through the hooks declared here. A module never sees the core's
// tables: it reads jobs and nodes through the const views a hook passes (JobFacts, the
// node's NodeInfo), and acts only through ModuleStep, the locked step it runs in: a
// stop asked of the attempt machine, a job's view republished, rows added to the
// step's durable batch. Modules do not call one another; what one needs of another
// goes through the core.
//
// Hooks (all but Start/Stop run with the core lock held, in the order ModuleHost keeps:
// modules/module_host.h):
//   Load          at Open, before jobs are loaded: the module's durable state
//   OnStoredUsage at Open, after Load: every stored usage interval (read once for all)
//   BeforeCycle   each scheduling cycle, before the core decides
//   OnAttemptRunning  an attempt started, or was found running after a restart
//   OnOutput      a task's output grew (an agent's report)
//   OnTelemetry   a node's agent sent a GPU sample (before the node keeps it)
//   OnUsage       an interval of GPU use, ended or still running, is counted or shown
//   OnIntervalEnded  an ended interval's row is complete (after every module's OnUsage)
//   OnAttemptEnded   an attempt ended (requeued or finished), its stored record not yet
//                 written: what the module adds to it (modules/restarts_module.h)
//   DescribeJob   a job's JSON view is built
//   DescribeQueue a queue's JSON view is built
//   WriteMetrics  /metrics is scraped
//   NodeHold      why a module keeps a node from new work ("": it does not), for the
//                 core's drains and the node's view
//   OnLaunch      a task's launch is built: what the module adds (a registry credential)
//   OnTaskReport  an agent reported a task; JobNote: what a running job is doing (its
//                 reason, e.g. its image's pull)
//   OnJobEvent    the core's lifecycle moved a job (started, requeued, finished, ...)
//   OnNodeJoined  a node's agent registered; OnNodeRemoved: the admin removed a node
//   OnJobAccepted a job joined the core unfinished: acknowledged, or reloaded at Open
//   BeforeDecide  each core cycle (also one an exit report runs), just before it decides
//   Start / Stop  the controller's loop starts and stops (threads the module owns)
// Each module's header says which hooks it uses and what it owns.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/job_codec.h"
#include "base/clock.h"
#include "base/status.h"
#include "metrics/exposition.h"
#include "sched/attempt_machine.h"
#include "sched/job_record.h"
#include "server/job_number.h"
#include "server/job_state.h"
#include "server/node_registry.h"
#include "store/store.h"

namespace tessera {

class QueueTree;          // model/queue_tree.h
struct LifecycleEvent;    // sched/job_lifecycle.h
struct NodeInventory;     // api/agent_protocol.h

// A job as a module sees it: read-only, valid for the hook call only.
struct JobFacts {
  JobNumber id;
  const std::string& tenant;
  const std::string& queue;
  int attempt;               // the attempt's number (the row's attempts)
  JobState state;
  // The core's record (phase, allocations, run_start, gpu_milli); null for a finished
  // job read back from the store.
  const JobRecord* record;
  const JobSubmission& submission;  // as submitted (the spec's options the core keeps)
  // Run by the controller itself (a validation check), not by a tenant.
  bool internal;
  size_t tasks;  // of the current attempt
  // The node of each task of the current attempt, by task index (< tasks).
  std::function<const std::string&(size_t task)> task_node;
  // Restarts (modules/restarts_module.h): for a job read back from the store (record
  // null), the restarts its last stored attempt counted (else the record's
  // attempt.restarts); for a pending job, when the lifecycle's hold (a restart's backoff)
  // lets it go to the scheduler (0: none, or not pending).
  int stored_restarts = 0;
  Micros held_until = 0;
};

// A job the core runs for a module on one whole node (ModuleStep::StartNodeJob).
struct NodeJob {
  std::string name, tenant;
  std::string queue;    // charged; "" or not in the tree: the tree's first queue
  std::string command;  // run with /bin/sh -c
  std::map<std::string, std::string> env;
  Micros runtime_limit = 0;
};
// How a job ended, as its row says (ModuleStep::Outcome). Not sim/job_report.h's
// JobOutcome, which the scenario runner sees beside it.
struct RowOutcome {
  int exit_code = 0;
  std::string reason;
};

// The locked step a hook runs in: what a module may read and do of the core.
// JobFacts and NodeInfo references are valid for the visit that passed them and only
// until the module asks for a change: after Stop, StartNodeJob, CancelPending or
// FindOrLoad a module reads again rather than use facts it holds (a stop may end the
// attempt at once, a start may move the core's records). Stopping jobs from within
// ForEachRunningJob is safe: no step call adds or removes jobs or nodes.
class ModuleStep {
 public:
  virtual ~ModuleStep() = default;
  virtual Micros now() const = 0;
  // The queue configuration as the core runs it (YAML text).
  virtual const std::string& queues_yaml() const = 0;
  // Every acknowledged job in memory that is running or stopping, in id order.
  virtual void ForEachRunningJob(const std::function<void(const JobFacts&)>& visit) const = 0;
  // Calls `visit` with job `job` when it is acknowledged and in memory; false if not.
  virtual bool VisitJob(JobNumber job, const std::function<void(const JobFacts&)>& visit) const = 0;
  // A node known to the core, up or down; null for an unknown one.
  virtual const NodeInfo* Node(const std::string& name) const = 0;
  // How long a node may be silent before it is lost (ControllerOptions::node_timeout).
  virtual Micros node_timeout() const = 0;
  // The grace a stop gives tasks when nothing else says (ControllerOptions::stop_grace).
  virtual Micros stop_grace() const = 0;
  // Asks the job's attempt to stop (sched/attempt_machine.h decides what the stop
  // ends as). `reason` non-empty: the job's reason from now on (an end's reason from
  // the machine replaces it). No effect on a job that is not running or stopping.
  virtual void Stop(JobNumber job, const StopRequest& request, const std::string& reason) = 0;
  // Sends `signal` to the current attempt's tasks still running, as a stop whose grace
  // is `grace` (the agent kills what is left after it).
  virtual void Signal(JobNumber job, int signal, Micros grace) = 0;
  // Drains GPU `gpu` of `node` (the whole node for gpu < 0) with `drain`, or lifts its
  // drain (nullopt); durable with the step. No effect on an unknown node.
  virtual void SetDrain(const std::string& node, int gpu, std::optional<DrainInfo> drain) = 0;
  // The job's published view changed (a figure the module adds to it).
  virtual void Republish(JobNumber job) = 0;
  // A key-value row made durable with the step (before anything it decided is handed
  // out); "" as the value removes the key's row. Modules write only under their own
  // key prefixes. Only a step that can commit takes one (a read-only step, as metrics
  // and views get, is a programming error: the process aborts with a message).
  virtual void Put(std::string key, std::string value) = 0;

  // ---- jobs a module runs itself on whole nodes (modules/validation_runs.h) ----
  // Every node known to the core, up or down, in name order.
  virtual void ForEachNode(
      const std::function<void(const std::string& name, const NodeInfo&)>& visit) const = 0;
  virtual bool HasQueue(const std::string& queue) const = 0;  // in the tree the core runs
  // The core's cluster state is built and current (no rebuild pending): only then are
  // its nodes' ledgers what NodeIdle and StartNodeJob go by.
  virtual bool CoreReady() const = 0;
  // The node is in the core's cluster state with nothing allocated (CPU, memory, GPUs).
  virtual bool NodeIdle(const std::string& node) const = 0;
  // Starts `job` now on the whole of `node` (every CPU, all its memory, every GPU not in
  // MIG mode) as a job like any other: durable row, launch, view, not preemptible.
  // Refused, nothing changed, when the node cannot hold it now.
  virtual StatusOr<JobNumber> StartNodeJob(const std::string& node, const NodeJob& job) = 0;
  // The job's exit code and reason as its row holds them now ({0, ""}: unknown job).
  virtual RowOutcome Outcome(JobNumber job) const = 0;
  // Ends a pending job (one requeued) at once as cancelled, with `reason` when it is not
  // empty (else its reason kept); no effect on a job that is not pending.
  virtual void CancelPending(JobNumber job, const std::string& reason = "") = 0;
  // The module's NodeHold of `node` changed: the core applies it to its state now.
  virtual void NodeHoldChanged(const std::string& node) = 0;

  // ---- GPU usage accounting (modules/accounting.h) ----
  // Fills in what the modules measure of a running interval of attempt `attempt` (each
  // one's OnUsage, not ended: row.used_gpu_milli).
  virtual void FillUsage(UsageRow& row, int attempt) const = 0;
  // Each tenant the queue configuration names, with the nominal GPU quota of its queues
  // added up (in GPUs).
  virtual std::map<std::string, double> TenantQuotaGpus() const = 0;

  // ---- pending jobs a module keeps back (modules/job_gates_module.h) ----
  // Every acknowledged job in memory, finished ones too, in id order.
  virtual void ForEachJob(const std::function<void(const JobFacts&)>& visit) const = 0;
  // The job's row reason ("" for a job not in memory): a user's hold is durable there.
  virtual const std::string& Reason(JobNumber job) const = 0;
  // Keeps pending job `job` from the scheduler until Ungate (JobLifecycle::Gate), across
  // requeues; no effect on a job that is not pending or not in memory.
  virtual void Gate(JobNumber job) = 0;
  // Lets it go: offered to the scheduler again unless a restart's backoff holds it.
  virtual void Ungate(JobNumber job) = 0;
  virtual bool Gated(JobNumber job) const = 0;
  // Calls `visit` with job `job`, in memory or archived (read back from the store:
  // record null); false if there is none. The core lock is let go while the store is
  // read: what was read before (views, pointers) does not survive the call. Only a
  // user's call (a facade's step) may let go of the lock: within a hook, where the core
  // is mid-step, it finds only jobs in memory.
  virtual bool FindOrLoad(JobNumber job, const std::function<void(const JobFacts&)>& visit) = 0;
  // An archived job's row, read from the store with the core lock held (small and rare;
  // a pass does not let go of the lock); nullopt: no such job ever was.
  virtual StatusOr<std::optional<JobRow>> LoadRow(JobNumber job) = 0;
};

class ControllerModule {
 public:
  virtual ~ControllerModule() = default;
  virtual Status Load(Store& store) {
    (void)store;
    return Status::Ok();
  }
  virtual void OnStoredUsage(const std::vector<UsageRow>& rows) { (void)rows; }
  virtual void BeforeCycle(ModuleStep& step) { (void)step; }
  virtual void OnAttemptRunning(const JobFacts& job) { (void)job; }
  // `sample`: one entry per GPU of `node`'s inventory, by index (a GPU the driver no
  // longer reports is `lost`); `node.telemetry` still holds the previous sample, which
  // is comparable when `comparable` (same agent, same GPUs).
  virtual void OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample,
                           bool comparable, ModuleStep& step) {
    (void)node;
    (void)sample;
    (void)comparable;
    (void)step;
  }
  virtual void OnOutput(JobNumber job, Micros now) {
    (void)job;
    (void)now;
  }
  // Attempt `attempt` of `row.job` held `row.gpu_milli` over the row's interval:
  // `row.used_gpu_milli` may be filled in. `ended`: the interval is over and stored.
  virtual void OnUsage(UsageRow& row, int attempt, bool ended) {
    (void)row;
    (void)attempt;
    (void)ended;
  }
  // An ended interval's row, complete (every module's OnUsage ran on it), is in the
  // step's batch: what accounting counts.
  virtual void OnIntervalEnded(const UsageRow& row) { (void)row; }
  // The attempt of `job` ended as `ended` (sched/attempt_machine.h: requeued or
  // finished; `job` is as the end left it); `stored_attempt` is its record as it will be
  // stored with the step (server/job_attempts.h), for the module to add to. `step` is
  // read-only: the core is mid-transition.
  virtual void OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                              nlohmann::json& stored_attempt, const ModuleStep& step) {
    (void)job;
    (void)ended;
    (void)stored_attempt;
    (void)step;
  }
  virtual void DescribeJob(const JobFacts& job, nlohmann::json& out) const {
    (void)job;
    (void)out;
  }
  virtual void DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                             nlohmann::json& out) {
    (void)queue;
    (void)queues_yaml;
    (void)out;
  }
  virtual void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
    (void)step;
    (void)w;
  }
  virtual std::string NodeHold(const std::string& node) const {
    (void)node;
    return "";
  }

  // ---- tasks on their way to running (modules/task_start_notes.h, registry_credentials.h) ----
  // A launch of `job` (submitted by `tenant`) is being built: what the module adds to it.
  virtual void OnLaunch(const std::string& tenant, const JobSubmission& job,
                        TaskLaunch& launch) const {
    (void)tenant;
    (void)job;
    (void)launch;
  }
  // An agent reported a task of a job in memory; whether the job's view changed (the
  // controller then publishes it again).
  virtual bool OnTaskReport(const TaskReport& report) {
    (void)report;
    return false;
  }
  // What attempt `attempt` of a running `job` is doing, shown as its reason ("": nothing
  // to say); the first module's non-empty answer counts.
  virtual std::string JobNote(JobNumber job, int attempt) const {
    (void)job;
    (void)attempt;
    return "";
  }

  // ---- job events and node membership (modules/eta_module.h, node_history.h) ----
  // The core's lifecycle moved `job` (a start, an end, ...); its queue is in `tree`.
  virtual void OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                          const QueueTree& tree) {
    (void)job;
    (void)event;
    (void)tree;
  }
  // A node's agent registered with `inventory` (a first time, again, or changed).
  virtual void OnNodeJoined(const NodeInventory& inventory, ModuleStep& step) {
    (void)inventory;
    (void)step;
  }
  // The admin removed node `name` (NodeActions::RemoveNode).
  virtual void OnNodeRemoved(const std::string& name, ModuleStep& step) {
    (void)name;
    (void)step;
  }

  // ---- pending jobs kept back (modules/job_gates_module.h) ----
  // `job` joined the core unfinished: acknowledged at submission, or reloaded at Open
  // (after every job is in memory). `step` has no batch.
  virtual void OnJobAccepted(const JobFacts& job, ModuleStep& step) {
    (void)job;
    (void)step;
  }
  // Each core cycle (the loop's, or one an agent's exit report runs at once), with the
  // core current, just before it decides.
  virtual void BeforeDecide(ModuleStep& step) { (void)step; }

  virtual void Start() {}
  virtual void Stop() {}
};

}  // namespace tessera
