// How right are pending jobs' ETAs? A slice of the Philly trace replayed through the live
// controller in process (a manual clock, an in-memory store, one fake agent per node that
// runs each task for its true duration and obeys stops), under the controller's default
// policy. At each submission instant, after the cycle, the controller refreshes its ETAs
// (what `tessera show` then says) and the walltime baseline is forecast from the same
// state (Slurm's `--start`: every running and pending job assumed to run for its user's
// limit; the trace has no limits, so they are drawn as the simulator draws them: a fifth
// ask for the site maximum, the rest 1.2x to 5x the true runtime, rounded up). When the
// job actually starts: relative error = |eta - actual| / max(actual - submit, 60 s).
//
// Prints the median and p90 of the error for jobs that queued (started after their
// submission instant) and for all jobs, for Tessera's ETA and the baseline, and the jobs
// with no estimate (none within the horizon).
//
//   build/release/bench/eta_accuracy_bench [--jobs 2000] [--skip 20000] [--cluster 16x8xP100]
//       [--load 0.9] [--policy tessera] [--traces-dir DIR]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "api/queue_config.h"
#include "bench_util.h"
#include "plugins/job_policies.h"
#include "server/controller.h"
#include "server/scenarios/controller_job_runner.h"
#include "sim/cluster_preset.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"
#include "store/store.h"

namespace tessera {
namespace {

constexpr Micros kEpoch = 1'000'000'000'000;  // the controller's time of the run's 0
constexpr Micros kSec = 1'000'000;

struct Options {
  int jobs = 2000;
  int skip = 20000;  // start the slice this far into the trace (past its sparse start)
  std::string cluster = "16x8xP100";
  double load = 0.9;
  std::string policy = "tessera";
  std::string traces_dir =
#ifdef TESSERA_DEFAULT_TRACES_DIR
      TESSERA_DEFAULT_TRACES_DIR;
#else
      "";
#endif
};

using Key = std::tuple<uint64_t, int, int>;  // job, task, attempt
enum class EventKind : uint8_t { kWorkDone = 0, kStopDeadline = 1, kArrival = 2, kTick = 3 };
struct Event {
  Micros time;
  EventKind kind;
  uint64_t seq;
  Key key;
  bool operator>(const Event& o) const {
    return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq);
  }
};

// Where each attempt resumes from, for how long its tasks run.
class Listener final : public LifecycleListener {
 public:
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& e) override {
    if (e.kind == LifecycleEvent::Kind::kStarted) {
      offset_[e.job.value()] = job.resumed_from - job.startup;
      ++running_;
    } else if (e.kind == LifecycleEvent::Kind::kRequeued) {
      --running_;
      ++pending_;
    } else if (e.kind == LifecycleEvent::Kind::kSubmitted) {
      ++pending_;
    } else if (e.kind == LifecycleEvent::Kind::kFinished) {
      --running_;
    }
    if (e.kind == LifecycleEvent::Kind::kStarted) {
      --pending_;
    }
  }
  Micros offset(uint64_t id) const {
    auto it = offset_.find(id);
    return it == offset_.end() ? 0 : it->second;
  }
  int64_t pending() const { return pending_; }

 private:
  std::unordered_map<uint64_t, Micros> offset_;
  int64_t pending_ = 0, running_ = 0;
};

struct Agent {
  std::string node, id;
  std::set<Key> running;
  std::vector<TaskReport> exits;
};

struct Sample {
  Micros submit = 0;
  std::optional<Micros> eta, baseline;  // none: no estimate
  bool estimated = false;               // a refresh saw it pending
  Micros start = -1;
};

