// JobTable: the controller's jobs in memory. It owns every job the controller holds
// (durable or being made durable), the idempotency keys that find them again, the
// dense numbering of jobs for the core (slots) and which finished jobs are to leave
// memory (archiving). It answers what an agent's reports mean for its jobs' tasks
// (Unreported, StopsToResend, PruneCommands) without acting on them: the controller does.
//
// Invariants: every job in the table holds a slot, and slot_job_[job.slot] is its id;
// a free slot maps to no job and its JobRecord is empty and finished (invisible to the
// core). Ids only grow (next_id_ is above every id ever stored); slots are reused once
// a job is archived or its submission failed. An idempotency key names a job in memory,
// or an archived one for kIdempotencyRetention after it left memory.
//
// Thread safety: none of its own. It is part of the controller's core state, guarded
// by the controller's core lock (Controller::mu_): the caller holds it for every call
// and for as long as it keeps a pointer or reference into the table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "api/job_codec.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "sched/attempt_machine.h"
#include "sched/job_lifecycle.h"
#include "sched/job_record.h"
#include "server/job_logs.h"
#include "server/job_number.h"
#include "server/job_state.h"
#include "store/store.h"

namespace tessera {

struct JobFacts;  // modules/controller_module.h

// Where one task of a job's current attempt runs and what of its output was received;
// how it ended is the core's (JobRecord::attempt, sched/attempt_machine.h).
struct TaskRun {
  std::string node;  // node name
  int64_t log_received = 0;  // bytes of this attempt's output written to the log
};

// A job as the live controller holds it: its stored row, its submission and the
// progress of its attempt; the core's view of it is its JobRecord (JobTable::Rec).
struct LiveJob {
  // Its stored row. row.state is written from the core's record when the row is sealed
  // (JobTable::StateOf); for a job read back from the store (archived) it is the state.
  JobRow row;
  JobNumber id() const { return JobNumber(row.id); }  // the row holds it as an integer
  JobSubmission submission;
  bool durable = false;        // acknowledged; invisible until then
  std::vector<TaskRun> tasks;  // of the current attempt
  // Its JobRecord's index in the table's records (the core's JobId), reused once it is
  // archived; JobTable::kArchived for a job read back from the store.
  uint32_t slot = 0;
  // Whether row.spec_json is well-formed JSON, checked once before a listing splices it
  // in: -1 not checked yet, 0 no (listed as null), 1 yes.
  mutable int8_t spec_text_ok = -1;
};

class JobTable {
 public:
  // The slot of a job read back from the store: it has no JobRecord.
  static constexpr uint32_t kArchived = ~uint32_t{0};
  // How long an archived job's Idempotency-Key is still honoured.
  static constexpr Micros kIdempotencyRetention = 24LL * 3600 * 1'000'000;

  // Every job in memory by id, acknowledged or not; ordered: listings walk it newest
  // first.
  std::map<JobNumber, LiveJob>& all() { return jobs_; }
  const std::map<JobNumber, LiveJob>& all() const { return jobs_; }
  // An acknowledged job in memory; null for one archived, unknown or not durable yet.
  LiveJob* Find(JobNumber id);
  const LiveJob* Find(JobNumber id) const;
  // A new job under `id`, with a slot whose record is finished (invisible to the core)
  // until the caller fills it in.
  LiveJob& Add(JobNumber id);
  // Forgets a job that never became durable: its slot and idempotency key with it.
  void Remove(JobNumber id);

  // The id for the next submission.
  JobNumber TakeId() { return JobNumber(next_id_++); }
  // A job read from the store: later submissions get higher ids.
  void NoteStoredId(JobNumber id) { next_id_ = std::max(next_id_, id.value() + 1); }
  // Whether a job `id` may exist, in memory or archived in the store.
  bool MayExist(JobNumber id) const { return id.value() != 0 && id.value() < next_id_; }

