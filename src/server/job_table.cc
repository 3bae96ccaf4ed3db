#include "server/job_table.h"

#include <iostream>
#include <set>
#include <tuple>

#include "server/job_attempts.h"
#include "server/job_rows.h"
#include "server/modules/controller_module.h"
#include "server/modules/validation.h"

namespace tessera {

using job_rows::ParsePlacement;
using job_rows::QueueKey;
using job_rows::StoredTask;

LiveJob* JobTable::Find(JobNumber id) {
  return const_cast<LiveJob*>(std::as_const(*this).Find(id));
}

const LiveJob* JobTable::Find(JobNumber id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() || !it->second.durable ? nullptr : &it->second;
}

std::vector<TaskKey> JobTable::Unreported(const std::string& node,
                                          const std::vector<TaskReport>& reports) const {
  std::set<std::tuple<uint64_t, int, int>> reported;
  for (const TaskReport& r : reports) {
    reported.insert({r.key.job, r.key.task, r.key.attempt});
  }
  std::vector<TaskKey> unreported;
  for (const auto& [id, job] : jobs_) {
    const JobPhase phase = Rec(job).phase;
    if (!InAttempt(phase)) {
      continue;
    }
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      const TaskKey key{id.value(), static_cast<int>(t), job.row.attempts};
      if (job.tasks[t].node == node && !TaskExited(job, t) &&
          reported.count({key.job, key.task, key.attempt}) == 0) {
        unreported.push_back(key);
      }
    }
  }
  return unreported;
}

std::vector<TaskKey> JobTable::StopsToResend(const std::vector<TaskReport>& reports) const {
  std::vector<TaskKey> stops;
  for (const TaskReport& r : reports) {
    const LiveJob* job = Find(JobNumber(r.key.job));
    if (r.state == TaskState::kRunning && job != nullptr &&
        Rec(*job).phase == JobPhase::kStopping && job->row.attempts == r.key.attempt &&
        static_cast<size_t>(r.key.task) < job->tasks.size() &&
        !TaskExited(*job, static_cast<size_t>(r.key.task))) {
      stops.push_back(r.key);
    }
  }
  return stops;
}

std::vector<std::pair<TaskKey, std::string>> JobTable::ForeignReports(
    const std::string& node, const std::vector<TaskReport>& reports) const {
  std::vector<std::pair<TaskKey, std::string>> foreign;
  for (const TaskReport& r : reports) {
    const LiveJob* job = Find(JobNumber(r.key.job));
    if (job == nullptr || r.key.task < 0 || static_cast<size_t>(r.key.task) >= job->tasks.size() ||
        job->row.attempts != r.key.attempt) {
      continue;
    }
    const std::string& placed = job->tasks[static_cast<size_t>(r.key.task)].node;
    if (placed != node) {
      foreign.emplace_back(r.key, placed);
    }
  }
  return foreign;
}

void JobTable::PruneCommands(std::vector<TaskLaunch>& launches,
                             std::vector<TaskStop>& stops) const {
  std::erase_if(stops, [&](const TaskStop& s) {
    const LiveJob* job = Find(JobNumber(s.key.job));
    return job == nullptr || job->row.attempts != s.key.attempt ||
           static_cast<size_t>(s.key.task) >= job->tasks.size() ||
           TaskExited(*job, static_cast<size_t>(s.key.task));
  });
  std::erase_if(launches, [&](const TaskLaunch& l) { return !AttemptRunning(l.key); });
}

bool JobTable::AttemptRunning(const TaskKey& key) const {
  const LiveJob* job = Find(JobNumber(key.job));
  return job != nullptr && job->row.attempts == key.attempt &&
         Rec(*job).phase == JobPhase::kRunning;
}

const LiveJob* JobTable::AwaitsLaunch(const std::string& node, const TaskKey& key) const {
  if (!AttemptRunning(key)) {
    return nullptr;
  }
  const LiveJob* job = Find(JobNumber(key.job));
  const auto task = static_cast<size_t>(key.task);
  const bool awaits = key.task >= 0 && task < job->tasks.size() && !TaskExited(*job, task) &&
                      job->tasks[task].node == node;
  return awaits ? job : nullptr;
}

