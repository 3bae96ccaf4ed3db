#include "server/scenarios/controller_job_runner.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "api/queue_config.h"
#include "base/clock.h"
#include "base/time_format.h"
#include "server/controller.h"
#include "server/services/job_actions.h"
#include "server/services/node_actions.h"
#include "sim/job_run_recorder.h"
#include "sim/sim_gates.h"
#include "sim/sim_idle.h"
#include "store/store.h"

namespace tessera {
namespace {

// The controller's time of the run's t = 0 (rows read 0 as "never").
constexpr Micros kEpoch = 1'000'000'000'000;

using Key = std::tuple<uint64_t, int, int>;  // job, task, attempt

Key KeyOf(const TaskKey& k) { return {k.job, k.task, k.attempt}; }

// Same order as the simulator's events at one instant (sim/job_sim.h): task exits, then
// cluster events, arrivals, releases of held jobs, wake-ups (time limits, backoffs), idle
// samples and ticks.
enum class EventKind : uint8_t {
  kTaskExit = 0,
  kCluster = 1,
  kArrival = 2,
  kRelease = 3,
  kWake = 4,
  kIdleSample = 5,
  kTick = 6,
};

// The queue configuration with the run's idle policies (the controller reads them from
// its queue configuration, as from an admin's).
std::string WithIdlePolicies(const std::string& yaml,
                             const std::map<std::string, IdlePolicy>& policies) {
  if (policies.empty()) {
    return yaml;
  }
  YAML::Node root = YAML::Load(yaml);
  for (YAML::Node queue : root["queues"]) {
    auto it = policies.find(queue["name"].as<std::string>());
    if (it != policies.end()) {
      YAML::Node idle;
      idle["below"] = it->second.below_pct;
      idle["for"] = FormatDuration(it->second.window);
      idle["action"] = std::string(IdleActionName(it->second.action));
      queue["idle"] = idle;
    }
  }
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

struct Event {
  Micros time;
  EventKind kind;
  uint64_t seq;
  Key key;  // a task's; kArrival, kRelease: job index in the first field; kCluster: event index
  int exit_code = 0;  // kTaskExit
  int signal = 0;     // kTaskExit
  bool operator>(const Event& o) const {
    return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
  }
};

// Passes the lifecycle's events to the recorder on the run's clock, and keeps what the
// loop needs: how many jobs wait or run, and where each attempt resumed from.
class RunListener final : public LifecycleListener {
 public:
  explicit RunListener(JobRunRecorder* recorder) : recorder_(recorder) {}

  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event) override {
    LifecycleEvent e = event;
    e.time -= kEpoch;
    const uint64_t id = event.job.value();
    switch (event.kind) {
      case LifecycleEvent::Kind::kSubmitted:
        ++pending_;
        break;
      case LifecycleEvent::Kind::kStarted:
        --pending_;
        running_.insert(id);
        started_.insert(id);
        // Its start-up (restart overhead) makes the attempt run that much longer.
        work_left_offset_[id] = job.resumed_from - job.startup;
        break;
      case LifecycleEvent::Kind::kRequeued:
        running_.erase(id);
        ++pending_;
        if (event.cause == RequeueCause::kFailure && job.attempt.policy.backoff > 0) {
          wakes_.push_back(e.time + job.attempt.policy.backoff);  // its backoff ends
        }
        break;
      case LifecycleEvent::Kind::kFinished:
        if (running_.erase(id) == 0) {
          --pending_;
        }
        ends_[id] = event.end;
        break;
      case LifecycleEvent::Kind::kSignalled:
        break;
    }
    recorder_->OnJobEvent(job, e);
  }

  int64_t pending() const { return pending_; }
  // Times (on the run's clock) a cycle must run at, noted since the last call.
  std::vector<Micros> TakeWakes() { return std::exchange(wakes_, {}); }
  size_t running() const { return running_.size(); }
  bool IsRunning(uint64_t id) const { return running_.count(id) > 0; }
  // What a dependency on the job knows of it (the controller's JobGatesModule::TargetOf).
  DependencyTarget TargetOf(uint64_t id) const {
    auto end = ends_.find(id);
    return DependencyTarget{started_.count(id) > 0, end != ends_.end(),
                            end != ends_.end() && end->second == JobEnd::kSucceeded};
  }
  // The attempt's work still to do is the job's duration less this: the progress it
  // resumed from, less its start-up (restart overhead).
  Micros work_left_offset(uint64_t id) const {
    auto it = work_left_offset_.find(id);
    return it == work_left_offset_.end() ? 0 : it->second;
  }

 private:
  JobRunRecorder* recorder_;
  int64_t pending_ = 0;
  std::set<uint64_t> running_;
  std::set<uint64_t> started_;       // jobs that started an attempt
  std::map<uint64_t, JobEnd> ends_;  // finished jobs: how
  std::unordered_map<uint64_t, Micros> work_left_offset_;
  std::vector<Micros> wakes_;
};

// One node's agent: the tasks it runs and the exits it has yet to report.
struct FakeAgent {
  std::string node;
  std::string id;
  std::set<Key> running;
  std::vector<TaskReport> exits;
  bool lost = false;  // declared lost: it reports nothing more
};

class ControllerRun {
 public:
  ControllerRun(const std::vector<SimJob>& jobs, const JobSimOptions& options,
                const QueueTree& tree)
      : jobs_(jobs),
        options_(options),
        tree_(tree),
        recorder_(tree, JobRunRecorder::Options{options.record_events, options.record_usage}),
        listener_(&recorder_),
        clock_(kEpoch) {}