  // The job submitted by `tenant` with Idempotency-Key `key`, in memory or archived.
  std::optional<JobNumber> FindKey(const std::string& tenant, const std::string& key) const;
  // Whether `id` is in memory and still being made durable (its submission's commit is
  // under way without the lock).
  bool InFlight(JobNumber id) const {
    auto it = jobs_.find(id);
    return it != jobs_.end() && !it->second.durable;
  }
  void AddKey(const std::string& tenant, const std::string& key, JobNumber id);
  // A submission being made durable (JobIntake's staged job): `row` and `job` under the
  // row's id, invisible to the core, and its idempotency key when the row has one.
  // Remove undoes it (its commit failed), Acknowledge completes it.
  void AddStaged(const JobRow& row, JobSubmission job);
  // The staged job `id` is durable: found from now on, its record set from its
  // submission (RecordSubmission; the caller hands it to the core), its stored spec text
  // known to be JSON when `spec_text_ok` (written just now).
  LiveJob& Acknowledge(JobNumber id, bool spec_text_ok, const GpuCatalog& catalog);

  // The core numbers jobs densely by slot, so that its per-job tables stay as small as
  // the jobs in memory; the API's ids only grow.
  std::vector<JobRecord>* records() { return &records_; }  // for the JobLifecycle
  const std::vector<JobRecord>* records() const { return &records_; }
  JobRecord& Rec(const LiveJob& job) { return records_[job.slot]; }
  const JobRecord& Rec(const LiveJob& job) const { return records_[job.slot]; }
  // The job's state, from the one place it is kept: the core's record (its phase, and
  // its end once finished); a job not acknowledged yet is pending; an archived one's is
  // its stored row's.
  JobState StateOf(const LiveJob& job) const;
  // Whether task `t` of the job's current attempt has exited (the core's record of it);
  // true for a task it does not have, and for an archived job.
  bool TaskExited(const LiveJob& job, size_t t) const {
    if (job.slot == kArchived) {
      return true;
    }
    const std::vector<TaskOutcome>& tasks = records_[job.slot].attempt.tasks;
    return t >= tasks.size() || tasks[t].exited;
  }
  LiveJob& JobAt(JobId slot) { return jobs_.at(slot_job_[slot.value()]); }
  // The id of the job in `slot` (invalid: free).
  JobNumber IdAt(JobId slot) const { return slot_job_[slot.value()]; }
  size_t slot_count() const { return slot_job_.size(); }

  // At Open, a stored job read back into the table: its submission parsed from the
  // row's spec, its record (the core's view of it: queue, phase, end, restart policy, the
  // current attempt's allocations and tasks' exits) set from the row and its stored
  // placement, its idempotency key found again. Returns the names of the nodes its
  // current attempt's tasks are on. An error (a row this version cannot read) leaves
  // nothing behind.
  StatusOr<std::vector<std::string>> Restore(JobRow row, const GpuCatalog& catalog,
                                             const QueueTree& tree);
  // At Open, every stored row restored (Restore), every row's id noted first, so that
  // no id is reused. A row this version cannot read must not keep the controller (and
  // every other tenant's jobs) down: it stays in the store as it is, left out, logged
  // and returned (quarantined). `on_node`: each node a restored job's current attempt's
  // tasks are on, in the rows' order.
  struct Quarantined {
    uint64_t id = 0;
    std::string why;
  };
  std::vector<Quarantined> RestoreAll(std::vector<JobRow> rows, const GpuCatalog& catalog,
                                      const QueueTree& tree,
                                      const std::function<void(const std::string&)>& on_node);
  // `event` with the API's job ids in place of the core's slots (for a listener outside
  // the core).
  LifecycleEvent WithJobIds(LifecycleEvent event) const;
  // Once every stored job is restored: each job's restart count from its stored attempts
  // and a requeued attempt's cause from its reason (a stopping job's cause is not
  // stored). Returns the pending jobs still to wait out a restart's backoff, with its end.
  std::vector<std::pair<JobRecord*, Micros>> RestoreRestarts();

  // A job started at once, without the core's cycle (ModuleStep::StartNodeJob), under
  // the next id: durable, its row (tenant: the submission's user) and stored spec
  // written, its record running its first attempt since `now`, its one task on
  // `allocation`. The submission's queue must be in `tree`. Not yet held or charged in
  // the core: the caller hands the record to the lifecycle (JobLifecycle::Restore).
  LiveJob& AddStarted(JobSubmission submission, const Allocation& allocation,
                      const GpuCatalog& catalog, const QueueTree& tree, Micros now);