const JobRow& JobTable::SealRow(LiveJob& job) {
  const JobRecord& rec = Rec(job);
  if (InAttempt(rec.phase) && !rec.allocations.empty() &&
      rec.allocations.size() == job.tasks.size()) {
    std::vector<job_rows::StoredTask> tasks;
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      const TaskOutcome o = t < rec.attempt.tasks.size() ? rec.attempt.tasks[t] : TaskOutcome{};
      tasks.push_back(job_rows::StoredTask{job.tasks[t].node, o.exited, o.exit_code, o.signal});
    }
    static constexpr const char* kAfter[] = {"", "requeue", "cancel", "fail"};
    job.row.placement_json = WithStoredAttempts(
        job_rows::PlacementJson(rec.allocations, tasks, rec.run_start,
                                kAfter[static_cast<size_t>(rec.attempt.after)]),
        job.row.placement_json);
  }
  job.row.state = std::string(JobStateName(StateOf(job)));  // the stored copy
  return job.row;
}

JobState JobTable::StateOf(const LiveJob& job) const {
  if (job.slot == kArchived) {
    return ParseJobState(job.row.state).value_or(JobState::kFailed);
  }
  const JobRecord& rec = records_[job.slot];
  switch (rec.phase) {
    case JobPhase::kPending:
      return JobState::kPending;
    case JobPhase::kRunning:
      return JobState::kRunning;
    case JobPhase::kStopping:
      return JobState::kStopping;
    case JobPhase::kFinished:
      break;
  }
  if (!job.durable) {
    return JobState::kPending;  // its record is filled in at its acknowledgement
  }
  switch (rec.end) {
    case JobEnd::kSucceeded:
      return JobState::kSucceeded;
    case JobEnd::kFailed:
      return JobState::kFailed;
    case JobEnd::kCancelled:
      return JobState::kCancelled;
  }
  return JobState::kFailed;
}

LiveJob& JobTable::Add(JobNumber id) {
  LiveJob& job = jobs_[id];
  job.slot = AllocSlot(id);
  return job;
}

void JobTable::Remove(JobNumber id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return;
  }
  const LiveJob& job = it->second;
  if (!job.row.idempotency_key.empty()) {
    auto key = idempotency_.find(QueueKey(job.row.tenant, job.row.idempotency_key));
    if (key != idempotency_.end() && key->second == id) {  // else it names another job
      idempotency_.erase(key);
    }
  }
  FreeSlot(job.slot);
  jobs_.erase(it);
}

std::optional<JobNumber> JobTable::FindKey(const std::string& tenant,
                                           const std::string& key) const {
  auto it = idempotency_.find(QueueKey(tenant, key));
  if (it == idempotency_.end()) {
    return std::nullopt;
  }
  return it->second;
}

void JobTable::AddKey(const std::string& tenant, const std::string& key, JobNumber id) {
  idempotency_[QueueKey(tenant, key)] = id;
}

void JobTable::AddStaged(const JobRow& row, JobSubmission job) {
  LiveJob& j = Add(JobNumber(row.id));  // finished (invisible to the core)
  j.row = row;
  j.submission = std::move(job);
  if (!row.idempotency_key.empty()) {
    AddKey(row.tenant, row.idempotency_key, j.id());
  }
}

LiveJob& JobTable::Acknowledge(JobNumber id, bool spec_text_ok, const GpuCatalog& catalog) {
  LiveJob& j = jobs_.at(id);
  if (spec_text_ok) {
    j.spec_text_ok = 1;
  }
  j.durable = true;
  RecordSubmission(j, catalog);
  return j;
}

LiveJob* JobTable::CurrentTaskOn(const TaskKey& key, const std::string& node) {
  LiveJob* job = Find(JobNumber(key.job));
  if (job == nullptr || job->row.attempts != key.attempt || key.task < 0 ||
      static_cast<size_t>(key.task) >= job->tasks.size() ||
      job->tasks[static_cast<size_t>(key.task)].node != node) {
    return nullptr;
  }
  const JobPhase phase = Rec(*job).phase;
  return InAttempt(phase) ? job : nullptr;
}

