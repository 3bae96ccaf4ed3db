#include "server/controller.h"

#include <limits>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "api/queue_config.h"
#include "base/time_format.h"
#include "plugins/registry.h"
#include "sched/runtime_predictor.h"
#include "server/job_rows.h"
#include "server/job_attempts.h"

namespace tessera {

using namespace job_rows;  // NOLINT: the controller's own helpers

// ---- construction and recovery ------------------------------------------------

Controller::Controller(ControllerOptions options, Store* store, const GpuCatalog& catalog,
                       const Clock& clock)
    : options_(std::move(options)),
      store_(store),
      catalog_(&catalog),
      clock_(&clock),
      logs_(options_.data_dir + "/logs"),
      views_(catalog),
      core_(catalog, options_.seed, options_.placement),
      gpu_task_defaults_(catalog),
      identities_({options_.run_as, options_.uid_pool_start, options_.uid_pool_size}) {
  health_ = GpuHealthModule(options_.health);
  // Accounting first: its families lead the modules' part of /metrics. Attached modules
  // (the validation runs) come next.
  modules_ = {&accounting_, &limits_, &health_, &idle_, &eta_, &node_history_, &gates_, &restarts_};
}

Status Controller::Attach(ControllerModule& module, std::function<void()> after_cycle) {
  MutexLock lock(mu_);  // before Start: the store is read with it held, as Open does
  TESSERA_RETURN_IF_ERROR(module.Load(*store_));
  modules_.insert(modules_.begin() + static_cast<std::ptrdiff_t>(1 + attached_++), &module);
  fit_stale_ = true;  // its holds count for the fit verdicts
  if (after_cycle) {
    after_cycle_.push_back(std::move(after_cycle));
  }
  return Status::Ok();
}

StatusOr<std::string> Controller::ReadTaskOutput(JobNumber job, int64_t max_bytes) {
  TESSERA_ASSIGN_OR_RETURN(LogChunk chunk, logs_.Read(job, 0, 0, max_bytes));
  return std::move(chunk.data);
}

Controller::~Controller() { Stop(); }

StatusOr<std::unique_ptr<Controller>> Controller::Open(ControllerOptions options, Store* store,
                                                       const GpuCatalog& catalog,
                                                       const Clock& clock,
                                                       const std::string& queues_yaml) {
  std::unique_ptr<Controller> c(new Controller(std::move(options), store, catalog, clock));
  {
    // Nothing else runs yet: held so that Load may touch what mu_ guards (it reads the
    // store with it held, which later steps never do).
    MutexLock lock(c->mu_);
    TESSERA_RETURN_IF_ERROR(c->Load(queues_yaml));
  }
  return c;
}

Status Controller::Load(const std::string& queues_yaml) {
  TESSERA_RETURN_IF_ERROR(core_.ChoosePolicy(options_.scheduler_policy, options_.policy,
                                             options_.min_run_before_reclaim,
                                             options_.victim_hold));
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> stored, store_->GetKv(kQueuesKey));
  const std::string yaml = stored ? *stored : queues_yaml;
  TESSERA_RETURN_IF_ERROR(core_.ApplyQueueYaml(yaml));
  forwarder_.controller = this;
  // Always: the modules hear its events (the ETAs' runtime predictor learns from them).
  core_.MakeLifecycle(jobs_.records(), &forwarder_);
  eta_.UseCorePredictor(core_.policy().uses_predictor);
  if (!stored) {
    WriteBatch b;
    b.kv.emplace_back(kQueuesKey, yaml);
    TESSERA_RETURN_IF_ERROR(store_->Commit(std::move(b)));
  }