class Replay {
 public:
  Replay(std::vector<SimJob> jobs, const SchedulerPolicy& policy)
      : jobs_(std::move(jobs)), policy_(policy), clock_(kEpoch) {}
  ~Replay() {
    controller_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Status Open(const ClusterSetup& setup, const GpuCatalog& catalog) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-eta-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return InternalError("cannot make a scratch directory");
    }
    dir_ = tmpl;
    ControllerOptions o;
    o.data_dir = dir_;
    o.scheduler_policy = policy_;
    o.node_timeout = 1'000'000LL * kSec;
    o.lifecycle_listener = &listener_;
    o.cycle_on_exit = false;
    o.eta.interval = 0;  // refreshed here, at each submission instant
    o.on_started = [this](JobNumber id, Micros now) {
      Sample& s = samples_[id.value() - 1];
      if (s.start < 0) {
        s.start = now - kEpoch;
      }
    };
    TESSERA_ASSIGN_OR_RETURN(
        controller_, Controller::Open(o, &store_, catalog, clock_, QueueTreeYaml(setup.queues, catalog)));
    for (const NodeSpec& n : setup.nodes) {
      const RegisterRequest r = FakeAgentRegistration(n);
      TESSERA_RETURN_IF_ERROR(controller_->Register(r, "127.0.0.1").status());
      agents_.push_back(Agent{n.name, r.agent_id, {}, {}});
      agent_of_[n.name] = agents_.size() - 1;
    }
    samples_.resize(jobs_.size());
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Push(jobs_[i].spec.submit_time, EventKind::kArrival, Key{i, 0, 0});
    }
    return Status::Ok();
  }

  Status Run() {
    size_t submitted = 0;
    const auto wall = bench::Clock::now();
    while (!events_.empty()) {
      const Micros now = events_.top().time;
      clock_.Set(kEpoch + now);
      std::vector<size_t> arrived;
      while (!events_.empty() && events_.top().time == now) {
        const Event e = events_.top();
        events_.pop();
        switch (e.kind) {
          case EventKind::kArrival: {
            const size_t i = std::get<0>(e.key);
            JobSubmission sub;
            sub.spec = jobs_[i].spec;
            sub.command = {"true"};
            TESSERA_ASSIGN_OR_RETURN(JobIntake::Submitted made,
                                     controller_->intake().Submit(
                                         Principal{Role::kAdmin, "", "bench"}, std::move(sub), ""));
            if (made.jobs.front().value() != i + 1) {
              return InternalError("unexpected job id " + ToString(made.jobs.front()));
            }
            samples_[i].submit = now;
            arrived.push_back(i);
            break;
          }
          case EventKind::kWorkDone:
            Exit(e.key, 0);
            break;
          case EventKind::kStopDeadline:
            Exit(e.key, 15);
            break;
          case EventKind::kTick:
            tick_pending_ = false;
            break;
        }
      }
      TESSERA_RETURN_IF_ERROR(Exchange(now));
      TESSERA_RETURN_IF_ERROR(controller_->RunCycle());
      TESSERA_RETURN_IF_ERROR(Exchange(now));
      if (!arrived.empty()) {
        TESSERA_RETURN_IF_ERROR(Estimate(arrived, now));
        submitted += arrived.size();
        if (submitted / 200 != (submitted - arrived.size()) / 200) {
          std::fprintf(stderr, "  %zu of %zu jobs submitted (virtual %.1f h, %.0f s wall)\n",
                       submitted, jobs_.size(), static_cast<double>(now) / 3.6e9,
                       std::chrono::duration<double>(bench::Clock::now() - wall).count());
        }
      }
      if (listener_.pending() > 0 && !tick_pending_) {
        Push(now + 300 * kSec, EventKind::kTick, Key{});
        tick_pending_ = true;
      }
    }
    return Status::Ok();
  }

  const std::vector<Sample>& samples() const { return samples_; }
  int64_t refreshes() const { return refreshes_; }
  double refresh_seconds() const { return refresh_seconds_; }

 private:
  Status Estimate(const std::vector<size_t>& arrived, Micros now) {
    const auto t0 = bench::Clock::now();
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const EtaTable> eta,
                             controller_->etas().RefreshEtas());
    refresh_seconds_ += std::chrono::duration<double>(bench::Clock::now() - t0).count();
    ++refreshes_;
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const EtaTable> limits,
                             controller_->etas().ForecastEtas(EtaRuntimes::kUserLimit));
    for (size_t i : arrived) {
      Sample& s = samples_[i];
      if (s.start >= 0) {
        s.eta = s.baseline = now;  // started at its submission's cycle
        continue;
      }
      auto from = [&](const std::shared_ptr<const EtaTable>& t) -> std::optional<Micros> {
        if (t == nullptr) {
          return std::nullopt;
        }
        auto it = t->jobs.find(i + 1);
        if (it == t->jobs.end() || !it->second.eta) {
          return std::nullopt;
        }
        return *it->second.eta - kEpoch;
      };
      s.estimated = true;
      s.eta = from(eta);
      s.baseline = from(limits);
    }
    return Status::Ok();
  }

  void Push(Micros time, EventKind kind, Key key) {
    events_.push(Event{time, kind, seq_++, key});
  }

  void Exit(const Key& key, int signal) {
    auto it = task_node_.find(key);
    if (it == task_node_.end()) {
      return;
    }
    Agent& agent = agents_[agent_of_.at(it->second)];
    if (agent.running.erase(key) == 0) {
      return;
    }
    const auto [job, task, attempt] = key;
    TaskReport r;
    r.key = TaskKey{job, task, attempt};
    r.state = TaskState::kExited;
    r.signal = signal;
    agent.exits.push_back(r);
  }

  Status Exchange(Micros now) {
    for (Agent& agent : agents_) {
      HeartbeatRequest request;
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
      for (const TaskLaunch& l : response.launch) {
        const Key key{l.key.job, l.key.task, l.key.attempt};
        if (!launched_.insert(key).second) {
          continue;
        }
        agent.running.insert(key);
        task_node_[key] = agent.node;
        const Micros left = jobs_[l.key.job - 1].duration - listener_.offset(l.key.job);
        Push(now + std::max<Micros>(left, 0), EventKind::kWorkDone, key);
      }
      for (const TaskStop& s : response.stop) {
        const Key key{s.key.job, s.key.task, s.key.attempt};
        if (agent.running.count(key) == 0 || !stopping_.insert(key).second) {
          continue;
        }
        Push(now + s.grace_ms * 1000, EventKind::kStopDeadline, key);
      }
    }
    return Status::Ok();
  }

  std::vector<SimJob> jobs_;
  SchedulerPolicy policy_;
  ManualClock clock_;
  InMemoryStore store_;
  std::string dir_;
  Listener listener_;
  std::unique_ptr<Controller> controller_;
  std::vector<Agent> agents_;
  std::map<std::string, size_t> agent_of_;
  std::map<Key, std::string> task_node_;
  std::set<Key> launched_, stopping_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  bool tick_pending_ = false;
  std::vector<Sample> samples_;
  int64_t refreshes_ = 0;
  double refresh_seconds_ = 0;
};

