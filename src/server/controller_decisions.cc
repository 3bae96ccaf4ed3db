// Applying the core's decisions and the agents' reports: starts and their launches,
// stops, exits, requeues and ends, lost nodes, the cycle, and making each step durable
// before it is handed out.
#include <chrono>
#include <iostream>
#include <map>

#include "server/controller.h"
#include "server/job_attempts.h"
#include "server/task_launches.h"

namespace tessera {

// ---- decisions ---------------------------------------------------------------

void Controller::Seal(Pending& out) {
  for (JobNumber id : out.dirty) {
    if (auto it = jobs_.all().find(id); it != jobs_.all().end()) {
      out.batch.jobs.push_back(jobs_.SealRow(it->second));
      PublishView(it->second);
    }
  }
  out.dirty.clear();
}

// What the job holds is read by task_launches.h (pure), which builds the launch; what
// the other services know is added here.
TaskLaunch Controller::MakeLaunch(const LiveJob& job, int task) const {
  const JobRecord& rec = jobs_.Rec(job);
  const uint64_t array_id = gates_.ArrayIdOf(job.id(), job.submission);
  std::shared_ptr<const JobGates::Array> array =
      array_id != 0 ? gates_.ParsedArray(job.submission.array) : nullptr;
  LaunchInputs in = LaunchInputsOf(
      job, rec, task, options_.checkpoint_root, options_.data_dir, array_id,
      array != nullptr ? std::span<const int64_t>(array->indices) : std::span<const int64_t>());
  in.node = &core_.state()->spec(rec.allocations[static_cast<size_t>(task)].node);
  if (auto master = nodes_.all().find(job.tasks[0].node); master != nodes_.all().end()) {
    in.master_address = master->second.address;
  }
  in.identity = identities_.Known(job.row.tenant);
  if (PtySessions::Wanted(job.submission.env)) {
    // The same in a resent launch.
    in.pty_secret = ptys_.Secret(TaskKey{job.row.id, task, job.row.attempts});
  }
  TaskLaunch launch = BuildTaskLaunch(in, *catalog_);
  host_.OnLaunch(job.row.tenant, job.submission, launch);  // e.g. a registry credential
  return launch;
}

void Controller::StartJob(LiveJob& job, const StartDecision& d, Micros now, Pending& out) {
  Attempts().Started(jobs_.Rec(job));  // the lifecycle made it running
  jobs_.StartAttempt(job, *core_.state(), d.backfilled, now);
  out.dirty.insert(job.id());
  ++counters_.decisions["start"];
  const bool new_identity = !identities_.Known(job.row.tenant).has_value();
  (void)identities_.For(job.row.tenant, out.batch);  // made durable with the start
  if (new_identity) {
    // Once per tenant: its other jobs' views show the identity they will run as.
    for (const LiveJob* other : jobs_.TenantJobs(job.row.tenant, job.id())) {
      PublishView(*other);
    }
  }
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    out.launches.emplace_back(job.tasks[t].node, MakeLaunch(job, static_cast<int>(t)));
  }
  host_.OnAttemptRunning(FactsOf(job));
}

void Controller::StopJob(LiveJob& job, const StopRequest& request, Micros now, Pending& out) {
  ApplyAttempt(job, Attempts().Stop(jobs_.Rec(job), request, now), now, out);
}

void Controller::ApplyAttempt(LiveJob& job, AttemptEffects fx, Micros now, Pending& out) {
  if (!fx.changed) {
    return;
  }
  out.dirty.insert(job.id());
  JobTable::ApplyEffects(job, fx, out.stops);
  if (fx.ended) {
    RecordEnded(job, *fx.ended, now, out);
  }
}

void Controller::RecordEnded(LiveJob& job, const EndedAttempt& ended, Micros now, Pending& out) {
  if (ended.run_start > 0 && now > ended.run_start) {
    out.batch.usage.push_back(UsageRow{job.row.id, job.row.tenant, job.row.queue, ended.run_start,
                                       now, jobs_.Rec(job).gpu_milli});
    host_.OnUsage(out.batch.usage.back(), job.row.attempts, /*ended=*/true);
  }
  // The attempt that ended is stored with this transition; the job now holds nothing.
  nlohmann::json stored = StoredEndedAttempt(job, ended, now, nodes_, *catalog_);
  // The restart counted, in the same write; read-only: the core is mid-transition.
  host_.OnAttemptEnded(FactsOf(job), ended, stored, *HookStep(now, nullptr));
  jobs_.EndAttempt(job, ended, std::move(stored), now);
  if (ended.requeued) {
    ++counters_.decisions["requeue"];
    return;
  }
  out.finished.push_back(job.id());
  ++counters_.finished[{job.row.queue, std::string(JobStateName(jobs_.StateOf(job)))}];
}