  // The job whose current attempt's task `key` is placed on `node`, while it runs or
  // stops; null otherwise (a report about it is stale: not, or no longer, that node's).
  LiveJob* CurrentTaskOn(const TaskKey& key, const std::string& node);
  // A reported chunk of task `task`'s output from byte `offset`: the part not received
  // yet, now counted as received; nullopt when there is none (a resent heartbeat).
  std::optional<LogAppend> ReceiveLog(LiveJob& job, int task, int64_t offset,
                                      const std::string& data);

  // An agent of `node` registered reporting `reports`: the tasks of the running and
  // stopping jobs' current attempts placed there, not exited, that it did not report.
  // An agent keeps every task it received until its end is durable here, so it never
  // received these: a running job's are launched again, a stopping job's have ended.
  std::vector<TaskKey> Unreported(const std::string& node,
                                  const std::vector<TaskReport>& reports) const;
  // The tasks `reports` says still run that belong to a stopping job's current attempt
  // and have not exited: their stops (decided before a controller restart, or sent to
  // the agent's previous connection) are to be sent again.
  std::vector<TaskKey> StopsToResend(const std::vector<TaskReport>& reports) const;
  // The reports from `node` on a task of an acknowledged job's current attempt placed on
  // another node, with that node's name (stale or unknown tasks are not among them: the
  // usual reconciliation answers those).
  std::vector<std::pair<TaskKey, std::string>> ForeignReports(
      const std::string& node, const std::vector<TaskReport>& reports) const;
  // A node's commands waiting for its heartbeat, less those with nothing left to do: a
  // stop whose task is gone (its job unknown, another attempt, or exited), a launch
  // whose attempt is no longer running (the stop that follows ends it on the agent,
  // which never had it).
  void PruneCommands(std::vector<TaskLaunch>& launches, std::vector<TaskStop>& stops) const;
  // Whether `key` names the current attempt of an acknowledged job the core runs (not
  // stopping): its launch is still to be handed out.
  bool AttemptRunning(const TaskKey& key) const;
  // ... and that task has not exited and is placed on `node`: a launch the node's agent
  // never received is to be sent again. The job, or null when it is not.
  const LiveJob* AwaitsLaunch(const std::string& node, const TaskKey& key) const;

  // The job's row as it is to be stored now: its state from the core's record and, while
  // an attempt holds a placement, that placement with its tasks' nodes and exits (the
  // attempts stored before kept).
  const JobRow& SealRow(LiveJob& job);

  // Jobs whose terminal rows are durable: candidates for archiving, oldest first.
  void NoteFinished(JobNumber id) { finished_order_.push_back(id); }
  void NoteFinished(const std::vector<JobNumber>& ids) {
    finished_order_.insert(finished_order_.end(), ids.begin(), ids.end());
  }
  // Archives the oldest finished jobs beyond the newest `keep`: they leave memory (and
  // their slots are reused) once no victim still stops for them; their keys are
  // remembered until the retention passes. Returns the ids that left.
  std::vector<JobNumber> Archive(Micros now, size_t keep);
  // A job archived to the store, read back from its `row` (read only: it is finished):
  // durable, in slot kArchived, its submission parsed from the row's spec (left empty
  // when the spec no longer parses).
  static LiveJob FromArchive(JobRow row, const GpuCatalog& catalog);

  // ---- what the modules' and services' step reads and does of the jobs ----
  // (modules/controller_module.h, services/service_step.h)
  // The job as a module sees it (the facts refer into `job`); `lifecycle` (null until
  // the core made one) gives a pending job's hold. An archived job has no record.
  JobFacts FactsOf(const LiveJob& job, const JobLifecycle* lifecycle) const;
  // Every acknowledged job in memory as FactsOf gives it, in id order: only those running
  // or stopping when `running_only`.
  void VisitFacts(bool running_only, const JobLifecycle* lifecycle,
                  const std::function<void(const JobFacts&)>& visit) const;
  // An acknowledged job in memory that is running or stopping; null for any other.
  LiveJob* FindRunning(JobNumber id);
  // The jobs running or stopping with a task of their current attempt on `node` that has
  // not exited, in id order.
  std::vector<JobNumber> JobsOnNode(const std::string& node) const;
  // Appends to `stops` (node, stop) a stop of each task of the job's current attempt that
  // has not exited, sending `signal`, the agent killing what is left after `grace`.
  void SignalStops(const LiveJob& job, int signal, Micros grace,
                   std::vector<std::pair<std::string, TaskStop>>& stops) const;
  // Ends pending job `id` at once as cancelled at `now` (`lifecycle`: the core's, which
  // runs on these records), with `reason` when not empty; its row's end is `now`. False,
  // nothing changed, for a job not in memory or not pending.
  bool CancelPending(JobNumber id, const std::string& reason, JobLifecycle* lifecycle, Micros now);
  // A pending job in memory kept from the cycle (JobLifecycle::Gate), or offered to it
  // again at `now` (Ungate); nothing for a job not in memory.
  void Gate(JobNumber id, JobLifecycle& lifecycle);
  void Ungate(JobNumber id, JobLifecycle& lifecycle, Micros now);
  // Whether the lifecycle keeps job `id` (in memory) from the cycle.
  bool Gated(JobNumber id, const JobLifecycle& lifecycle) const;
  // The reason in job `id`'s row; "" for a job not in memory.
  const std::string& ReasonOf(JobNumber id) const;

