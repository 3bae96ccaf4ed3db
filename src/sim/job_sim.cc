#include "sim/job_sim.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <queue>
#include <unordered_map>
#include <utility>

#include "base/rng.h"
#include "plugins/registry.h"
#include "sched/job_scheduler.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {
namespace {

enum class EventKind : uint8_t { kFinish = 0, kEvict = 1, kArrival = 2, kTick = 3 };

struct Event {
  Micros time;
  EventKind kind;
  uint64_t seq;
  uint64_t job;
  int attempt;
  bool operator>(const Event& o) const {
    return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
  }
};

class Simulation {
 public:
  Simulation(ClusterState state, QueueTree tree, const JobSimOptions& options)
      : state_(std::move(state)),
        tree_(std::move(tree)),
        quota_(tree_),
        options_(options),
        predictor_(options.predictor),
        rng_(options.seed) {}

  Status Init(const std::vector<SimJob>& jobs) {
    const SchedulerPolicy& policy = options_.policy;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                             MakeJobOrder(policy.job_order, policy.options));
    std::unique_ptr<QueueOrderPlugin> queue_order;
    if (!policy.queue_order.empty()) {
      TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy.queue_order));
    }
    PolicyContext context{ScaleOf(state_), nullptr};
    TESSERA_ASSIGN_OR_RETURN(Profile profile, MakeProfile(options_.placement, context));
    scheduler_ = std::make_unique<JobScheduler>(tree_, state_, policy.options, std::move(job_order),
                                                std::move(queue_order), std::move(profile),
                                                policy.fairshare_half_life);
    // Tenants, in queue order.
    std::unordered_map<std::string, size_t> tenant_index;
    tenant_of_queue_.assign(tree_.size(), 0);
    for (QueueId q : tree_.queues()) {
      const std::string& t = tree_.tenant(q);
      auto [it, inserted] = tenant_index.try_emplace(t, run_.tenants.size());
      if (inserted) {
        run_.tenants.push_back(t);
        run_.tenant_quota_milli.push_back(0);
      }
      tenant_of_queue_[q.value()] = it->second;
      for (size_t r = 0; r < tree_.resources().size(); ++r) {
        const ResourceName& name = tree_.resources()[r];
        if (name.kind == ResourceKind::kGpu && !name.model.valid()) {
          run_.tenant_quota_milli[it->second] += tree_.quota(q, r).nominal;
        }
      }
    }
    tenant_milli_.assign(run_.tenants.size(), 0);

    jobs_.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SimJob& sj = jobs[i];
      TESSERA_RETURN_IF_ERROR(ValidateJobSpec(sj.spec, state_.catalog()));
      if (sj.duration <= 0) {
        return InvalidArgumentError("job '" + sj.spec.name + "': duration must be > 0");
      }
      StatusOr<QueueId> q = tree_.FindQueue(sj.spec.queue);
      if (!q.ok()) {
        return InvalidArgumentError("job '" + sj.spec.name + "': " + q.status().message());
      }
      JobRecord r;
      r.id = JobId(i);
      r.spec = sj.spec;
      r.queue = q.value();
      r.gpu_milli = sj.spec.TotalGpuMilli(state_.catalog());
      r.oracle_runtime = sj.duration;
      jobs_.push_back(std::move(r));
      Push(sj.spec.submit_time, EventKind::kArrival, i, 0);
    }
    attempts_.assign(jobs.size(), 0);
    outcomes_.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      JobOutcome& o = outcomes_[i];
      o.name = jobs[i].spec.name;
      o.tenant = run_.tenants[tenant_of_queue_[jobs_[i].queue.value()]];
      o.gpus = jobs[i].spec.TotalGpus();
      o.submit = jobs[i].spec.submit_time;
      o.actual = jobs[i].duration;
    }
    run_.cluster_gpus = state_.total_gpus();
    run_.policy = policy.name;
    return Status::Ok();
  }

  JobSimResult Run() {
    const auto wall_start = std::chrono::steady_clock::now();
    size_t finished = 0;
    size_t next_report = jobs_.size() / 100 + 1;
    while (!events_.empty()) {
      const Micros now = events_.top().time;
      bool changed = false;
      while (!events_.empty() && events_.top().time == now) {
        Event e = events_.top();
        events_.pop();
        ++run_.events;
        switch (e.kind) {
          case EventKind::kArrival:
            Arrive(e.job, now);
            changed = true;
            break;
          case EventKind::kFinish:
            if (Finish(e.job, e.attempt, now)) {
              changed = true;
              ++finished;
            }
            break;
          case EventKind::kEvict:
            changed = Evict(e.job, e.attempt, now) || changed;
            break;
          case EventKind::kTick:
            tick_pending_ = false;
            changed = true;
            break;
        }
      }
      if (changed) {
        Cycle(now);
      }
      if (scheduler_->pending() > 0 && !tick_pending_ && options_.tick > 0) {
        Push(now + options_.tick, EventKind::kTick, 0, 0);
        tick_pending_ = true;
      }
      if (running_ == 0 && arrivals_left_ == 0) {
        // Nothing runs and nothing will arrive: the cycle that just ran was the
        // last chance, so whatever still waits can never start (e.g. no quota).
        break;
      }
      if (options_.progress && finished >= next_report) {
        options_.progress(static_cast<double>(finished) / static_cast<double>(jobs_.size()));
        next_report = finished + jobs_.size() / 100 + 1;
      }
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      outcomes_[i].preemptions = jobs_[i].preemptions;
    }
    run_.jobs = std::move(outcomes_);
    run_.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    JobSimResult result;
    result.run = std::move(run_);
    result.events = std::move(log_);
    result.violations = std::move(violations_);
    return result;
  }

 private:
  void Push(Micros time, EventKind kind, uint64_t job, int attempt) {
    if (kind == EventKind::kArrival) {
      ++arrivals_left_;
    }
    events_.push(Event{time, kind, seq_++, job, attempt});
  }

  void Log(SimEvent::Kind kind, Micros now, const JobRecord& job, std::string by = {}) {
    if (!options_.record_events) {
      return;
    }
    SimEvent e;
    e.time = now;
    e.kind = kind;
    e.job = job.spec.name;
    e.by = std::move(by);
    log_.push_back(std::move(e));
  }

  void Arrive(uint64_t id, Micros now) {
    --arrivals_left_;
    JobRecord& job = jobs_[id];
    job.phase = JobPhase::kPending;
    job.eligible_since = now;
    if (options_.policy.uses_predictor) {
      job.predicted_runtime = predictor_.Predict(FeaturesOf(job, tree_));
    }
    scheduler_->Enqueue(job, now);
    Log(SimEvent::Kind::kSubmit, now, job);
  }

  void ChargeTenant(const JobRecord& job, int sign) {
    int64_t milli = 0;
    for (const Allocation& a : job.allocations) {
      milli += a.TotalGpuMilli().value();
    }
    tenant_milli_[tenant_of_queue_[job.queue.value()]] += sign * milli;
    usage_changed_ = true;
  }

  // Releases a running or stopping job's resources and accounts its service.
  void Stop(JobRecord& job, Micros now) {
    for (auto it = job.allocations.rbegin(); it != job.allocations.rend(); ++it) {
      (void)state_.Release(*it);
    }
    quota_.Remove(job.queue, job.charge);
    scheduler_->Released(job, now);
    ChargeTenant(job, -1);
    const Micros ran = now - job.run_start;
    job.attained_gpu_seconds +=
        static_cast<double>(job.gpu_milli) / 1000.0 * static_cast<double>(ran) / 1e6;
    outcomes_[job.id.value()].service += ran;
    if (job.phase == JobPhase::kStopping) {
      VictimGone(job);
    }
    job.allocations.clear();
    job.charge.clear();
    --running_;
  }

  void VictimGone(JobRecord& victim) {
    auto it = preemptor_of_.find(victim.id.value());
    if (it == preemptor_of_.end()) {
      return;
    }
    JobRecord& p = jobs_[it->second];
    if (--p.victims_in_flight == 0) {
      p.nominated = true;
    }
    preemptor_of_.erase(it);
  }

  bool Finish(uint64_t id, int attempt, Micros now) {
    JobRecord& job = jobs_[id];
    if (attempts_[id] != attempt ||
        (job.phase != JobPhase::kRunning && job.phase != JobPhase::kStopping)) {
      return false;
    }
    Stop(job, now);
    job.phase = JobPhase::kFinished;
    outcomes_[id].finish = now;
    if (options_.policy.uses_predictor) {
      predictor_.Observe(FeaturesOf(job, tree_), job.oracle_runtime);
    }
    Log(SimEvent::Kind::kFinish, now, job);
    return true;
  }

  bool Evict(uint64_t id, int attempt, Micros now) {
    JobRecord& job = jobs_[id];
    if (attempts_[id] != attempt || job.phase != JobPhase::kStopping) {
      return false;
    }
    const bool lossless = options_.policy.options.lossless_preemption;
    const Micros progress = job.Progress(now);
    const Micros saved = job.SavedProgress(now, lossless || job.spec.checkpoint_on_signal);
    outcomes_[id].lost_gpu_seconds +=
        static_cast<double>(job.gpu_milli) / 1000.0 * static_cast<double>(progress - saved) / 1e6;
    Stop(job, now);
    job.resumed_from = saved;
    job.phase = JobPhase::kPending;
    job.eligible_since = now;
    ++job.preemptions;
    ++attempts_[id];
    scheduler_->Enqueue(job, now);
    Log(SimEvent::Kind::kEvict, now, job);
    return true;
  }

  void Cycle(Micros now) {
    CycleResult result = scheduler_->RunCycle(jobs_, state_, quota_, now, rng_);
    for (StartDecision& d : result.starts) {
      JobRecord& job = jobs_[d.job.value()];
      job.phase = JobPhase::kRunning;
      job.allocations = std::move(d.allocations);
      job.charge = std::move(d.charge);
      job.run_start = now;
      job.nominated = false;
      ++running_;
      ChargeTenant(job, +1);
      JobOutcome& o = outcomes_[d.job.value()];
      if (o.first_start < 0) {
        o.first_start = now;
        o.predicted = job.predicted_runtime;
      }
      const int attempt = ++attempts_[d.job.value()];
      Push(now + (job.oracle_runtime - job.resumed_from), EventKind::kFinish, d.job.value(),
           attempt);
      if (options_.record_events) {
        SimEvent e;
        e.time = now;
        e.kind = SimEvent::Kind::kStart;
        e.job = job.spec.name;
        for (const Allocation& a : job.allocations) {
          e.nodes.push_back(state_.spec(a.node).name);
        }
        e.backfilled = d.backfilled;
        e.borrowing = d.borrowing;
        log_.push_back(std::move(e));
      }
    }
    for (const PreemptDecision& d : result.preemptions) {
      JobRecord& victim = jobs_[d.victim.value()];
      victim.phase = JobPhase::kStopping;
      ++jobs_[d.preemptor.value()].victims_in_flight;
      preemptor_of_[d.victim.value()] = d.preemptor.value();
      Push(d.evict_at, EventKind::kEvict, d.victim.value(), attempts_[d.victim.value()]);
      Log(SimEvent::Kind::kPreempt, now, victim, jobs_[d.preemptor.value()].spec.name);
    }
    std::vector<std::string> broken = quota_.Violations();
    if (!broken.empty()) {
      ++run_.quota_violations;
      for (std::string& b : broken) {
        if (violations_.size() < 20) {
          violations_.push_back("t=" + std::to_string(now / 1'000'000) + "s: " + std::move(b));
        }
      }
    }
    if (options_.record_usage && usage_changed_) {
      if (!run_.usage.empty() && run_.usage.back().time == now) {
        run_.usage.back().gpu_milli = tenant_milli_;
      } else {
        run_.usage.push_back(UsageSample{now, tenant_milli_});
      }
      usage_changed_ = false;
    }
  }

  ClusterState state_;
  QueueTree tree_;
  QuotaLedger quota_;
  JobSimOptions options_;
  RuntimePredictor predictor_;
  Pcg32 rng_;
  std::unique_ptr<JobScheduler> scheduler_;
  std::vector<JobRecord> jobs_;
  std::vector<int> attempts_;
  std::vector<JobOutcome> outcomes_;
  std::unordered_map<uint64_t, uint64_t> preemptor_of_;  // victim -> preemptor
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t arrivals_left_ = 0;
  int64_t running_ = 0;
  bool tick_pending_ = false;
  std::vector<size_t> tenant_of_queue_;
  std::vector<int64_t> tenant_milli_;
  bool usage_changed_ = false;
  JobRun run_;
  std::vector<SimEvent> log_;
  std::vector<std::string> violations_;
};

}  // namespace

std::string_view SimEventKindName(SimEvent::Kind kind) {
  switch (kind) {
    case SimEvent::Kind::kSubmit:
      return "submit";
    case SimEvent::Kind::kStart:
      return "start";
    case SimEvent::Kind::kPreempt:
      return "preempt";
    case SimEvent::Kind::kEvict:
      return "evict";
    case SimEvent::Kind::kFinish:
      return "finish";
  }
  return "?";
}

StatusOr<JobSimResult> RunJobSimulation(const std::vector<NodeSpec>& nodes,
                                        const QueueTreeSpec& queues,
                                        const std::vector<SimJob>& jobs,
                                        const JobSimOptions& options, const GpuCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(ClusterState state, ClusterState::Create(nodes, catalog));
  TESSERA_ASSIGN_OR_RETURN(QueueTree tree, QueueTree::Create(queues, catalog));
  // The Simulation keeps references into the tree: build it in place.
  auto sim = std::make_unique<Simulation>(std::move(state), std::move(tree), options);
  TESSERA_RETURN_IF_ERROR(sim->Init(jobs));
  return sim->Run();
}

}  // namespace tessera
