#include "sim/job_sim.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <utility>

#include "base/rng.h"
#include "plugins/registry.h"
#include "plugins/workload_learner.h"
#include "sched/attempt_machine.h"
#include "sched/job_lifecycle.h"
#include "sched/job_scheduler.h"
#include "sim/job_run_recorder.h"
#include "sim/sim_gates.h"
#include "sim/sim_idle.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {
namespace {

// The order of an instant's events (docs in job_sim.h).
enum class EventKind : uint8_t {
  kExit = 0,
  kCluster = 1,
  kArrival = 2,
  kRelease = 3,
  kLimit = 4,
  kIdleSample = 5,
  kTick = 6,
};
enum class ExitKind : uint8_t { kWorkDone, kFailure, kKill };

struct Event {
  Micros time;
  EventKind kind;
  ExitKind exit;
  uint64_t seq;
  uint64_t job;  // kCluster: the event's index; kTick: 1 for a restart's, 0 periodic
  int attempt;   // kExit, kLimit: the attempt it belongs to
  int index;     // kExit: the failure's index (kFailure) or the task (kKill)
  bool operator>(const Event& o) const {
    return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
  }
};

bool Live(const JobRecord& job) { return InAttempt(job.phase); }

Status ValidateFailures(const SimJob& job) {
  for (const SimFailure& f : job.failures) {
    std::string bad;
    if (f.attempt < 1) {
      bad = "attempt must be >= 1";
    } else if (f.after < 0) {
      bad = "after must be >= 0";
    } else if (f.task < 0 || static_cast<size_t>(f.task) >= job.spec.tasks.size()) {
      bad = "task " + std::to_string(f.task) + " is not one of its " +
            std::to_string(job.spec.tasks.size()) + " tasks";
    } else if (f.exit_code == 0 && f.signal == 0) {
      bad = "a failure needs a non-zero exit code or a signal";
    } else if (f.exit_code < 0 || f.exit_code > 255 || f.signal < 0 || f.signal > 64) {
      bad = "exit codes are 0..255 and signals 0..64";
    }
    if (!bad.empty()) {
      return InvalidArgumentError("job '" + job.spec.name + "': failure: " + bad);
    }
  }
  return Status::Ok();
}

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
        machine_(&lifecycle_),
        recorder_(tree_, JobRunRecorder::Options{options.record_events, options.record_usage}) {}