  const Micros now = clock_->NowMicros();
  TESSERA_ASSIGN_OR_RETURN(auto stored_nodes, store_->ListKv(kNodeKeyPrefix));
  for (const auto& [key, text] : stored_nodes) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      return InternalError("stored node '" + key + "' is not JSON");
    }
    TESSERA_ASSIGN_OR_RETURN(NodeInventory inv, NodeInventoryFromJson(j, *catalog_));
    NodeInfo& n = nodes_.Add(inv.spec.name);
    n.inventory = std::move(inv);
    n.up = false;
    n.reason = "waiting for its agent after a controller restart";
    n.last_seen = now;  // the agent gets a full timeout to come back
  }

  TESSERA_RETURN_IF_ERROR(LoadDrains());
  TESSERA_RETURN_IF_ERROR(identities_.Load(*store_));
  memory_.Load(*store_, core_, now);
  for (ControllerModule* m : modules_) {
    TESSERA_RETURN_IF_ERROR(m->Load(*store_));
  }
  {
    // Read once for every module that counts them (the table grows with the cluster's life).
    TESSERA_ASSIGN_OR_RETURN(const std::vector<UsageRow> usage,
                             store_->LoadUsage(0, std::numeric_limits<int64_t>::max()));
    for (ControllerModule* m : modules_) {
      m->OnStoredUsage(usage);
    }
  }
  TESSERA_RETURN_IF_ERROR(LoadJobRows(now));
  views_.set_clock(clock_);  // a restart's time left
  RestoreRestarts();
  for (const auto& [id, job] : jobs_.all()) {
    PublishView(job);
  }
  PublishWaitContext();
  return Status::Ok();
}

Status Controller::LoadJobRows(Micros now) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows, store_->LoadJobs());
  for (JobRow& row : rows) {
    jobs_.NoteStoredId(JobNumber(row.id));
  }
  for (JobRow& row : rows) {
    const uint64_t id = row.id;
    if (Status s = LoadJobRow(std::move(row), now); !s.ok()) {
      // One row that cannot be read must not keep the controller (and every other
      // tenant's jobs) down: it stays in the store as it is, left out and reported.
      std::cerr << "tessera server: job " << id << " quarantined: its stored row cannot be read ("
                << s.message() << "); it stays in the store and is left out\n";
      quarantined_.push_back({id, s.message()});
    }
  }
  // Holds, dependencies and throttles found again (their jobs are all in memory now).
  for (auto& [id, job] : jobs_.all()) {
    if (!Terminal(jobs_.StateOf(job))) {
      ModulesOnJobAccepted(job, now);
      ModulesOnAttemptRunning(job);  // a running attempt's limit counts from its stored start
    }
  }
  Archive(now);  // the oldest finished jobs stay in the store only
  return Status::Ok();
}

