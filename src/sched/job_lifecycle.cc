#include "sched/job_lifecycle.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tessera {

JobLifecycle::JobLifecycle(std::vector<JobRecord>* jobs, const QueueTree* tree,
                           RuntimePredictor* predictor, Options options)
    : jobs_(jobs), tree_(tree), predictor_(predictor), options_(options) {}

void JobLifecycle::Bind(ClusterState* state, QuotaLedger* quota, JobScheduler* scheduler) {
  state_ = state;
  quota_ = quota;
  scheduler_ = scheduler;
  // A fresh core holds nothing until Restore puts jobs back.
  held_gpu_milli_ = 0;
  held_cpu_milli_ = 0;
  charged_.assign(tree_ != nullptr ? tree_->size() : 0, ResourceVector{});
  stopping_.assign(charged_.size(), ResourceVector{});
  waits_.clear();
  for (JobRecord& job : *jobs_) {
    job.counted = false;
    if (job.phase == JobPhase::kStopping && job.preemptor.valid()) {
      ++waits_[job.preemptor.value()];
    }
  }
}

void JobLifecycle::Emit(const JobRecord& job, const LifecycleEvent& event) {
  if (listener_ != nullptr) {
    LifecycleEvent e = event;
    e.state = state_;
    listener_->OnJobEvent(job, e);
  }
}

void JobLifecycle::Hold(const Allocation& allocation, int sign) {
  held_gpu_milli_ += sign * allocation.TotalGpuMilli().value();
  held_cpu_milli_ += sign * allocation.cpu.value();
}

void JobLifecycle::Charge(const JobRecord& job, int sign) {
  if (job.charge.empty() || !job.queue.valid() || job.queue.value() >= charged_.size()) {
    return;
  }
  ResourceVector& c = charged_[job.queue.value()];
  c.resize(std::max(c.size(), job.charge.size()), 0);
  ResourceVector& stopping = stopping_[job.queue.value()];
  if (job.phase == JobPhase::kStopping) {
    stopping.resize(std::max(stopping.size(), job.charge.size()), 0);
  }
  for (size_t r = 0; r < job.charge.size(); ++r) {
    c[r] += sign * job.charge[r];
    if (job.phase == JobPhase::kStopping) {
      stopping[r] += sign * job.charge[r];
    }
  }
}

void JobLifecycle::MarkStopping(JobRecord& job) {
  if (job.phase != JobPhase::kRunning) {
    return;
  }
  Charge(job, -1);
  job.phase = JobPhase::kStopping;
  Charge(job, +1);
}

void JobLifecycle::CheckGuarantee(const JobRecord& victim, const JobRecord& preemptor,
                                  const std::vector<ResourceVector>& started) {
  if (victim.queue == preemptor.queue || quota_ == nullptr || !victim.queue.valid() ||
      victim.queue.value() >= stopping_.size() || !preemptor.queue.valid() ||
      preemptor.queue.value() >= stopping_.size()) {
    return;
  }
  // The victim's queue on each resource the victim holds, as it stands with the stops
  // in flight done (this victim not yet among them): whether it borrows, and whether it
  // stays within its nominal quota once the victim is gone.
  const ResourceVector& stopping = stopping_[victim.queue.value()];
  bool charged = false, borrowing = false, drops_below = false;
  for (size_t r = 0; r < victim.charge.size(); ++r) {
    if (victim.charge[r] <= 0) {
      continue;
    }
    charged = true;
    const int64_t staying = quota_->Usage(victim.queue, r) - (r < stopping.size() ? stopping[r] : 0);
    const int64_t nominal = quota_->SubtreeQuota(victim.queue, r);
    borrowing = borrowing || staying > nominal;
    drops_below = drops_below || staying - victim.charge[r] < nominal;
  }
  // The preemptor's queue over its own nominal quota once the preemptor runs: counted
  // before this cycle's starts (a start later in the cycle is no part of the decision)
  // and without its other preemptors, so that it is never over when the scheduler saw
  // it within.
  bool preemptor_over = false;
  const ResourceVector pre = scheduler_->ChargeOf(preemptor, nullptr, *state_);
  const ResourceVector& own_stopping = stopping_[preemptor.queue.value()];
  const ResourceVector& own_started = started[preemptor.queue.value()];
  for (size_t r = 0; r < pre.size(); ++r) {
    if (pre[r] <= 0) {
      continue;
    }
    const int64_t usage = quota_->Usage(preemptor.queue, r) -
                          (r < own_stopping.size() ? own_stopping[r] : 0) -
                          (r < own_started.size() ? own_started[r] : 0);
    preemptor_over = preemptor_over || usage + pre[r] > quota_->SubtreeQuota(preemptor.queue, r);
  }
  // A queue within its nominal quota is never preempted by another queue's job, and no
  // queue is taken below its nominal quota for a job of a queue over its own.
  if (!charged || (borrowing && !(drops_below && preemptor_over))) {
    return;
  }
  if (++guarantee_breaches_ == 1 && tree_ != nullptr) {
    first_breach_ = "job " + std::to_string(victim.id.value()) + " of queue " +
                    tree_->spec(victim.queue).name +
                    (borrowing ? ", taken below its nominal quota," : ", within its nominal quota,") +
                    " preempted for job " + std::to_string(preemptor.id.value()) + " of queue " +
                    tree_->spec(preemptor.queue).name;
  }
}