  ~ControllerRun() {
    controller_.reset();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  Status Open(const std::vector<NodeSpec>& nodes, const QueueTreeSpec& queues,
              const GpuCatalog& catalog) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-run-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return InternalError("cannot make a scratch directory for the controller");
    }
    dir_ = tmpl;
    ControllerOptions o;
    o.data_dir = dir_;
    o.scheduler_policy = options_.policy;
    o.placement = options_.placement;
    o.seed = options_.seed;
    o.node_timeout = 1'000'000LL * 1'000'000;  // the fake agents never fall silent
    o.lifecycle_listener = &listener_;
    o.cycle_on_exit = false;  // cycles where the simulator runs them (see the header)
    o.stop_grace = options_.stop_grace;
    TESSERA_ASSIGN_OR_RETURN(
        controller_, Controller::Open(o, &store_, catalog, clock_,
                                      WithIdlePolicies(QueueTreeYaml(queues, catalog), options_.idle)));
    for (const NodeSpec& n : nodes) {
      const RegisterRequest r = FakeAgentRegistration(n);
      TESSERA_RETURN_IF_ERROR(controller_->Register(r, "127.0.0.1").status());
      agents_.push_back(FakeAgent{n.name, r.agent_id, {}, {}});
      agent_of_[n.name] = agents_.size() - 1;
      gpus_ += static_cast<int64_t>(n.gpus.size());
      gpus_of_[n.name] = static_cast<int64_t>(n.gpus.size());
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Push(jobs_[i].spec.submit_time, EventKind::kArrival, Key{i, 0, 0});
      if (jobs_[i].release) {
        Push(*jobs_[i].release, EventKind::kRelease, Key{i, 0, 0});
      }
    }
    for (size_t i = 0; i < options_.cluster_events.size(); ++i) {
      Push(options_.cluster_events[i].at, EventKind::kCluster, Key{i, 0, 0});
    }
    return Status::Ok();
  }

  Controller& controller() { return *controller_; }
  Store& store() { return store_; }

