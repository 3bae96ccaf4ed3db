#include "sim/start_forecast.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "base/rng.h"
#include "plugins/fit_check.h"
#include "plugins/registry.h"
#include "sched/job_lifecycle.h"
#include "sched/job_scheduler.h"
#include "state/quota_ledger.h"

namespace tessera {

std::string_view BlockingKindName(ForecastBlocking::Kind kind) {
  switch (kind) {
    case ForecastBlocking::Kind::kNone:
      return "none";
    case ForecastBlocking::Kind::kTurn:
      return "turn";
    case ForecastBlocking::Kind::kQuota:
      return "quota";
    case ForecastBlocking::Kind::kGpus:
      return "gpus";
    case ForecastBlocking::Kind::kCpu:
      return "cpu";
    case ForecastBlocking::Kind::kReservation:
      return "reservation";
    case ForecastBlocking::Kind::kVictims:
      return "preemption";
  }
  return "?";
}

Micros ForecastRemaining(Micros estimate, const JobRecord& job, Micros now, Micros floor,
                         double overdue_factor) {
  const Micros elapsed = std::max<Micros>(0, now - job.run_start);
  Micros remaining = estimate - job.Progress(now);
  if (remaining <= 0 && overdue_factor > 0) {
    // Past its prediction: runtimes are heavy-tailed, so the longer it has run the longer
    // it is likely to run still.
    remaining = static_cast<Micros>(overdue_factor * static_cast<double>(elapsed));
  }
  if (job.spec.runtime_limit > 0) {
    // The limit counts wall time of this attempt: the job is killed when it runs out.
    remaining = std::min(remaining, job.spec.runtime_limit - elapsed);
  }
  return std::max(remaining, floor);
}

namespace {

enum class ForecastEventKind : uint8_t { kFinish = 0, kEvict = 1, kTick = 2 };

struct ForecastEvent {
  Micros time;
  ForecastEventKind kind;
  uint64_t seq;
  uint64_t job;
  int attempt;
  bool operator>(const ForecastEvent& o) const {
    return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
  }
};

class ForecastRun {
 public:
  ForecastRun(ForecastInput& in, const ForecastOptions& options)
      : in_(in),
        options_(options),
        tree_(in.tree),
        state_(std::move(*in.state)),
        quota_(*tree_),
        rng_(options.seed),
        lifecycle_(&jobs_, tree_.get(), nullptr,
                   JobLifecycle::Options{/*uses_predictor=*/false, /*lossless=*/false}) {}

  StatusOr<Forecast> Run() {
    TESSERA_RETURN_IF_ERROR(Init());
    Forecast out;
    out.now = in_.now;
    out.horizon_end = in_.now + options_.horizon;
    Order(out);
    Simulate(out);
    for (JobForecast& f : out.pending) {
      f.eta = eta_[f.job];
      if (f.eta && *f.eta <= out.now) {
        f.blocking = ForecastBlocking{};  // starts at the first cycle: nothing blocks it
      }
    }
    return out;
  }

 private:
  Status Init() {
    const SchedulerPolicy& policy = in_.policy;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                             MakeJobOrder(policy.job_order, policy.options));
    std::unique_ptr<QueueOrderPlugin> queue_order;
    if (!policy.queue_order.empty()) {
      TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy.queue_order));
    }
    if (in_.typical) {
      typical_.emplace(*in_.typical);
    }
    TESSERA_ASSIGN_OR_RETURN(
        Profile profile, MakeLearnedProfile(in_.placement, ScaleOf(state_),
                                            typical_ ? &*typical_ : nullptr));
    scheduler_ = std::make_unique<JobScheduler>(*tree_, state_, policy.options,
                                                std::move(job_order), std::move(queue_order),
                                                std::move(profile), policy.fairshare_half_life);
    if (in_.usage) {
      scheduler_->RestoreUsage(*in_.usage);
    }