void JobLifecycle::StampIdentity(JobRecord& job) const {
  if (tree_ == nullptr || !job.queue.valid() || job.queue.value() >= tree_->size()) {
    return;
  }
  SetShareIdentity(job.spec, TenantIdentity(tree_->tenant(job.queue)));
}

void JobLifecycle::Submit(JobRecord& job, Micros now) {
  StampIdentity(job);
  job.phase = JobPhase::kPending;
  job.eligible_since = now;
  if (options_.uses_predictor && predictor_ != nullptr && tree_ != nullptr) {
    const RuntimeFeatures features = FeaturesOf(job, *tree_);
    job.predicted_runtime = predictor_->Predict(features);
    job.runtime_guessed = !predictor_->Knows(features);
  }
  if (scheduler_ != nullptr && !Gated(job.id)) {
    scheduler_->Enqueue(job, now);
  }
  LifecycleEvent e;
  e.kind = LifecycleEvent::Kind::kSubmitted;
  e.time = now;
  e.job = job.id;
  Emit(job, e);
}

CycleResult JobLifecycle::RunCycle(Micros now, Rng& rng) {
  if (!bound()) {
    return {};
  }
  (void)ReleaseDue(now);
  std::vector<JobRecord>& jobs = *jobs_;
  std::erase_if(
      waits_, [&](const auto& w) { return w.second == 0 && jobs[w.first].victims_in_flight == 0; });
  CycleResult result = scheduler_->RunCycle(jobs, *state_, *quota_, now, rng);
  for (StartDecision& d : result.starts) {
    JobRecord& job = jobs[d.job.value()];
    job.phase = JobPhase::kRunning;
    // The scheduler reserved these; the decision keeps a copy for the driver.
    job.allocations = d.allocations;
    job.charge = d.charge;
    job.held.assign(job.allocations.size(), 1);
    job.counted = true;
    job.run_start = now;
    // A resumption spends the restart overhead before it makes progress again.
    job.startup = job.starts > 0 ? scheduler_->options().restart_overhead : 0;
    ++job.starts;
    job.nominated = false;
    job.evicted_for = JobId();
    for (const Allocation& a : job.allocations) {
      Hold(a, +1);
    }
    Charge(job, +1);
    LifecycleEvent e;
    e.kind = LifecycleEvent::Kind::kStarted;
    e.time = now;
    e.job = job.id;
    e.backfilled = d.backfilled;
    e.borrowing = d.borrowing;
    Emit(job, e);
  }
  // This cycle's starts, per queue, for CheckGuarantee.
  std::vector<ResourceVector> started(charged_.size());
  for (const StartDecision& d : result.starts) {
    ResourceVector& sum = started[jobs[d.job.value()].queue.value()];
    sum.resize(std::max(sum.size(), d.charge.size()), 0);
    for (size_t r = 0; r < d.charge.size(); ++r) {
      sum[r] += d.charge[r];
    }
  }
  for (const PreemptDecision& d : result.preemptions) {
    JobRecord& victim = jobs[d.victim.value()];
    JobRecord& preemptor = jobs[d.preemptor.value()];
    CheckGuarantee(victim, preemptor, started);
    MarkStopping(victim);
    victim.preemptor = d.preemptor;
    ++victim.preemptions;
    ++preemptor.victims_in_flight;
    ++waits_[preemptor.id.value()];
    LifecycleEvent e;
    e.kind = LifecycleEvent::Kind::kSignalled;
    e.time = now;
    e.job = victim.id;
    e.by = preemptor.id;
    Emit(victim, e);
  }
  return result;
}