  StatusOr<JobSimResult> Run() {
    int64_t events = 0;
    while (!events_.empty()) {
      const Micros now = events_.top().time;
      clock_.Set(kEpoch + now);
      bool changed = false;
      std::vector<size_t> cluster;  // after the exits are reported
      std::vector<size_t> releases;  // after the cluster events
      bool sample = false;           // the agents' telemetry goes before the cycle
      while (!events_.empty() && events_.top().time == now) {
        const Event e = events_.top();
        events_.pop();
        ++events;
        switch (e.kind) {
          case EventKind::kArrival:
            TESSERA_RETURN_IF_ERROR(Submit(std::get<0>(e.key)));
            changed = true;
            break;
          case EventKind::kTaskExit:
            changed = Exit(e.key, e.exit_code, e.signal) || changed;
            break;
          case EventKind::kCluster:
            --wakes_left_;
            cluster.push_back(std::get<0>(e.key));
            changed = true;
            break;
          case EventKind::kRelease:
            --wakes_left_;
            releases.push_back(std::get<0>(e.key));
            changed = true;
            break;
          case EventKind::kWake:
            --wakes_left_;
            // A time limit's wake-up counts only while its attempt runs; a backoff's always.
            changed = changed || std::get<0>(e.key) == 0 ||
                      (listener_.IsRunning(std::get<0>(e.key)) &&
                       attempt_of_[std::get<0>(e.key)] == std::get<2>(e.key));
            break;
          case EventKind::kIdleSample:
            idle_sample_pending_ = false;
            sample = true;
            changed = true;
            break;
          case EventKind::kTick:
            tick_pending_ = false;
            changed = true;
            break;
        }
      }
      if (changed) {
        TESSERA_RETURN_IF_ERROR(Exchange(now));  // the exits
        for (size_t index : cluster) {
          TESSERA_RETURN_IF_ERROR(ApplyClusterEvent(options_.cluster_events[index], now));
        }
        TESSERA_RETURN_IF_ERROR(Settle(now));
        for (size_t index : releases) {
          TESSERA_RETURN_IF_ERROR(Release(index));
        }
        UpdateGated();  // as the cycle's gate pass (JobGatesModule::Update) is about to
        if (sample) {
          TESSERA_RETURN_IF_ERROR(SendTelemetry(now));
        }
        TESSERA_RETURN_IF_ERROR(controller_->RunCycle());
        recorder_.EndCycle(now, controller_->CheckInvariants());
        TESSERA_RETURN_IF_ERROR(Exchange(now));  // the launches and stops
        for (Micros at : listener_.TakeWakes()) {
          Push(at, EventKind::kWake, Key{});
        }
      }
      // Ticks while jobs wait to be scheduled: gated ones do not, unless their gate would
      // open at the next cycle (as the simulator: sim/sim_gates.h, AnyDue).
      if ((listener_.pending() > static_cast<int64_t>(gated_.size()) || AnyGateDue()) &&
          !tick_pending_ && options_.tick > 0) {
        Push(now + options_.tick, EventKind::kTick, Key{});
        tick_pending_ = true;
      }
      // Idle samples on the simulator's grid while a job runs (sim/sim_idle.h).
      if (SimIdle::Enabled(options_.idle) && listener_.running() > 0 && !idle_sample_pending_) {
        Push(IdleSampleAfter(now), EventKind::kIdleSample, Key{});
        idle_sample_pending_ = true;
      }
      if (listener_.running() == 0 && arrivals_left_ == 0 && wakes_left_ == 0 && !Busy()) {
        break;  // nothing runs or will arrive: what still waits can never start
      }
    }
    JobSimResult result = recorder_.Take(events);
    result.run.cluster_gpus = gpus_;
    result.run.policy = options_.policy.name;
    return result;
  }

 private:
  void Push(Micros time, EventKind kind, Key key, int exit_code = 0, int signal = 0) {
    if (kind == EventKind::kArrival) {
      ++arrivals_left_;
    } else if (kind == EventKind::kWake || kind == EventKind::kCluster ||
               kind == EventKind::kRelease) {
      ++wakes_left_;
    }
    events_.push(Event{time, kind, seq_++, key, exit_code, signal});
  }

  // Whether an agent still has an exit to report (the controller has yet to hear it).
  bool Busy() const {
    return std::any_of(agents_.begin(), agents_.end(),
                       [](const FakeAgent& a) { return !a.exits.empty(); });
  }