std::optional<LogAppend> JobTable::ReceiveLog(LiveJob& job, int task, int64_t offset,
                                              const std::string& data) {
  TaskRun& run = job.tasks[static_cast<size_t>(task)];
  const int64_t end = offset + static_cast<int64_t>(data.size());
  if (data.empty() || end <= run.log_received) {
    return std::nullopt;  // already have it (a resent heartbeat)
  }
  const size_t skip =
      offset < run.log_received ? static_cast<size_t>(run.log_received - offset) : 0;
  run.log_received = end;
  return LogAppend{job.id(), task, data.substr(skip)};
}

uint32_t JobTable::AllocSlot(JobNumber id) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
    slot_job_.emplace_back();
  }
  records_[slot] = JobRecord{};
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = id;
  return slot;
}

void JobTable::FreeSlot(uint32_t slot) {
  records_[slot] = JobRecord{};  // frees the spec and what it held
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = JobNumber();
  free_slots_.push_back(slot);
}

std::vector<JobNumber> JobTable::Archive(Micros now, size_t keep) {
  std::vector<JobNumber> archived;
  size_t scans = finished_order_.size();
  while (finished_order_.size() > keep && scans-- > 0) {
    const JobNumber id = finished_order_.front();
    finished_order_.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      continue;
    }
    LiveJob& job = it->second;
    const JobRecord& rec = Rec(job);
    if (rec.phase != JobPhase::kFinished || rec.victims_in_flight > 0) {
      finished_order_.push_back(id);  // a victim still reports to it: later
      continue;
    }
    if (!job.row.idempotency_key.empty()) {
      archived_keys_.emplace_back(now, QueueKey(job.row.tenant, job.row.idempotency_key));
    }
    FreeSlot(job.slot);
    archived.push_back(id);
    jobs_.erase(it);
  }
  while (!archived_keys_.empty() && now - archived_keys_.front().first > kIdempotencyRetention) {
    auto key = idempotency_.find(archived_keys_.front().second);
    if (key != idempotency_.end() && jobs_.find(key->second) == jobs_.end()) {
      idempotency_.erase(key);
    }
    archived_keys_.pop_front();
  }
  return archived;
}

JobRecord& JobTable::RecordSubmission(LiveJob& job, const GpuCatalog& catalog) {
  JobRecord& rec = Rec(job);
  rec.spec = job.submission.spec;
  rec.attempt.policy = job.submission.restart.value_or(DefaultRestartPolicy());
  rec.gpu_milli = rec.spec.TotalGpuMilli(catalog);
  return rec;
}

std::vector<JobTable::Quarantined> JobTable::RestoreAll(
    std::vector<JobRow> rows, const GpuCatalog& catalog, const QueueTree& tree,
    const std::function<void(const std::string&)>& on_node) {
  for (const JobRow& row : rows) {
    NoteStoredId(JobNumber(row.id));
  }
  std::vector<Quarantined> quarantined;
  for (JobRow& row : rows) {
    const uint64_t id = row.id;
    StatusOr<std::vector<std::string>> nodes = Restore(std::move(row), catalog, tree);
    if (!nodes.ok()) {
      std::cerr << "tessera server: job " << id << " quarantined: its stored row cannot be read ("
                << nodes.status().message() << "); it stays in the store and is left out\n";
      quarantined.push_back({id, nodes.status().message()});
      continue;
    }
    for (const std::string& n : *nodes) {
      on_node(n);
    }
  }
  return quarantined;
}

LifecycleEvent JobTable::WithJobIds(LifecycleEvent event) const {
  event.job = JobId(IdAt(event.job).value());
  if (event.by.valid()) {
    event.by = JobId(IdAt(event.by).value());
  }
  return event;
}

