#include "sim/job_sim.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <queue>
#include <utility>

#include "base/rng.h"
#include "plugins/registry.h"
#include "plugins/workload_learner.h"
#include "sched/job_lifecycle.h"
#include "sched/job_scheduler.h"
#include "sim/job_run_recorder.h"
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
        rng_(options.seed),
        lifecycle_(&jobs_, &tree_, &predictor_,
                   JobLifecycle::Options{options.policy.uses_predictor,
                                         options.policy.options.lossless_preemption}),
        recorder_(tree_, JobRunRecorder::Options{options.record_events, options.record_usage}) {}

  Status Init(const std::vector<SimJob>& jobs) {
    const SchedulerPolicy& policy = options_.policy;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                             MakeJobOrder(policy.job_order, policy.options));
    std::unique_ptr<QueueOrderPlugin> queue_order;
    if (!policy.queue_order.empty()) {
      TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy.queue_order));
    }
    TESSERA_ASSIGN_OR_RETURN(Profile profile,
                             MakeLearnedProfile(options_.placement, ScaleOf(state_), nullptr));
    scheduler_ = std::make_unique<JobScheduler>(tree_, state_, policy.options, std::move(job_order),
                                                std::move(queue_order), std::move(profile),
                                                policy.fairshare_half_life);
    lifecycle_.Bind(&state_, &quota_, scheduler_.get());
    lifecycle_.set_listener(&recorder_);

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
      JobOutcome o;
      o.name = sj.spec.name;
      o.gpus = sj.spec.TotalGpus();
      o.submit = sj.spec.submit_time;
      o.actual = sj.duration;
      recorder_.Track(JobId(i), q.value(), i, std::move(o));
    }
    attempts_.assign(jobs.size(), 0);
    return Status::Ok();
  }

  JobSimResult Run() {
    const auto wall_start = std::chrono::steady_clock::now();
    size_t finished = 0;
    size_t next_report = jobs_.size() / 100 + 1;
    int64_t events = 0;
    while (!events_.empty()) {
      const Micros now = events_.top().time;
      bool changed = false;
      while (!events_.empty() && events_.top().time == now) {
        Event e = events_.top();
        events_.pop();
        ++events;
        switch (e.kind) {
          case EventKind::kArrival:
            --arrivals_left_;
            lifecycle_.Submit(jobs_[e.job], now);
            learner_.ObserveJob(jobs_[e.job].spec);
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
    JobSimResult result = recorder_.Take(events);
    result.run.cluster_gpus = state_.total_gpus();
    result.run.policy = options_.policy.name;
    result.run.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return result;
  }

 private:
  void Push(Micros time, EventKind kind, uint64_t job, int attempt) {
    if (kind == EventKind::kArrival) {
      ++arrivals_left_;
    }
    events_.push(Event{time, kind, seq_++, job, attempt});
  }

  bool Finish(uint64_t id, int attempt, Micros now) {
    JobRecord& job = jobs_[id];
    if (attempts_[id] != attempt ||
        (job.phase != JobPhase::kRunning && job.phase != JobPhase::kStopping)) {
      return false;
    }
    lifecycle_.Finish(job, JobEnd::kSucceeded, now);
    --running_;
    return true;
  }

  bool Evict(uint64_t id, int attempt, Micros now) {
    JobRecord& job = jobs_[id];
    if (attempts_[id] != attempt || job.phase != JobPhase::kStopping) {
      return false;
    }
    // A job that checkpoints on its signal keeps everything done until its eviction.
    const Micros checkpoint = job.spec.checkpoint_on_signal ? job.Progress(now) : 0;
    lifecycle_.Requeue(job, checkpoint, RequeueCause::kPreempted, now);
    --running_;
    ++attempts_[id];
    return true;
  }

  // As the live controller: the placement learns the workload from the jobs submitted
  // (CoreSession::RefreshPlacement). The placement was made once at Init, so making it
  // again with a model cannot fail.
  void RefreshPlacement() {
    if (!PlacementNeedsWorkload(options_.placement) || !learner_.Refresh()) {
      return;
    }
    StatusOr<Profile> profile =
        MakeLearnedProfile(options_.placement, ScaleOf(state_), learner_.model());
    if (profile.ok()) {
      scheduler_->SetPlacement(std::move(profile).value());
    }
  }

  void Cycle(Micros now) {
    RefreshPlacement();
    CycleResult result = lifecycle_.RunCycle(now, rng_);
    for (const StartDecision& d : result.starts) {
      const JobRecord& job = jobs_[d.job.value()];
      ++running_;
      const int attempt = ++attempts_[d.job.value()];
      Push(now + job.startup + (job.oracle_runtime - job.resumed_from), EventKind::kFinish, d.job.value(),
           attempt);
    }
    for (const PreemptDecision& d : result.preemptions) {
      Push(d.evict_at, EventKind::kEvict, d.victim.value(), attempts_[d.victim.value()]);
    }
    recorder_.EndCycle(now, lifecycle_.CheckInvariants());
  }

  ClusterState state_;
  WorkloadLearner learner_;  // before scheduler_: its placement reads the model
  QueueTree tree_;
  QuotaLedger quota_;
  JobSimOptions options_;
  RuntimePredictor predictor_;
  Pcg32 rng_;
  std::vector<JobRecord> jobs_;
  JobLifecycle lifecycle_;
  JobRunRecorder recorder_;
  std::unique_ptr<JobScheduler> scheduler_;
  std::vector<int> attempts_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t arrivals_left_ = 0;
  int64_t running_ = 0;
  bool tick_pending_ = false;
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