void JobLifecycle::Stopping(JobRecord& job) { MarkStopping(job); }

void JobLifecycle::DetachTask(JobRecord& job, size_t task) {
  if (task >= job.held.size() || job.held[task] == 0) {
    return;
  }
  if (state_ != nullptr) {
    (void)state_->Release(job.allocations[task]);
    Hold(job.allocations[task], -1);
  }
  job.held[task] = 0;
}

Micros JobLifecycle::Release(JobRecord& job, Micros now) {
  // Allocations in reverse order of placement, then the charge, then the scheduler.
  for (size_t t = job.allocations.size(); t-- > 0;) {
    if (t < job.held.size() && job.held[t] != 0) {
      if (state_ != nullptr) {
        (void)state_->Release(job.allocations[t]);
        Hold(job.allocations[t], -1);
      }
    }
  }
  if (quota_ != nullptr && !job.charge.empty()) {
    quota_->Remove(job.queue, job.charge);
    Charge(job, -1);
  }
  if (job.counted && scheduler_ != nullptr) {
    scheduler_->Released(job, now);
  }
  job.counted = false;
  const Micros ran = std::max<Micros>(0, now - job.run_start);
  job.attained_gpu_seconds +=
      static_cast<double>(job.gpu_milli) / 1000.0 * static_cast<double>(ran) / 1e6;
  if (job.preemptor.valid()) {
    job.evicted_for = job.preemptor;
    job.evicted_hold_until =
        now + (scheduler_ != nullptr ? scheduler_->options().victim_hold : Micros{0});
    JobRecord& p = (*jobs_)[job.preemptor.value()];
    if (p.victims_in_flight > 0 && --p.victims_in_flight == 0) {
      p.nominated = true;
    }
    auto w = waits_.find(job.preemptor.value());
    if (w != waits_.end()) {
      --w->second;  // kept at 0 until the record agrees (RunCycle prunes it)
    }
    job.preemptor = JobId();
  }
  job.allocations.clear();
  job.charge.clear();
  job.held.clear();
  return ran;
}

void JobLifecycle::Requeue(JobRecord& job, Micros checkpoint, RequeueCause cause, Micros now,
                           Micros not_before) {
  if (!InAttempt(job.phase)) {
    return;
  }
  const Micros progress = job.Progress(now);
  const Micros saved = options_.lossless_preemption
                           ? progress
                           : std::clamp(std::max(checkpoint, job.SavedProgress(now, false)),
                                        job.resumed_from, progress);
  LifecycleEvent e;
  e.kind = LifecycleEvent::Kind::kRequeued;
  e.time = now;
  e.job = job.id;
  e.cause = cause;
  e.saved = saved;
  e.lost_gpu_seconds =
      static_cast<double>(job.gpu_milli) / 1000.0 * static_cast<double>(progress - saved) / 1e6;
  e.ran = Release(job, now);
  job.resumed_from = saved;
  job.phase = JobPhase::kPending;
  job.eligible_since = now;
  if (not_before > now) {
    held_until_[job.id.value()] = not_before;
  } else if (scheduler_ != nullptr && !Gated(job.id)) {
    scheduler_->Enqueue(job, now);
  }
  Emit(job, e);
}