StatusOr<std::vector<std::string>> JobTable::Restore(JobRow row, const GpuCatalog& catalog,
                                                     const QueueTree& tree) {
  nlohmann::json spec = nlohmann::json::parse(row.spec_json.str(), nullptr, false);
  if (spec.is_discarded()) {
    return InternalError("stored spec is not JSON");
  }
  StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, catalog);
  if (!sub.ok()) {
    return InternalError("spec: " + sub.status().message());
  }
  std::optional<JobState> state = ParseJobState(row.state);
  if (!state) {
    return InternalError("unknown stored state '" + row.state.substr(0, 40) + "'");
  }
  std::vector<Allocation> allocations;
  std::vector<StoredTask> stored_tasks;
  Micros run_start = 0;
  std::string after;
  if (!Terminal(*state) && *state != JobState::kPending) {
    TESSERA_RETURN_IF_ERROR(
        ParsePlacement(row.placement_json, &allocations, &stored_tasks, &run_start, &after));
  }
  // Nothing fails from here on.
  const JobNumber id(row.id);
  LiveJob& job = Add(id);
  job.durable = true;
  job.submission = std::move(sub).value();
  job.submission.spec.queue = row.queue;
  job.row = std::move(row);
  if (!job.row.idempotency_key.empty()) {
    AddKey(job.row.tenant, job.row.idempotency_key, id);
  }
  JobRecord& rec = RecordSubmission(job, catalog);
  rec.spec.submit_time = job.row.submit_us;
  // Known before the first cycle: an agent may report an exit before then.
  if (StatusOr<QueueId> q = tree.FindQueue(job.row.queue); q.ok()) {
    rec.queue = q.value();
  }
  rec.resumed_from = job.row.progress_us;
  rec.preemptions = job.row.preemptions;
  rec.eligible_since = job.row.submit_us;
  if (Terminal(*state)) {
    rec.phase = JobPhase::kFinished;
    rec.end = *state == JobState::kSucceeded   ? JobEnd::kSucceeded
              : *state == JobState::kCancelled ? JobEnd::kCancelled
                                               : JobEnd::kFailed;
    NoteFinished(id);
    return std::vector<std::string>{};
  }
  if (*state == JobState::kPending) {
    rec.phase = JobPhase::kPending;
    return std::vector<std::string>{};
  }
  rec.phase = *state == JobState::kStopping ? JobPhase::kStopping : JobPhase::kRunning;
  rec.allocations = std::move(allocations);
  rec.run_start = run_start;
  job.tasks.resize(stored_tasks.size());
  rec.attempt.tasks.resize(stored_tasks.size());
  std::vector<std::string> nodes;
  for (size_t t = 0; t < stored_tasks.size(); ++t) {
    job.tasks[t].node = stored_tasks[t].node;
    rec.attempt.tasks[t] =
        TaskOutcome{stored_tasks[t].exited, stored_tasks[t].exit_code, stored_tasks[t].signal};
    nodes.push_back(stored_tasks[t].node);
  }
  rec.attempt.after = after == "cancel" ? AttemptEnd::kCancel
                     : after == "fail"   ? AttemptEnd::kFail
                     : after == "requeue" || rec.phase == JobPhase::kStopping
                         ? AttemptEnd::kRequeue
                         : AttemptEnd::kNone;
  return nodes;
}

std::vector<std::pair<JobRecord*, Micros>> JobTable::RestoreRestarts() {
  std::vector<std::pair<JobRecord*, Micros>> backoffs;
  for (auto& [id, job] : jobs_) {
    const nlohmann::json attempts = StoredAttempts(job.row.placement_json);
    if (job.slot == kArchived || attempts.empty() || !attempts.back().is_object()) {
      continue;
    }
    AttemptState& attempt = Rec(job).attempt;
    attempt.restarts = StoredRestarts(attempts);  // a finishing attempt stores no count
    const Micros restart_at = attempts.back().value("restart_at", Micros{0});
    if (StateOf(job) == JobState::kPending && restart_at > 0) {
      backoffs.emplace_back(&Rec(job), restart_at);
    }
    if (attempt.after == AttemptEnd::kRequeue) {
      if (job.row.reason.rfind("requeued: gpu-fault", 0) == 0) {
        attempt.cause = RequeueCause::kGpuFault;
      } else if (job.row.reason.rfind("restarting after failure", 0) == 0) {
        attempt.cause = RequeueCause::kFailure;
      } else if (job.row.reason.rfind("requeued: node", 0) == 0) {
        attempt.cause = RequeueCause::kNodeLost;
      }
    }
  }
  return backoffs;
}