void Controller::RestoreRestarts() {
  for (auto& [id, job] : jobs_.all()) {
    const nlohmann::json attempts = StoredAttempts(job.row.placement_json);
    if (job.slot == JobTable::kArchived || attempts.empty() || !attempts.back().is_object()) {
      continue;
    }
    const nlohmann::json& last = attempts.back();
    AttemptState& attempt = jobs_.Rec(job).attempt;
    attempt.restarts = StoredRestarts(attempts);  // a finishing attempt stores no count
    const Micros restart_at = last.value("restart_at", Micros{0});
    if (jobs_.StateOf(job) == JobState::kPending && restart_at > 0) {
      // Waits out its backoff even across the restart (released by the first cycle
      // when it has passed).
      core_.lifecycle()->HoldUntil(jobs_.Rec(job), restart_at);
    }
    // A stopping job's cause is not stored; its reason says it.
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
}

Status Controller::LoadJobRow(JobRow row, Micros now) {
  nlohmann::json spec = nlohmann::json::parse(row.spec_json.str(), nullptr, false);
  if (spec.is_discarded()) {
    return InternalError("stored spec is not JSON");
  }
  StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, *catalog_);
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
  const JobNumber id(row.id);
  LiveJob& job = jobs_.Add(id);
  job.durable = true;
  job.submission = std::move(sub).value();
  job.submission.spec.queue = row.queue;
  job.row = std::move(row);
  if (!job.row.idempotency_key.empty()) {
    jobs_.AddKey(job.row.tenant, job.row.idempotency_key, id);
  }
  JobRecord& rec = jobs_.Rec(job);
  // Known before the first cycle: an agent may report an exit before then.
  if (StatusOr<QueueId> q = core_.tree().FindQueue(job.row.queue); q.ok()) {
    rec.queue = q.value();
  }
  rec.spec = job.submission.spec;
  rec.spec.submit_time = job.row.submit_us;
  rec.attempt.policy = job.submission.restart.value_or(DefaultRestartPolicy());
  rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
  rec.resumed_from = job.row.progress_us;
  rec.preemptions = job.row.preemptions;
  rec.eligible_since = job.row.submit_us;
  if (Terminal(*state)) {
    rec.phase = JobPhase::kFinished;
    rec.end = *state == JobState::kSucceeded ? JobEnd::kSucceeded
              : *state == JobState::kCancelled ? JobEnd::kCancelled
                                               : JobEnd::kFailed;
    jobs_.NoteFinished(id);
    return Status::Ok();
  }
  if (*state == JobState::kPending) {
    rec.phase = JobPhase::kPending;
    return Status::Ok();
  }
  rec.phase = *state == JobState::kStopping ? JobPhase::kStopping : JobPhase::kRunning;
  rec.allocations = std::move(allocations);
  rec.run_start = run_start;
  job.tasks.resize(stored_tasks.size());
  rec.attempt.tasks.resize(stored_tasks.size());
  for (size_t t = 0; t < stored_tasks.size(); ++t) {
    job.tasks[t].node = stored_tasks[t].node;
    rec.attempt.tasks[t] =
        TaskOutcome{stored_tasks[t].exited, stored_tasks[t].exit_code, stored_tasks[t].signal};
    // A node nobody has heard of since the restart: known only through this job.
    const std::string& n = stored_tasks[t].node;
    if (nodes_.Find(n) == nullptr) {
      NodeInfo& info = nodes_.Add(n);
      info.inventory.spec.name = n;
      info.up = false;
      info.reason = "waiting for its agent after a controller restart";
      info.last_seen = now;
    }
  }
  rec.attempt.after = after == "cancel" ? AttemptEnd::kCancel
                     : after == "fail"   ? AttemptEnd::kFail
                     : after == "requeue" || rec.phase == JobPhase::kStopping
                         ? AttemptEnd::kRequeue
                         : AttemptEnd::kNone;
  return Status::Ok();
}

void Controller::Start() {
  MutexLock lock(loop_mu_);
  if (loop_.joinable()) {
    return;
  }
  stopping_ = false;
  loop_ = std::thread([this] { Loop(); });
  ModulesStart();  // their threads (the ETA refresh) after the loop
}

void Controller::Stop() {
  ModulesStop();  // started last, stopped first
  {
    MutexLock lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  if (loop_.joinable()) {
    loop_.join();
  }
}

void Controller::Wake() {
  {
    MutexLock lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.NotifyAll();
}

void Controller::Loop() {
  MutexLock lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.WaitFor(loop_mu_, std::chrono::microseconds(options_.cycle_interval),
                     [this]() REQUIRES(loop_mu_) { return stopping_ || wake_; });
    if (stopping_) {
      break;
    }
    wake_ = false;
    lock.Unlock();
    Status s = RunCycle();
    if (!s.ok()) {
      std::cerr << "tessera server: scheduling cycle: " << s.ToString() << "\n";
    }
    for (const std::function<void()>& after : after_cycle_) {
      after();  // an attached module's pass (the validation runs'), without mu_
    }
    lock.Lock();
  }
}

void Controller::EventForwarder::OnJobEvent(const JobRecord& job, const LifecycleEvent& event) {
  // The core tells its listener only from within a locked step.
  controller->mu_.AssertHeld();
  controller->ModulesOnJobEvent(job, event);
  if (controller->options_.lifecycle_listener == nullptr) {
    return;
  }
  LifecycleEvent e = event;
  // The listener hears the API's ids, not the core's slots.
  e.job = JobId(controller->jobs_.IdAt(event.job).value());
  if (event.by.valid()) {
    e.by = JobId(controller->jobs_.IdAt(event.by).value());
  }
  controller->options_.lifecycle_listener->OnJobEvent(job, e);
}


}  // namespace tessera