void Print(const char* what, const std::vector<Sample>& samples, bool queued_only) {
  std::vector<double> tessera, baseline;
  int none_t = 0, none_b = 0, n = 0;
  for (const Sample& s : samples) {
    if (s.start < 0 || (queued_only && !s.estimated)) {
      continue;
    }
    ++n;
    const double denom = static_cast<double>(std::max<Micros>(s.start - s.submit, 60 * kSec));
    auto err = [&](const std::optional<Micros>& eta, std::vector<double>* out, int* none) {
      if (!eta) {
        ++*none;
        return;
      }
      out->push_back(std::abs(static_cast<double>(*eta - s.start)) / denom);
    };
    err(s.eta, &tessera, &none_t);
    err(s.baseline, &baseline, &none_b);
  }
  std::printf("%-34s %5d jobs | tessera median %6.1f %%  p90 %7.1f %%  (%d no estimate) | "
              "walltime baseline median %6.1f %%  p90 %7.1f %%  (%d no estimate)\n",
              what, n, 100 * bench::Percentile(tessera, 0.5), 100 * bench::Percentile(tessera, 0.9),
              none_t, 100 * bench::Percentile(baseline, 0.5), 100 * bench::Percentile(baseline, 0.9),
              none_b);
}

int Main(const Options& o) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<JobTrace> trace = ReadPhillyTrace(o.traces_dir + "/sia/traces/philly.csv");
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().ToString().c_str());
    return 1;
  }
  JobTrace& t = *trace;
  const size_t from = std::min<size_t>(static_cast<size_t>(o.skip), t.jobs.size());
  std::vector<TraceJob> slice(t.jobs.begin() + static_cast<ptrdiff_t>(from),
                              t.jobs.begin() + static_cast<ptrdiff_t>(
                                                   std::min(t.jobs.size(), from + o.jobs)));
  const Micros first = slice.empty() ? 0 : slice.front().submit;
  for (TraceJob& j : slice) {
    j.submit -= first;
  }
  t.jobs = std::move(slice);
  StatusOr<ClusterSetup> setup = MakeClusterPreset(o.cluster, TraceTenants(t), o.traces_dir, catalog);
  if (!setup.ok()) {
    std::fprintf(stderr, "%s\n", setup.status().ToString().c_str());
    return 1;
  }
  int64_t gpus = 0;
  for (const NodeSpec& n : setup->nodes) {
    gpus += static_cast<int64_t>(n.gpus.size());
  }
  // Jobs larger than the cluster could never start: left out of the slice.
  std::erase_if(t.jobs, [&](const TraceJob& j) { return j.gpus > gpus; });
  const double own = OfferedLoad(t, gpus);
  ScaleToLoad(&t, gpus, o.load);
  WorkloadOptions w;
  w.gpus_per_node = setup->gpus_per_node;
  std::vector<SimJob> jobs = JobsFromTrace(t, w);
  StatusOr<SchedulerPolicy> policy = ParseSchedulerPolicy(o.policy);
  if (!policy.ok()) {
    std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
    return 2;
  }
  *policy = WithServerBounds(*policy, ControllerOptions{}.min_run_before_reclaim,
                             ControllerOptions{}.victim_hold);
  std::fprintf(stderr,
               "eta_accuracy_bench: %zu Philly jobs (from #%d) on %s (%lld GPUs), load %.2f "
               "(own %.2f), policy %s\n",
               jobs.size(), o.skip, o.cluster.c_str(), static_cast<long long>(gpus), o.load, own,
               o.policy.c_str());
  const auto wall = bench::Clock::now();
  Replay replay(std::move(jobs), *policy);
  Status s = replay.Open(*setup, catalog);
  if (s.ok()) {
    s = replay.Run();
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%zu jobs, %lld refreshes (mean %.1f ms), %.0f s wall\n", replay.samples().size(),
              static_cast<long long>(replay.refreshes()),
              1e3 * replay.refresh_seconds() / std::max<int64_t>(1, replay.refreshes()),
              std::chrono::duration<double>(bench::Clock::now() - wall).count());
  int waited = 0, never = 0;
  for (const Sample& x : replay.samples()) {
    waited += x.start > x.submit;
    never += x.start < 0;
  }
  std::printf("%d jobs waited, %d never started\n", waited, never);
  if (std::getenv("ETA_BENCH_DEBUG") != nullptr) {
    int soon = 0, early = 0, late = 0;
    for (const Sample& x : replay.samples()) {
      if (!x.estimated || !x.eta) continue;
      soon += *x.eta - x.submit < 60 * kSec && x.start - x.submit > 600 * kSec;
      early += *x.eta < x.start;
      late += *x.eta > x.start;
    }
    std::printf("eta within a minute but started after 10: %d; early %d, late %d\n", soon, early, late);
  }
  if (std::getenv("ETA_BENCH_DEBUG") != nullptr) {
    int shown = 0;
    for (size_t i = 0; i < replay.samples().size() && shown < 40; ++i) {
      const Sample& x = replay.samples()[i];
      if (!x.estimated || i % 7 != 0) {
        continue;
      }
      ++shown;
      std::printf("job %zu submit %.0f s eta %+.0f baseline %+.0f start %+.0f (s from submit)\n", i + 1,
                  x.submit / 1e6, x.eta ? (*x.eta - x.submit) / 1e6 : -1.0,
                  x.baseline ? (*x.baseline - x.submit) / 1e6 : -1.0, (x.start - x.submit) / 1e6);
    }
  }
  Print("queued at submission:", replay.samples(), true);
  Print("all jobs:", replay.samples(), false);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::Options o;
  if (const char* env = std::getenv("TESSERA_TRACES_DIR"); env != nullptr && *env != '\0') {
    o.traces_dir = env;
  }
  for (int i = 1; i < argc; ++i) {
    const bool has = i + 1 < argc;
    if (std::strcmp(argv[i], "--jobs") == 0 && has) {
      o.jobs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--skip") == 0 && has) {
      o.skip = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--cluster") == 0 && has) {
      o.cluster = argv[++i];
    } else if (std::strcmp(argv[i], "--load") == 0 && has) {
      o.load = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--policy") == 0 && has) {
      o.policy = argv[++i];
    } else if (std::strcmp(argv[i], "--traces-dir") == 0 && has) {
      o.traces_dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: eta_accuracy_bench [--jobs N] [--skip N] [--cluster PRESET] "
                   "[--load X] [--policy P] [--traces-dir DIR]\n");
      return 2;
    }
  }
  return tessera::Main(o);
}