  // ---- what the core's decisions and lost nodes do to a job's row and tasks ----
  // The core started the job's next attempt (its record holds one allocation per task, on
  // nodes of `state`): its tasks placed on those nodes, its row's first start (`now`),
  // attempt count and reason ("backfilled": started ahead of a reserved job).
  void StartAttempt(LiveJob& job, const ClusterState& state, bool backfilled, Micros now);
  // The jobs of `tenant` in memory but `except`, acknowledged or not, in id order.
  std::vector<const LiveJob*> TenantJobs(const std::string& tenant, JobNumber except) const;
  // The attempt machine's effects `fx` on the job's row (its new reason and exit code), and
  // the stops of the tasks it stops appended to `stops`, their grace rounded up to whole
  // milliseconds: a victim evicted at its periodic checkpoint must not end a fraction of
  // a millisecond before it and lose the interval.
  static void ApplyEffects(LiveJob& job, AttemptEffects& fx,
                           std::vector<std::pair<std::string, TaskStop>>& stops);
  // The job's attempt `ended` at `now`; `stored` (StoredEndedAttempt) joins the row's
  // stored attempts when it ran. Requeued, it resumes from its record's checkpoint and
  // holds no tasks; else its row ends at `now`.
  void EndAttempt(LiveJob& job, const EndedAttempt& ended, nlohmann::json stored, Micros now);
  // Preemption `d` chose `victim` (counted in its row): how it is stopped, requeued at
  // the end of its grace (from `now`), its preemptor named in the reason.
  StopRequest Preempted(LiveJob& victim, const PreemptDecision& d, Micros now);
  // Node `node` is lost: each running or stopping job's tasks placed there are detached
  // from `lifecycle` (the node leaves the core holding nothing), then, when any of them
  // had not exited, `lost` is told those (in task order), job by job in id order.
  void LoseNode(const std::string& node, JobLifecycle* lifecycle,
                const std::function<void(LiveJob& job, const std::vector<size_t>& tasks)>& lost);

 private:
  // The job's record set from its submission: spec, restart policy, GPU demand (the
  // caller sets its phase and queue). At acknowledgement, at Open and for a started job.
  JobRecord& RecordSubmission(LiveJob& job, const GpuCatalog& catalog);
  // The stop of the job's task `t` of its current attempt, sending `signal`, the agent
  // killing what is left after `grace` rounded up to whole milliseconds.
  static std::pair<std::string, TaskStop> StopOf(const LiveJob& job, size_t t, Micros grace,
                                                 int signal);
  uint32_t AllocSlot(JobNumber id);
  void FreeSlot(uint32_t slot);

  std::map<JobNumber, LiveJob> jobs_;
  std::unordered_map<std::string, JobNumber> idempotency_;  // tenant + '\x1f' + key
  // Idempotency keys of archived jobs, by archive time: dropped after the retention.
  std::deque<std::pair<Micros, std::string>> archived_keys_;
  std::vector<JobRecord> records_;  // by slot
  std::vector<JobNumber> slot_job_;  // slot -> job id (invalid: free)
  std::vector<uint32_t> free_slots_;
  std::deque<JobNumber> finished_order_;  // finished jobs in memory, oldest first
  uint64_t next_id_ = 1;                  // ids start at 1
};

}  // namespace tessera