void Controller::NodeDown(NodeInfo& node, const std::string& reason, Micros now, Pending& out) {
  NodeRegistry::TakeDown(node, reason);
  const std::string name = node.inventory.spec.name;
  std::cerr << "tessera server: node " << name << " is down: " << reason << "\n";
  jobs_.LoseNode(
      name, core_.lifecycle(), [&](LiveJob& job, const std::vector<size_t>& lost) REQUIRES(mu_) {
        ApplyAttempt(
            job,
            Attempts().TasksLost(jobs_.Rec(job), lost, RequeueCause::kNodeLost,
                                 "requeued: node " + name + " was lost (" + reason + ")", now),
            now, out);
      });
  NodeLeft(name);
}

bool Controller::RunCoreCycle(Micros now, Pending& out) {
  for (JobId slot : core_.ReleaseDue(now)) {  // backoffs that ended: offered to this cycle
    out.dirty.insert(jobs_.IdAt(slot));
  }
  host_.BeforeDecide(*HookStep(now, &out));  // gates: dependencies met, holds released, throttles
  std::optional<CycleResult> result = core_.RunCycle(now);
  if (!result) {
    return false;
  }
  for (const StartDecision& d : result->starts) {
    StartJob(jobs_.JobAt(d.job), d, now, out);
  }
  for (const PreemptDecision& d : result->preemptions) {
    LiveJob& victim = jobs_.JobAt(d.victim);
    ++counters_.decisions["preempt"];
    ++counters_.preemptions[victim.row.queue];
    StopJob(victim, jobs_.Preempted(victim, d, now), now, out);
  }
  return true;
}

Status Controller::RunCycle() {
  const auto started = std::chrono::steady_clock::now();
  Pending out;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    for (const std::string& name : nodes_.SilentDue(now, options_.node_timeout)) {
      NodeDown(*nodes_.Find(name),
               "no heartbeat for " + std::to_string(options_.node_timeout / 1'000'000) + " s", now,
               out);
    }
    host_.BeforeCycle(*HookStep(now, &out));
    if (core_.rebuild_pending()) {
      Status s = RebuildScheduler(now, out);
      if (!s.ok()) {
        // What was decided before (a node lost) is still made durable and handed out.
        Seal(out);
        PublishWaitContext();
        lock.Unlock();
        (void)Publish(std::move(out));
        return s;
      }
    } else {
      core_.ApplyRespecs(nodes_, NodeHolds());
    }
    for (const auto& [node, key] : std::exchange(nodes_.relaunch(), {})) {
      const NodeInfo* n = nodes_.Find(node);
      if (const LiveJob* job = n != nullptr && n->up ? jobs_.AwaitsLaunch(node, key) : nullptr) {
        out.launches.emplace_back(node, MakeLaunch(*job, key.task));
      }
    }
    if (RunCoreCycle(now, out) && !core_.CycleKeptInvariants()) {
      ++counters_.invariant_breaches;
    }
    memory_.Save(now, core_, out.batch);
    Seal(out);
    PublishWaitContext();
  }
  Status published = Publish(std::move(out));
  // Wall time, not the injected clock: this measures the controller itself.
  counters_.cycle_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ++counters_.cycles;
  return published;
}

std::vector<std::string> Controller::CheckInvariants() const {
  MutexLock lock(mu_);
  return core_.CheckInvariants();
}

Status Controller::Publish(Pending out) {
  if (!out.logs.empty()) {
    Status written = logs_.Append(out.logs);
    if (!written.ok()) {
      std::cerr << "tessera server: " << written.message() << "\n";
    }
  }
  if (!out.batch.empty()) {
    Status s = store_->Commit(std::move(out.batch));
    if (!s.ok()) {
      store_failed_ = true;
      return UnavailableError("state store: " + s.message());
    }
  }
  if (options_.on_started) {
    const Micros now = clock_->NowMicros();
    for (const auto& [node, launch] : out.launches) {
      if (launch.key.task == 0) {
        options_.on_started(JobNumber(launch.key.job), now);
      }
    }
  }
  if (out.launches.empty() && out.stops.empty() && out.finished.empty()) {
    return Status::Ok();
  }
  MutexLock lock(mu_);
  // Their terminal rows are durable now: they may leave memory.
  jobs_.NoteFinished(out.finished);
  Archive(clock_->NowMicros());
  const std::map<std::string, HeartbeatResponse> pushes = nodes_.Deliver(
      std::move(out.launches), out.stops,
      [this](const TaskKey& key) REQUIRES(mu_) { return jobs_.AttemptRunning(key); },
      /*collect=*/static_cast<bool>(push_sink_));
  for (const auto& [node, commands] : pushes) {
    push_sink_(node, commands);
  }
  return Status::Ok();
}

void Controller::SetPushSink(PushSink sink) {
  MutexLock lock(mu_);
  push_sink_ = std::move(sink);
}

}  // namespace tessera