  Status Submit(size_t index) {
    --arrivals_left_;
    const SimJob& job = jobs_[index];
    JobSubmission submission;
    submission.spec = job.spec;
    submission.command = {"true"};
    // The simulator keeps a job that never fits pending (its outcome: never ran).
    submission.hold_if_unfit = true;
    submission.restart = job.restart;
    submission.hold = job.hold;
    if (!job.dependency.items.empty()) {
      // The file's jobs by their index, here by the ids the controller gave them.
      DependencySpec dependency = job.dependency;
      for (Dependency& d : dependency.items) {
        for (JobRef& ref : d.jobs) {
          auto it = id_of_.find(ref.id);
          if (it == id_of_.end()) {
            return InvalidArgumentError("job '" + job.spec.name + "' depends on job '" +
                                        (ref.id < jobs_.size() ? jobs_[ref.id].spec.name : "?") +
                                        "', which is not submitted before it");
          }
          ref.id = it->second;
        }
      }
      submission.dependency = DependencySpecText(dependency);
    }
    JobOutcome o;
    o.name = job.spec.name;
    o.gpus = job.spec.TotalGpus();
    o.submit = job.spec.submit_time;
    o.actual = job.duration;
    // Ids are given in submission order from 1 on a fresh store; track it before the
    // submission so that its own event is recorded.
    const uint64_t id = index_of_.size() + 1;
    TESSERA_ASSIGN_OR_RETURN(QueueId queue, tree_.FindQueue(job.spec.queue));
    recorder_.Track(JobId(id), queue, index, std::move(o));
    TESSERA_ASSIGN_OR_RETURN(JobIntake::Submitted made,
                             controller_->intake().Submit(Principal{Role::kAdmin, "", "scenario"},
                                                          std::move(submission), ""));
    if (made.jobs.front().value() != id) {
      return InternalError("the controller numbered job '" + job.spec.name + "' " +
                           ToString(made.jobs.front()) + ", not " + std::to_string(id));
    }
    index_of_[id] = index;
    id_of_[index] = id;
    if (job.hold || !job.dependency.items.empty()) {
      gated_.insert(id);  // the controller gates it at once (JobGatesModule::Watch)
    }
    return Status::Ok();
  }

  // The scenario releases its held job `index` (JobActions::Release, which lets it go
  // unless its dependency keeps it back).
  Status Release(size_t index) {
    auto it = id_of_.find(index);
    if (it == id_of_.end()) {
      return InvalidArgumentError("job '" + jobs_[index].spec.name +
                                  "' is released before it is submitted");
    }
    released_.insert(it->second);
    return JobActions(*controller_)
        .Release(Principal{Role::kAdmin, "", "scenario"}, std::to_string(it->second))
        .status();
  }

  // The jobs the controller keeps gated, as its gate pass decides before the cycle: a
  // watched job leaves once it is not held and its dependency is satisfied (for good:
  // neither comes back), for the ticks to count only the jobs that wait to be scheduled.
  void UpdateGated() {
    for (auto it = gated_.begin(); it != gated_.end();) {
      it = GatePasses(*it) ? gated_.erase(it) : std::next(it);
    }
  }

  // Whether a gated job would be let go by the next cycle's gate pass.
  bool AnyGateDue() const {
    return std::any_of(gated_.begin(), gated_.end(),
                       [this](uint64_t id) { return GatePasses(id); });
  }

  // Whether nothing keeps the job `id` back now: not held, its dependency satisfied.
  bool GatePasses(uint64_t id) const {
    const SimJob& job = jobs_[index_of_.at(id)];
    if (job.hold && released_.count(id) == 0) {
      return false;
    }
    return DependencySatisfied(job.dependency, [this](uint64_t index) {
      auto it = id_of_.find(index);
      return it == id_of_.end() ? DependencyTarget{} : listener_.TargetOf(it->second);
    });
  }

  // The task `key` ends (its work done, failed, or stopped); false when it no longer runs.
  bool Exit(const Key& key, int exit_code, int signal) {
    auto it = task_node_.find(key);
    if (it == task_node_.end()) {
      return false;
    }
    FakeAgent& agent = agents_[agent_of_.at(it->second)];
    if (agent.running.erase(key) == 0) {
      return false;
    }
    const auto [job, task, attempt] = key;
    const SimJob& sim = jobs_[index_of_.at(job)];
    TaskReport r;
    r.key = TaskKey{job, task, attempt};
    r.state = TaskState::kExited;
    r.exit_code = exit_code;
    r.signal = signal;
    r.checkpointed = signal == 15 && stopping_.count(key) > 0 &&
                     (sim.spec.checkpoint_on_signal ||
                                     options_.policy.options.lossless_preemption);
    agent.exits.push_back(r);
    return true;
  }