void JobLifecycle::HoldUntil(JobRecord& job, Micros until) {
  if (job.phase != JobPhase::kPending) {
    return;
  }
  if (scheduler_ != nullptr) {
    scheduler_->Dequeue(job);
  }
  held_until_[job.id.value()] = until;
}

void JobLifecycle::Gate(JobRecord& job) {
  if (job.phase != JobPhase::kPending || !gated_.insert(job.id.value()).second) {
    return;
  }
  if (scheduler_ != nullptr) {
    scheduler_->Dequeue(job);
  }
}

void JobLifecycle::Ungate(JobRecord& job, Micros now) {
  if (gated_.erase(job.id.value()) == 0 || job.phase != JobPhase::kPending) {
    return;
  }
  job.eligible_since = now;
  if (scheduler_ != nullptr && held_until_.count(job.id.value()) == 0) {
    scheduler_->Enqueue(job, now);
  }
}

Micros JobLifecycle::HeldUntil(JobId job) const {
  auto it = held_until_.find(job.value());
  return it == held_until_.end() ? 0 : it->second;
}

std::vector<JobId> JobLifecycle::ReleaseDue(Micros now) {
  std::vector<JobId> released;
  if (!bound() || held_until_.empty()) {
    return released;
  }
  for (auto it = held_until_.begin(); it != held_until_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    JobRecord& job = (*jobs_)[it->first];
    it = held_until_.erase(it);
    if (job.phase == JobPhase::kPending && !Gated(job.id)) {
      job.eligible_since = now;
      scheduler_->Enqueue(job, now);
      released.push_back(job.id);
    }
  }
  std::sort(released.begin(), released.end(),
            [](JobId a, JobId b) { return a.value() < b.value(); });
  return released;
}

void JobLifecycle::Finish(JobRecord& job, JobEnd end, Micros now) {
  LifecycleEvent e;
  e.kind = LifecycleEvent::Kind::kFinished;
  e.time = now;
  e.job = job.id;
  e.end = end;
  if (InAttempt(job.phase)) {
    const Micros runtime = job.Progress(now);
    e.ran = Release(job, now);
    if (end == JobEnd::kSucceeded && options_.uses_predictor && predictor_ != nullptr &&
        tree_ != nullptr) {
      predictor_->Observe(FeaturesOf(job, *tree_), runtime);
    }
  } else if (job.phase == JobPhase::kPending) {
    if (scheduler_ != nullptr) {
      scheduler_->Dequeue(job);
    }
    held_until_.erase(job.id.value());
    gated_.erase(job.id.value());
  } else {
    return;  // already finished
  }
  if (scheduler_ != nullptr) {
    scheduler_->Forget(job);
  }
  job.phase = JobPhase::kFinished;
  job.end = end;
  Emit(job, e);
}

Status JobLifecycle::Restore(JobRecord& job) {
  if (!bound()) {
    return FailedPreconditionError("the lifecycle is not bound to a core");
  }
  // Nothing of the job is held in this fresh core yet: its allocations take its
  // identity now (stored placements carry none), and keep it until released.
  StampIdentity(job);
  for (size_t t = 0; t < job.allocations.size() && t < job.spec.tasks.size(); ++t) {
    job.allocations[t].identity = job.spec.tasks[t].identity;
  }
  if (job.phase == JobPhase::kPending) {
    // A held-back job waits for ReleaseDue, a gated one for Ungate.
    if (held_until_.count(job.id.value()) == 0 && !Gated(job.id)) {
      scheduler_->Enqueue(job, job.eligible_since);
    }
    return Status::Ok();
  }
  if (!InAttempt(job.phase)) {
    return Status::Ok();
  }
  job.held.resize(job.allocations.size(), 0);
  job.charge.clear();  // charged again below, in this core
  std::string misfit;
  for (size_t t = 0; t < job.allocations.size(); ++t) {
    if (job.held[t] == 0) {
      continue;
    }
    Status s = state_->Allocate(job.allocations[t]);
    if (!s.ok()) {
      job.held[t] = 0;  // the rest is still held: the job stays consistent
      if (misfit.empty()) {
        misfit = "task " + std::to_string(t) + " no longer fits its node: " + s.message();
      }
      continue;
    }
    Hold(job.allocations[t], +1);
  }
  Recharge(job);
  if (!misfit.empty()) {
    return InternalError("job " + std::to_string(job.id.value()) + " " + misfit);
  }
  return Status::Ok();
}