LiveJob& JobTable::AddStarted(JobSubmission submission, const Allocation& allocation,
                              const GpuCatalog& catalog, const QueueTree& tree, Micros now) {
  const JobNumber id = TakeId();
  LiveJob& job = Add(id);
  job.row.id = id.value();
  job.row.tenant = submission.spec.user;
  job.row.queue = submission.spec.queue;
  job.row.name = submission.spec.name;
  job.row.spec_json = JobSubmissionToJson(submission, catalog).dump();
  job.row.submit_us = now;
  job.submission = std::move(submission);
  job.durable = true;
  JobRecord& rec = RecordSubmission(job, catalog);
  rec.queue = tree.FindQueue(job.row.queue).value();
  rec.allocations = {allocation};
  rec.held = {1};
  rec.phase = JobPhase::kRunning;
  rec.run_start = now;
  rec.eligible_since = now;
  rec.starts = 1;
  return job;
}

JobFacts JobTable::FactsOf(const LiveJob& job, const JobLifecycle* lifecycle) const {
  const bool archived = job.slot == kArchived;
  const JobState state = StateOf(job);
  const int stored_restarts = archived ? StoredRestarts(StoredAttempts(job.row.placement_json)) : 0;
  const bool held = !archived && state == JobState::kPending && lifecycle != nullptr;
  return JobFacts{job.id(),
                  job.row.tenant,
                  job.row.queue,
                  job.row.attempts,
                  state,
                  archived ? nullptr : &Rec(job),
                  job.submission,
                  job.row.tenant == kValidationTenant,
                  job.tasks.size(),
                  [&job](size_t t) -> const std::string& { return job.tasks[t].node; },
                  stored_restarts,
                  held ? lifecycle->HeldUntil(Rec(job).id) : 0};
}

void JobTable::VisitFacts(bool running_only, const JobLifecycle* lifecycle,
                          const std::function<void(const JobFacts&)>& visit) const {
  for (const auto& [id, job] : jobs_) {
    const JobState state = StateOf(job);
    if (job.durable &&
        (!running_only || state == JobState::kRunning || state == JobState::kStopping)) {
      visit(FactsOf(job, lifecycle));
    }
  }
}

LiveJob* JobTable::FindRunning(JobNumber id) {
  LiveJob* job = Find(id);
  const JobState state = job != nullptr ? StateOf(*job) : JobState::kPending;
  return state == JobState::kRunning || state == JobState::kStopping ? job : nullptr;
}

std::vector<JobNumber> JobTable::JobsOnNode(const std::string& node) const {
  std::vector<JobNumber> on;  // the table is in id order
  for (const auto& [id, job] : jobs_) {
    const JobPhase phase = Rec(job).phase;
    const bool runs = InAttempt(phase);
    bool here = false;
    for (size_t t = 0; runs && !here && t < job.tasks.size(); ++t) {
      here = job.tasks[t].node == node && !TaskExited(job, t);
    }
    if (here) {
      on.push_back(id);
    }
  }
  return on;
}

void JobTable::SignalStops(const LiveJob& job, int signal, Micros grace,
                           std::vector<std::pair<std::string, TaskStop>>& stops) const {
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    if (!TaskExited(job, t)) {
      stops.push_back(StopOf(job, t, grace, signal));
    }
  }
}

bool JobTable::CancelPending(JobNumber id, const std::string& reason, JobLifecycle* lifecycle,
                             Micros now) {
  LiveJob* job = Find(id);
  if (job == nullptr || job->slot == kArchived || Rec(*job).phase != JobPhase::kPending) {
    return false;
  }
  if (!reason.empty()) {
    job->row.reason = reason;
  }
  lifecycle->Finish(Rec(*job), JobEnd::kCancelled, now);
  job->row.end_us = now;
  return true;
}

void JobTable::Gate(JobNumber id, JobLifecycle& lifecycle) {
  if (LiveJob* job = Find(id); job != nullptr) {
    lifecycle.Gate(Rec(*job));  // ignored unless pending
  }
}

void JobTable::Ungate(JobNumber id, JobLifecycle& lifecycle, Micros now) {
  if (LiveJob* job = Find(id); job != nullptr) {
    lifecycle.Ungate(Rec(*job), now);
  }
}