  // Stops without grace decided by the exits and cluster events of this instant (a
  // gang's failure, a lost node) end their tasks within it, before its cycle, as in the
  // simulator: exchange until none is left.
  Status Settle(Micros now) {
    for (int round = 0; round < 64; ++round) {
      TESSERA_RETURN_IF_ERROR(Exchange(now));
      bool more = false;
      while (!events_.empty() && events_.top().time == now &&
             events_.top().kind == EventKind::kTaskExit) {
        const Event e = events_.top();
        events_.pop();
        more = Exit(e.key, e.exit_code, e.signal) || more;
      }
      if (!more) {
        return Status::Ok();
      }
    }
    return InternalError("the stops of one instant did not settle");
  }

  Status ApplyClusterEvent(const SimClusterEvent& event, Micros now) {
    auto found = agent_of_.find(event.node);
    if (found == agent_of_.end()) {
      return InvalidArgumentError("cluster event on unknown node '" + event.node + "'");
    }
    FakeAgent& agent = agents_[found->second];
    if (agent.lost) {
      return Status::Ok();
    }
    if (event.kind == SimClusterEvent::Kind::kNodeLost) {
      agent.lost = true;
      agent.running.clear();  // gone with the node
      agent.exits.clear();
      return NodeActions(*controller_)
          .DeclareNodeLost(event.node, "lost at " + std::to_string(now / 1'000'000) + " s");
    }
    // A GPU fault as the agent's telemetry shows it: a healthy baseline, then the XID.
    const size_t gpus = static_cast<size_t>(gpus_of_.at(event.node));
    std::vector<GpuTelemetry> sample(gpus);
    for (size_t g = 0; g < gpus; ++g) {
      sample[g].index = static_cast<int>(g);
      sample[g].uuid = "GPU-" + event.node + "-" + std::to_string(g);
    }
    TESSERA_RETURN_IF_ERROR(Beat(agent, sample, now));
    GpuTelemetry& faulty = sample.at(static_cast<size_t>(event.gpu));
    faulty.xid_count = 1;
    faulty.last_xid = event.xid;
    return Beat(agent, sample, now);
  }

  // Every agent's heartbeat at `now` with a telemetry sample: each card as busy as the
  // jobs of the live tasks on it state (sim/sim_idle.h, CardUtilisation).
  Status SendTelemetry(Micros now) {
    for (FakeAgent& agent : agents_) {
      if (agent.lost) {
        continue;
      }
      std::vector<double> busy(static_cast<size_t>(gpus_of_.at(agent.node)), 0.0);
      for (const Key& key : agent.running) {
        const TaskGpus& t = task_gpus_.at(key);
        const int pct = UtilisationAt(jobs_[t.job].utilisation, now - t.start);
        for (int g : t.gpus) {
          busy.at(static_cast<size_t>(g)) += CardContribution(pct, t.milli);
        }
      }
      std::vector<GpuTelemetry> sample(busy.size());
      for (size_t g = 0; g < busy.size(); ++g) {
        sample[g].index = static_cast<int>(g);
        sample[g].uuid = "GPU-" + agent.node + "-" + std::to_string(g);
        sample[g].util_pct = CardPercent(busy[g]);
      }
      TESSERA_RETURN_IF_ERROR(Beat(agent, std::move(sample), now));
    }
    return Status::Ok();
  }

  // Every agent's heartbeat at `now`: its reports, then what the controller sends back.
  Status Exchange(Micros now) {
    for (FakeAgent& agent : agents_) {
      if (!agent.lost) {
        TESSERA_RETURN_IF_ERROR(Beat(agent, {}, now));
      }
    }
    return Status::Ok();
  }