void JobLifecycle::Recharge(JobRecord& job) {
  if (!job.charge.empty()) {
    quota_->Remove(job.queue, job.charge);
    Charge(job, -1);
  }
  std::vector<Allocation> held;
  for (size_t t = 0; t < job.allocations.size(); ++t) {
    if (t < job.held.size() && job.held[t] != 0) {
      held.push_back(job.allocations[t]);
    }
  }
  job.charge = scheduler_->ChargeOf(job, &held, *state_);
  quota_->Add(job.queue, job.charge);
  Charge(job, +1);
  if (job.phase == JobPhase::kRunning && !job.counted && held.size() == job.allocations.size()) {
    scheduler_->Adopt(job);
    job.counted = true;
  }
}

Status JobLifecycle::AttachTask(JobRecord& job, size_t task) {
  if (!bound()) {
    return FailedPreconditionError("the lifecycle is not bound to a core");
  }
  if (!InAttempt(job.phase)) {
    return Status::Ok();
  }
  if (task >= job.allocations.size()) {
    return InvalidArgumentError("job " + std::to_string(job.id.value()) + " has no task " +
                                std::to_string(task));
  }
  job.held.resize(job.allocations.size(), 0);
  if (job.held[task] != 0) {
    return Status::Ok();
  }
  if (task < job.spec.tasks.size()) {
    job.allocations[task].identity = job.spec.tasks[task].identity;
  }
  Status s = state_->Allocate(job.allocations[task]);
  if (!s.ok()) {
    return InternalError("job " + std::to_string(job.id.value()) + " task " + std::to_string(task) +
                         " does not fit its node: " + s.message());
  }
  Hold(job.allocations[task], +1);
  job.held[task] = 1;
  Recharge(job);
  return Status::Ok();
}

std::vector<std::string> JobLifecycle::CheckInvariants() const {
  std::vector<std::string> out;
  if (!bound()) {
    return out;
  }
  if (state_->allocated_gpu_milli().value() != held_gpu_milli_) {
    out.push_back("cluster holds " + std::to_string(state_->allocated_gpu_milli().value()) +
                  " GPU milli, the jobs " + std::to_string(held_gpu_milli_));
  }
  if (state_->allocated_cpu().value() != held_cpu_milli_) {
    out.push_back("cluster holds " + std::to_string(state_->allocated_cpu().value()) +
                  " CPU milli, the jobs " + std::to_string(held_cpu_milli_));
  }
  for (QueueId q : tree_->queues()) {
    const ResourceVector& c = charged_[q.value()];
    for (size_t r = 0; r < tree_->resources().size(); ++r) {
      const int64_t jobs = r < c.size() ? c[r] : 0;
      if (quota_->Usage(q, r) != jobs) {
        out.push_back("queue " + tree_->spec(q).name + " is charged " +
                      std::to_string(quota_->Usage(q, r)) + " of resource " + std::to_string(r) +
                      ", its jobs " + std::to_string(jobs));
      }
    }
  }
  for (const auto& [preemptor, victims] : waits_) {
    const JobRecord& p = (*jobs_)[preemptor];
    if (p.victims_in_flight != victims) {
      out.push_back("job " + std::to_string(preemptor) + " waits for " +
                    std::to_string(p.victims_in_flight) + " victims, " + std::to_string(victims) +
                    " are in flight");
    }
  }
  for (std::string& v : quota_->Violations()) {
    out.push_back(std::move(v));
  }
  // Each breach is reported once, at the check after it.
  if (guarantee_breaches_ > breaches_reported_) {
    out.push_back(std::to_string(guarantee_breaches_ - breaches_reported_) +
                  " preemptions broke a queue's guarantee (" +
                  std::to_string(guarantee_breaches_) + " in all), the first: " + first_breach_);
    breaches_reported_ = guarantee_breaches_;
  }
  return out;
}

}  // namespace tessera