bool JobTable::Gated(JobNumber id, const JobLifecycle& lifecycle) const {
  const LiveJob* job = Find(id);
  return job != nullptr && lifecycle.Gated(Rec(*job).id);
}

const std::string& JobTable::ReasonOf(JobNumber id) const {
  static const std::string kNone;
  const LiveJob* job = Find(id);
  return job != nullptr ? job->row.reason : kNone;
}

LiveJob JobTable::FromArchive(JobRow row, const GpuCatalog& catalog) {
  LiveJob job;
  job.row = std::move(row);
  job.durable = true;
  job.slot = kArchived;
  nlohmann::json spec = nlohmann::json::parse(job.row.spec_json.str(), nullptr, false);
  if (!spec.is_discarded()) {
    if (StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, catalog); sub.ok()) {
      job.submission = std::move(sub).value();
    }
  }
  return job;
}

void JobTable::StartAttempt(LiveJob& job, const ClusterState& state, bool backfilled, Micros now) {
  const std::vector<Allocation>& allocations = Rec(job).allocations;
  job.tasks.assign(allocations.size(), TaskRun{});
  for (size_t t = 0; t < allocations.size(); ++t) {
    job.tasks[t].node = state.spec(allocations[t].node).name;
  }
  if (job.row.start_us == 0) {
    job.row.start_us = now;
  }
  ++job.row.attempts;
  job.row.reason = backfilled ? "backfilled" : "";
}

std::vector<const LiveJob*> JobTable::TenantJobs(const std::string& tenant,
                                                 JobNumber except) const {
  std::vector<const LiveJob*> of;
  for (const auto& [id, job] : jobs_) {
    if (id != except && job.row.tenant == tenant) {
      of.push_back(&job);
    }
  }
  return of;
}

std::pair<std::string, TaskStop> JobTable::StopOf(const LiveJob& job, size_t t, Micros grace,
                                                  int signal) {
  return {job.tasks[t].node, TaskStop{TaskKey{job.row.id, static_cast<int>(t), job.row.attempts},
                                      (grace + 999) / 1000, signal}};
}

void JobTable::ApplyEffects(LiveJob& job, AttemptEffects& fx,
                            std::vector<std::pair<std::string, TaskStop>>& stops) {
  if (fx.reason) {
    job.row.reason = std::move(*fx.reason);  // the effects' reason is spent here
  }
  if (fx.exit_code) {
    job.row.exit_code = *fx.exit_code;
  }
  for (size_t t : fx.stop) {
    stops.push_back(StopOf(job, t, fx.grace, 15));
  }
}

void JobTable::EndAttempt(LiveJob& job, const EndedAttempt& ended, nlohmann::json stored,
                          Micros now) {
  job.row.placement_json =
      ended.run_start > 0 ? AppendAttempt(job.row.placement_json, std::move(stored))
                          : WithStoredAttempts(nlohmann::json::object(), job.row.placement_json);
  if (ended.requeued) {
    job.row.progress_us = Rec(job).resumed_from;
    job.tasks.clear();
  } else {
    job.row.end_us = now;
  }
}

StopRequest JobTable::Preempted(LiveJob& victim, const PreemptDecision& d, Micros now) {
  ++victim.row.preemptions;
  return StopRequest{AttemptEnd::kRequeue, RequeueCause::kPreempted,
                     std::max<Micros>(0, d.evict_at - now),
                     "preempted by job " + ToString(IdAt(d.preemptor))};
}

void JobTable::LoseNode(
    const std::string& node, JobLifecycle* lifecycle,
    const std::function<void(LiveJob& job, const std::vector<size_t>& tasks)>& lost) {
  for (auto& [id, job] : jobs_) {
    const JobPhase phase = Rec(job).phase;
    if (!InAttempt(phase)) {
      continue;
    }
    std::vector<size_t> live;
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      if (job.tasks[t].node == node) {
        if (!TaskExited(job, t)) {
          live.push_back(t);
        }
        lifecycle->DetachTask(Rec(job), t);
      }
    }
    if (!live.empty()) {
      lost(job, live);
    }
  }
}

}  // namespace tessera