  // One heartbeat of `agent` (with a telemetry sample when given): its reports, then
  // what the controller sends back, carried out on the run's clock.
  Status Beat(FakeAgent& agent, std::vector<GpuTelemetry> gpus, Micros now) {
    HeartbeatRequest request;
    request.gpus = std::move(gpus);
    request.node = agent.node;
    request.agent_id = agent.id;
    for (const Key& k : agent.running) {
      TaskReport r;
      r.key = TaskKey{std::get<0>(k), std::get<1>(k), std::get<2>(k)};
      request.tasks.push_back(r);
    }
    for (TaskReport& r : agent.exits) {
      request.tasks.push_back(std::move(r));
    }
    agent.exits.clear();
    TESSERA_ASSIGN_OR_RETURN(HeartbeatResponse response, controller_->Heartbeat(request));
    if (response.reregister) {
      return InternalError("the controller lost the agent of node " + agent.node);
    }
    for (const TaskLaunch& l : response.launch) {
      const Key key = KeyOf(l.key);
      if (!launched_.insert(key).second) {
        continue;  // sent again until reported running
      }
      agent.running.insert(key);
      task_node_[key] = agent.node;
      task_gpus_[key] = TaskGpus{l.gpus, l.gpu_milli, index_of_.at(l.key.job), now};
      const SimJob& sim = jobs_[index_of_.at(l.key.job)];
      const Micros left = sim.duration - listener_.work_left_offset(l.key.job);
      Push(now + std::max<Micros>(left, 0), EventKind::kTaskExit, key);
      for (const SimFailure& f : sim.failures) {
        if (f.attempt == l.key.attempt && f.task == l.key.task) {
          Push(now + f.after, EventKind::kTaskExit, key, f.exit_code, f.signal);
        }
      }
      if (l.key.task == 0) {
        attempt_of_[l.key.job] = l.key.attempt;
        if (sim.spec.runtime_limit > 0) {
          Push(now + sim.spec.runtime_limit, EventKind::kWake, Key{l.key.job, 0, l.key.attempt});
        }
      }
    }
    for (const TaskStop& s : response.stop) {
      const Key key = KeyOf(s.key);
      if (agent.running.count(key) == 0 || !stopping_.insert(key).second) {
        continue;
      }
      Push(now + s.grace_ms * 1000, EventKind::kTaskExit, key, 0, 15);
    }
    return Status::Ok();
  }

  const std::vector<SimJob>& jobs_;
  const JobSimOptions& options_;
  const QueueTree& tree_;
  JobRunRecorder recorder_;
  RunListener listener_;
  ManualClock clock_;
  InMemoryStore store_;
  std::string dir_;
  std::unique_ptr<Controller> controller_;
  std::vector<FakeAgent> agents_;
  std::map<std::string, size_t> agent_of_;
  std::map<std::string, int64_t> gpus_of_;
  std::map<uint64_t, size_t> index_of_;  // controller id -> job index
  std::map<size_t, uint64_t> id_of_;     // job index -> controller id
  std::set<uint64_t> gated_;             // ids of the jobs the controller keeps gated
  std::set<uint64_t> released_;          // ids of the held jobs released
  std::map<Key, std::string> task_node_;
  // What each launched task holds, for its node's telemetry.
  struct TaskGpus {
    std::vector<int> gpus;
    int64_t milli = 1000;  // per GPU
    size_t job = 0;        // index
    Micros start = 0;      // its attempt's start on the run's clock
  };
  std::map<Key, TaskGpus> task_gpus_;
  std::set<Key> launched_;
  std::set<Key> stopping_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t arrivals_left_ = 0;
  int64_t wakes_left_ = 0;  // wake-ups and cluster events still to come
  std::map<uint64_t, int> attempt_of_;  // job -> its latest attempt launched
  int64_t gpus_ = 0;
  bool tick_pending_ = false;
  bool idle_sample_pending_ = false;
};

}  // namespace

StatusOr<JobSimResult> RunJobsThroughController(
    const std::vector<NodeSpec>& nodes, const QueueTreeSpec& queues,
    const std::vector<SimJob>& jobs, const JobSimOptions& options, const GpuCatalog& catalog,
    const std::function<Status(Controller&, Store&)>& inspect) {
  TESSERA_ASSIGN_OR_RETURN(QueueTree tree, QueueTree::Create(queues, catalog));
  auto run = std::make_unique<ControllerRun>(jobs, options, tree);
  TESSERA_RETURN_IF_ERROR(run->Open(nodes, queues, catalog));
  TESSERA_ASSIGN_OR_RETURN(JobSimResult result, run->Run());
  if (inspect) {
    TESSERA_RETURN_IF_ERROR(inspect(run->controller(), run->store()));
  }
  return result;
}

RegisterRequest FakeAgentRegistration(const NodeSpec& node) {
  RegisterRequest r;
  r.agent_id = "agent-" + node.name;
  r.inventory.spec = node;
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    r.inventory.gpu_uuids.push_back("GPU-" + node.name + "-" + std::to_string(g));
  }
  r.inventory.mig_instances.resize(node.gpus.size());
  return r;
}

}  // namespace tessera