  Status Init(const std::vector<SimJob>& jobs) {
    TESSERA_RETURN_IF_ERROR(ValidateSimGates(jobs));
    gates_.emplace(jobs);
    idle_.emplace(options_.idle, jobs);
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
    failures_.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SimJob& sj = jobs[i];
      TESSERA_RETURN_IF_ERROR(ValidateJobSpec(sj.spec, state_.catalog()));
      if (sj.duration <= 0) {
        return InvalidArgumentError("job '" + sj.spec.name + "': duration must be > 0");
      }
      TESSERA_RETURN_IF_ERROR(ValidateFailures(sj));
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
      r.attempt.policy = sj.restart;
      jobs_.push_back(std::move(r));
      failures_.push_back(sj.failures);
      Push(sj.spec.submit_time, EventKind::kArrival, i, 0);
      if (sj.release) {
        Push(*sj.release, EventKind::kRelease, i, 0);
      }
      JobOutcome o;
      o.name = sj.spec.name;
      o.gpus = sj.spec.TotalGpus();
      o.submit = sj.spec.submit_time;
      o.actual = sj.duration;
      recorder_.Track(JobId(i), q.value(), i, std::move(o));
    }
    attempts_.assign(jobs.size(), 0);
    return InitClusterEvents();
  }

  JobSimResult Run() {
    const auto wall_start = std::chrono::steady_clock::now();
    size_t next_report = jobs_.size() / 100 + 1;
    int64_t events = 0;
    while (!events_.empty()) {
      const Micros now = events_.top().time;
      bool changed = false;
      while (!events_.empty() && events_.top().time == now) {
        Event e = events_.top();
        events_.pop();
        ++events;
        changed = Apply(e, now) || changed;
      }
      if (changed) {
        Cycle(now);
      }
      // Ticks while jobs wait to be scheduled (gated ones do not, unless their gate
      // would open at the next cycle).
      if ((scheduler_->pending() > 0 || gates_->AnyDue(jobs_, lifecycle_)) && !tick_pending_ &&
          options_.tick > 0) {
        Push(now + options_.tick, EventKind::kTick, 0, 0);
        tick_pending_ = true;
      }
      if (idle_->enabled() && running_ > 0 && !idle_sample_pending_) {
        Push(IdleSampleAfter(now), EventKind::kIdleSample, 0, 0);
        idle_sample_pending_ = true;
      }
      if (running_ == 0 && arrivals_left_ == 0 && restarts_held_ == 0 && cluster_left_ == 0) {
        // Nothing runs, nothing will arrive or be released, no restart waits out its
        // backoff and the cluster stays as it is: the cycle that just ran was the last
        // chance, so whatever still waits can never start (e.g. no quota, a dependency
        // never satisfied).
        break;
      }
      if (options_.progress && finished_ >= next_report) {
        options_.progress(static_cast<double>(finished_) / static_cast<double>(jobs_.size()));
        next_report = finished_ + jobs_.size() / 100 + 1;
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
  Status InitClusterEvents() {
    for (size_t i = 0; i < options_.cluster_events.size(); ++i) {
      const SimClusterEvent& c = options_.cluster_events[i];
      StatusOr<NodeId> node = state_.FindNode(c.node);
      if (!node.ok()) {
        return InvalidArgumentError("cluster event: no node named '" + c.node + "'");
      }
      if (c.at < 0) {
        return InvalidArgumentError("cluster event on node '" + c.node + "': at must be >= 0");
      }
      if (c.kind == SimClusterEvent::Kind::kGpuFault &&
          (c.gpu < 0 || c.gpu >= state_.node(*node).gpu_count())) {
        return InvalidArgumentError("gpu fault: node '" + c.node + "' has no GPU " +
                                    std::to_string(c.gpu));
      }
      Push(c.at, EventKind::kCluster, i, 0);
      ++cluster_left_;
    }
    return Status::Ok();
  }

  void Push(Micros time, EventKind kind, uint64_t job, int attempt,
            ExitKind exit = ExitKind::kWorkDone, int index = 0) {
    if (kind == EventKind::kArrival || kind == EventKind::kRelease) {
      ++arrivals_left_;  // releases too: each may let a job start
    }
    events_.push(Event{time, kind, exit, seq_++, job, attempt, index});
  }

  // Applies one event; whether anything changed (a cycle is due).
  bool Apply(const Event& e, Micros now) {
    switch (e.kind) {
      case EventKind::kExit:
        return Exit(e, now);
      case EventKind::kCluster: {
        --cluster_left_;
        const SimClusterEvent& c = options_.cluster_events[e.job];
        if (c.kind == SimClusterEvent::Kind::kNodeLost) {
          NodeLost(c, now);
        } else {
          GpuFault(c, now);
        }
        return true;
      }
      case EventKind::kArrival:
        --arrivals_left_;
        lifecycle_.Submit(jobs_[e.job], now);
        gates_->Arrived(jobs_[e.job], lifecycle_);  // as the controller: gated at once
        learner_.ObserveJob(jobs_[e.job].spec);
        return true;
      case EventKind::kRelease:
        --arrivals_left_;
        gates_->Release(e.job);
        return true;
      case EventKind::kLimit: {
        JobRecord& job = jobs_[e.job];
        if (attempts_[e.job] != e.attempt || job.phase != JobPhase::kRunning) {
          return false;
        }
        return Effects(e.job,
                       machine_.Stop(job,
                                     StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted,
                                                 options_.stop_grace, "failed: time limit reached"},
                                     now),
                       now);
      }
      case EventKind::kIdleSample:
        idle_sample_pending_ = false;
        for (const auto& [id, stop] :
             idle_->Sample(jobs_, attempts_, tree_, now, options_.stop_grace)) {
          Effects(id, machine_.Stop(jobs_[id], stop, now), now);
        }
        return true;  // a cycle runs at every sample, as the controller samples in one
      case EventKind::kTick:
        if (e.job == 0) {
          tick_pending_ = false;
        } else {
          --restarts_held_;
        }
        return true;
    }
    return false;
  }

  // A task exit of the attempt `e` belongs to (stale ones are ignored).
  bool Exit(const Event& e, Micros now) {
    JobRecord& job = jobs_[e.job];
    if (attempts_[e.job] != e.attempt || !Live(job)) {
      return false;
    }
    switch (e.exit) {
      case ExitKind::kWorkDone: {
        bool changed = false;
        // The tasks are cleared when the attempt ends: the loop stops there.
        for (size_t t = 0; t < job.attempt.tasks.size(); ++t) {
          changed = Effects(e.job, machine_.TaskExited(job, t, 0, 0, now), now) || changed;
        }
        return changed;
      }
      case ExitKind::kFailure: {
        const SimFailure& f = failures_[e.job][static_cast<size_t>(e.index)];
        return Effects(
            e.job,
            machine_.TaskExited(job, static_cast<size_t>(f.task), f.exit_code, f.signal, now),
            now);
      }
      case ExitKind::kKill: {
        const auto t = static_cast<size_t>(e.index);
        if (t >= job.attempt.tasks.size() || job.attempt.tasks[t].exited) {
          return false;  // it exited before its grace ended
        }
        if (job.spec.checkpoint_on_signal || options_.policy.options.lossless_preemption) {
          machine_.Checkpointed(job, now);
        }
        return Effects(e.job, machine_.TaskExited(job, t, 0, 15, now), now);
      }
    }
    return false;
  }

  // Carries out an attempt's effects: the tasks to stop get their kill at the end of
  // the grace; an ended attempt leaves the running count.
  bool Effects(uint64_t id, const AttemptEffects& fx, Micros now) {
    for (size_t t : fx.stop) {
      Push(now + fx.grace, EventKind::kExit, id, attempts_[id], ExitKind::kKill,
           static_cast<int>(t));
    }
    if (fx.ended) {
      --running_;
      if (!fx.ended->requeued) {
        ++finished_;
        gates_->Finished(id, fx.ended->end);
      } else if (fx.ended->restart_at > now) {
        // Held back by the lifecycle until then: a cycle must run at that time.
        Push(fx.ended->restart_at, EventKind::kTick, 1, 0);
        ++restarts_held_;
      }
    }
    return fx.changed;
  }

  // The node's tasks are lost with it, then it leaves the cluster for good (as the
  // controller's node-down handling and CoreSession::ApplyNodeChanges).
  void NodeLost(const SimClusterEvent& c, Micros now) {
    StatusOr<NodeId> node = state_.FindNode(c.node);
    if (!node.ok()) {
      return;  // lost before
    }
    for (uint64_t id = 0; id < jobs_.size(); ++id) {
      JobRecord& job = jobs_[id];
      if (!Live(job)) {
        continue;
      }
      std::vector<size_t> lost;
      for (size_t t = 0; t < job.allocations.size(); ++t) {
        if (job.allocations[t].node != *node) {
          continue;
        }
        if (t < job.attempt.tasks.size() && !job.attempt.tasks[t].exited) {
          lost.push_back(t);
        }
        lifecycle_.DetachTask(job, t);  // the node leaves holding nothing
      }
      if (!lost.empty()) {
        Effects(id,
                machine_.TasksLost(job, lost, RequeueCause::kNodeLost,
                                   "requeued: node " + c.node + " was lost", now),
                now);
      }
    }
    if (Status s = state_.RemoveNode(*node); !s.ok()) {
      recorder_.EndCycle(now, {"node " + c.node + " could not leave: " + s.message()});
      return;
    }
    StatusOr<Profile> profile =
        MakeLearnedProfile(options_.placement, ScaleOf(state_), learner_.model());
    if (!profile.ok()) {
      profile = MakeLearnedProfile(options_.placement, ScaleOf(state_), nullptr);
    }
    if (profile.ok()) {
      scheduler_->NodesChanged(state_, std::move(profile).value());
    }
  }

  // The GPU is drained; the running jobs holding it on a live task stop with the stop
  // grace and requeue for gpu-fault (the controller's HandleGpuFault).
  void GpuFault(const SimClusterEvent& c, Micros now) {
    StatusOr<NodeId> node = state_.FindNode(c.node);
    if (!node.ok() || !state_.SetGpuDrained(*node, c.gpu, true).ok()) {
      return;  // its node was lost
    }
    const std::string where =
        "XID " + std::to_string(c.xid) + " on node " + c.node + " GPU " + std::to_string(c.gpu);
    for (uint64_t id = 0; id < jobs_.size(); ++id) {
      JobRecord& job = jobs_[id];
      if (!Live(job) || job.attempt.after != AttemptEnd::kNone) {
        continue;  // its end is decided already
      }
      bool holds = false;
      for (size_t t = 0; t < job.allocations.size() && t < job.attempt.tasks.size(); ++t) {
        if (job.allocations[t].node != *node || job.attempt.tasks[t].exited) {
          continue;
        }
        for (const GpuGrant& g : job.allocations[t].gpus) {
          holds = holds || g.gpu == c.gpu;
        }
      }
      if (holds) {
        Effects(id,
                machine_.Stop(job,
                              StopRequest{AttemptEnd::kRequeue, RequeueCause::kGpuFault,
                                          options_.stop_grace, "requeued: gpu-fault: " + where},
                              now),
                now);
      }
    }
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

  // A started attempt: its tasks' work done, the failures stated for it, its limit.
  void Start(uint64_t id, Micros now) {
    JobRecord& job = jobs_[id];
    machine_.Started(job);
    ++running_;
    const int attempt = ++attempts_[id];
    Push(now + job.startup + (job.oracle_runtime - job.resumed_from), EventKind::kExit, id,
         attempt);
    const std::vector<SimFailure>& failures = failures_[id];
    for (size_t i = 0; i < failures.size(); ++i) {
      if (failures[i].attempt == job.starts) {
        Push(job.run_start + failures[i].after, EventKind::kExit, id, attempt, ExitKind::kFailure,
             static_cast<int>(i));
      }
    }
    if (const Micros limit = AttemptMachine::LimitAt(job); limit > 0) {
      Push(limit, EventKind::kLimit, id, attempt);
    }
  }

  void Cycle(Micros now) {
    // As the controller's cycle: restarts whose backoff ended, then the gates.
    (void)lifecycle_.ReleaseDue(now);
    gates_->Update(jobs_, lifecycle_, now);
    RefreshPlacement();
    CycleResult result = lifecycle_.RunCycle(now, rng_);
    for (const StartDecision& d : result.starts) {
      Start(d.job.value(), now);
    }
    for (const PreemptDecision& d : result.preemptions) {
      const uint64_t id = d.victim.value();
      Effects(id,
              machine_.Stop(jobs_[id],
                            StopRequest{AttemptEnd::kRequeue, RequeueCause::kPreempted,
                                        std::max<Micros>(0, d.evict_at - now), ""},
                            now),
              now);
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
  std::vector<std::vector<SimFailure>> failures_;  // by job id
  std::optional<SimGates> gates_;                  // holds and dependencies (made by Init)
  std::optional<SimIdle> idle_;                    // idle actions (made by Init)
  JobLifecycle lifecycle_;
  AttemptMachine machine_;
  JobRunRecorder recorder_;
  std::unique_ptr<JobScheduler> scheduler_;
  std::vector<int> attempts_;  // by job id: attempts started, to drop stale events
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t arrivals_left_ = 0;
  int64_t running_ = 0;         // jobs running or stopping
  int64_t restarts_held_ = 0;   // restart ticks to come (jobs held back by a backoff)
  int64_t cluster_left_ = 0;    // cluster events to come
  size_t finished_ = 0;
  bool tick_pending_ = false;
  bool idle_sample_pending_ = false;
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