    // Renumber: the record's id is its index, the preemptor named by index.
    const size_t n = in_.jobs.size();
    std::unordered_map<uint64_t, uint64_t> index_of;
    index_of.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      index_of.emplace(in_.jobs[i].record.id.value(), i);
    }
    jobs_.reserve(n);
    eta_.assign(n, std::nullopt);
    attempts_.assign(n, 0);
    target_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      JobRecord r = std::move(in_.jobs[i].record);
      const Micros runtime = std::max<Micros>(in_.jobs[i].runtime, 0);
      r.id = JobId(i);
      r.victims_in_flight = 0;  // recounted from the stopping jobs below
      if (r.preemptor.valid()) {
        auto it = index_of.find(r.preemptor.value());
        r.preemptor = it == index_of.end() ? JobId() : JobId(it->second);
      }
      if (InAttempt(r.phase)) {
        // The true runtime as the forecast sees it: done after `runtime` more.
        r.oracle_runtime = r.Progress(in_.now) + runtime;
        if (r.held.size() != r.allocations.size()) {
          r.held.assign(r.allocations.size(), 1);
        }
        // Restore holds them again in this core.
        for (size_t t = 0; t < r.allocations.size(); ++t) {
          if (r.held[t] != 0 && !state_.Release(r.allocations[t]).ok()) {
            r.held[t] = 0;
          }
        }
      } else if (r.phase == JobPhase::kPending) {
        r.oracle_runtime = std::max(runtime, r.resumed_from + options_.min_resolution);
      }
      r.counted = false;
      jobs_.push_back(std::move(r));
    }
    for (const JobRecord& r : jobs_) {
      if (r.phase == JobPhase::kStopping && r.preemptor.valid() &&
          jobs_[r.preemptor.value()].phase == JobPhase::kPending) {
        ++jobs_[r.preemptor.value()].victims_in_flight;
      }
    }
    lifecycle_.Bind(&state_, &quota_, scheduler_.get());
    for (JobRecord& r : jobs_) {
      if (r.phase == JobPhase::kFinished) {
        continue;
      }
      // A misfit keeps what fits; the forecast goes on with it.
      (void)lifecycle_.Restore(r);
      if (r.phase == JobPhase::kRunning) {
        ++running_;
        Push(in_.now + in_.jobs[r.id.value()].runtime, ForecastEventKind::kFinish, r.id.value(), 0);
      } else if (r.phase == JobPhase::kStopping) {
        // A victim is evicted at its checkpoint or its grace's end (the scheduler's
        // EvictionTime: what the live controller told its agent); a job stopped for
        // another reason (cancelled, a failed task) ends when its runtime says.
        ++running_;
        if (r.preemptor.valid()) {
          Push(EvictionAt(r), ForecastEventKind::kEvict, r.id.value(), 0);
        } else {
          Push(in_.now + in_.jobs[r.id.value()].runtime, ForecastEventKind::kFinish, r.id.value(),
               0);
        }
      } else if (r.phase == JobPhase::kPending) {
        ++waiting_;
        target_[r.id.value()] = 1;
      }
    }
    return Status::Ok();
  }

  // When a victim signalled no earlier than the snapshot is evicted (as the scheduler's
  // EvictionTime): at its next periodic checkpoint when that comes within the policy's
  // checkpoint wait, else when its grace ends.
  Micros EvictionAt(const JobRecord& victim) const {
    const SchedulerOptions& o = in_.policy.options;
    const Micros now = in_.now;
    const Micros after_grace = now + o.grace;
    const Micros interval = victim.spec.checkpoint_interval;
    if (o.checkpoint_wait <= 0 || interval <= 0) {
      return after_grace;
    }
    const Micros progress = victim.Progress(now);
    const Micros next = (progress / interval + 1) * interval;
    const Micros startup_left = std::max<Micros>(0, victim.run_start + victim.startup - now);
    const Micros at = now + (progress % interval == 0 && startup_left == 0
                                 ? 0
                                 : startup_left + next - progress);
    return at <= now + o.checkpoint_wait ? at : after_grace;
  }

  // Whether the gang could be placed on the snapshot's free resources as they are (the
  // placer's filters; FitChecker). Remembered per demand: pending jobs share few.
  bool FitsNow(const JobSpec& spec) const {
    std::string key = std::to_string(static_cast<int>(spec.topology.scope)) +
                      (spec.topology.hard ? "h" : "s");
    for (const TaskRequest& t : spec.tasks) {
      key += "|" + std::to_string(t.cpu.value()) + "," + std::to_string(t.memory.value()) + "," +
             std::to_string(t.gpu_count) + "," + std::to_string(t.gpu_milli.value()) + "," +
             std::to_string(t.gpu_memory.value()) + "," + t.mig_profile + "," +
             std::to_string(t.models.bits()) + "," + std::to_string(static_cast<int>(t.topology));
    }
    auto [it, added] = fits_now_.try_emplace(std::move(key), false);
    if (added) {
      if (!live_) {
        live_.emplace(state_, FitChecker::Copy::kAsIs);
      }
      it->second = live_->GangPlaces(spec);
    }
    return it->second;
  }

  // Positions and what blocks each pending job, at the snapshot.
  void Order(Forecast& out) {
    const std::vector<JobId> order = scheduler_->PendingOrder(jobs_, in_.now);
    std::vector<int64_t> per_queue(tree_->size(), 0);
    std::vector<uint8_t> listed(jobs_.size(), 0);
    auto add = [&](uint64_t i) {
      listed[i] = 1;
      JobForecast f;
      f.job = i;
      f.position = static_cast<int64_t>(out.pending.size()) + 1;
      f.queue_position = ++per_queue[jobs_[i].queue.value()];
      f.blocking = BlockingOf(jobs_[i]);
      out.pending.push_back(std::move(f));
    };
    for (JobId id : order) {
      add(id.value());
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].phase == JobPhase::kPending && !listed[i]) {
        add(i);
      }
    }
  }

  ForecastBlocking BlockingOf(const JobRecord& job) const {
    ForecastBlocking b;
    if (job.victims_in_flight > 0) {
      b.kind = ForecastBlocking::Kind::kVictims;
      return b;
    }
    const ResourceVector charge = scheduler_->ChargeOf(job, nullptr, state_);
    if (quota_.Check(job.queue, charge, in_.policy.options.borrowing) == QuotaFit::kNo) {
      b.kind = ForecastBlocking::Kind::kQuota;
      b.queue = tree_->spec(job.queue).name;
      return b;
    }
    const int64_t free = state_.total_gpu_milli().value() - state_.allocated_gpu_milli().value();
    if (in_.reserved >= 0 && static_cast<size_t>(in_.reserved) < jobs_.size() &&
        static_cast<size_t>(in_.reserved) != job.id.value() &&
        jobs_[in_.reserved].phase == JobPhase::kPending && job.gpu_milli <= free) {
      b.kind = ForecastBlocking::Kind::kReservation;
      b.job = in_.reserved;
      return b;
    }
    if (job.gpu_milli <= free && FitsNow(job.spec)) {
      b.kind = ForecastBlocking::Kind::kTurn;
      return b;
    }
    if (job.gpu_milli == 0) {
      b.kind = ForecastBlocking::Kind::kCpu;
      return b;
    }
    b.kind = ForecastBlocking::Kind::kGpus;
    for (const TaskRequest& t : job.spec.tasks) {
      if (!t.models.empty()) {
        for (size_t m = 0; m < state_.catalog().size(); ++m) {
          if (t.models.Contains(GpuModelId(m))) {
            b.model = state_.catalog().Get(GpuModelId(m)).name;
            break;
          }
        }
        break;
      }
    }
    return b;
  }

  void Simulate(Forecast& out) {
    const Micros end = in_.now + options_.horizon;
    Cycle(in_.now, out);
    while (waiting_ > 0 && out.cycles < options_.max_cycles) {
      if (running_ == 0) {
        break;  // nothing will free resources: whatever waits now waits past the horizon
      }
      if (events_.empty() || events_.top().time > end) {
        break;
      }
      const Micros first = events_.top().time;
      const Micros resolution =
          std::max(options_.min_resolution,
                   static_cast<Micros>(static_cast<double>(first - in_.now) *
                                       options_.resolution_fraction));
      const Micros batch_end = std::min(first + resolution, end);
      Micros last = first;
      while (!events_.empty() && events_.top().time <= batch_end) {
        const ForecastEvent e = events_.top();
        events_.pop();
        last = e.time;
        Apply(e);
      }
      Cycle(last, out);
    }
    out.budget_exhausted = waiting_ > 0 && out.cycles >= options_.max_cycles;
  }

  void Apply(const ForecastEvent& e) {
    if (e.kind == ForecastEventKind::kTick) {
      tick_pending_ = false;
      return;
    }
    JobRecord& job = jobs_[e.job];
    if (attempts_[e.job] != e.attempt) {
      return;
    }
    if (e.kind == ForecastEventKind::kFinish && InAttempt(job.phase)) {
      lifecycle_.Finish(job, JobEnd::kSucceeded, e.time);
      --running_;
    } else if (e.kind == ForecastEventKind::kEvict && job.phase == JobPhase::kStopping) {
      const Micros checkpoint = job.spec.checkpoint_on_signal ? job.Progress(e.time) : 0;
      lifecycle_.Requeue(job, checkpoint, RequeueCause::kPreempted, e.time);
      --running_;
      ++attempts_[e.job];
    }
  }

  void Cycle(Micros now, Forecast& out) {
    ++out.cycles;
    CycleResult result = lifecycle_.RunCycle(now, rng_);
    for (const StartDecision& d : result.starts) {
      const uint64_t id = d.job.value();
      const JobRecord& job = jobs_[id];
      if (target_[id] && !eta_[id]) {
        eta_[id] = now;
        --waiting_;
      }
      ++running_;
      const int attempt = ++attempts_[id];
      Push(now + job.startup + (job.oracle_runtime - job.resumed_from), ForecastEventKind::kFinish,
           id, attempt);
    }
    for (const PreemptDecision& d : result.preemptions) {
      Push(d.evict_at, ForecastEventKind::kEvict, d.victim.value(), attempts_[d.victim.value()]);
    }
    if (scheduler_->pending() > 0 && !tick_pending_ && options_.tick > 0) {
      Push(now + options_.tick, ForecastEventKind::kTick, 0, 0);
      tick_pending_ = true;
    }
  }

  void Push(Micros time, ForecastEventKind kind, uint64_t job, int attempt) {
    events_.push(ForecastEvent{time, kind, seq_++, job, attempt});
  }

  ForecastInput& in_;
  ForecastOptions options_;
  std::shared_ptr<const QueueTree> tree_;
  ClusterState state_;
  std::optional<FragmentationModel> typical_;  // before scheduler_: its placement reads it
  QuotaLedger quota_;
  Pcg32 rng_;
  std::vector<JobRecord> jobs_;
  JobLifecycle lifecycle_;
  std::unique_ptr<JobScheduler> scheduler_;
  std::vector<std::optional<Micros>> eta_;
  // The snapshot's free resources as the filters see them (FitsNow), made on first use.
  mutable std::optional<FitChecker> live_;
  mutable std::unordered_map<std::string, bool> fits_now_;
  std::vector<int> attempts_;
  std::vector<uint8_t> target_;  // pending at the snapshot
  std::priority_queue<ForecastEvent, std::vector<ForecastEvent>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t running_ = 0;  // running or stopping
  int64_t waiting_ = 0;  // pending at the snapshot and not started yet
  bool tick_pending_ = false;
};

}  // namespace

StatusOr<Forecast> RunStartForecast(ForecastInput input, const ForecastOptions& options) {
  if (!input.state || input.tree == nullptr) {
    return InvalidArgumentError("forecast: the snapshot has no cluster state or queue tree");
  }
  for (size_t i = 0; i < input.jobs.size(); ++i) {
    const JobRecord& r = input.jobs[i].record;
    if (!r.queue.valid() || r.queue.value() >= input.tree->size()) {
      return InvalidArgumentError("forecast: job '" + r.spec.name + "' has no queue in the tree");
    }
  }
  // The run keeps references into its members: build it in place.
  auto run = std::make_unique<ForecastRun>(input, options);
  return run->Run();
}

}  // namespace tessera
