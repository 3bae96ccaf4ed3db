// The cost of one ETA refresh (sim/start_forecast.h) on a live-like snapshot: 256 nodes
// of 8 GPUs, about 1,000 running jobs an hour into their runs, 10,000 pending jobs in
// four queues, under the live controller's default policy and placement (tessera, its
// typical tasks those of the jobs here, as the controller would have learned). Prints the snapshot copy's time (what the controller does under its core
// lock) and the forecast's (done without it), median of several runs, and how many
// pending jobs got an ETA.
//
//   build/release/bench/eta_refresh_bench [--pending 10000] [--nodes 256] [--runs 5]
//       [--policy tessera] [--resolution 0.01]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "base/rng.h"
#include "model/node.h"
#include "plugins/job_policies.h"
#include "plugins/registry.h"
#include "sched/job_lifecycle.h"
#include "sched/job_scheduler.h"
#include "sim/start_forecast.h"

namespace tessera {
namespace {

constexpr Micros kSec = 1'000'000;

struct Options {
  int pending = 10'000;
  int nodes = 256;
  int runs = 5;
  std::string policy = "tessera";
  double resolution = ForecastOptions{}.resolution_fraction;
};

JobSpec Spec(const std::string& name, const std::string& queue, int gpus, Micros submit) {
  JobSpec s;
  s.name = name;
  s.queue = queue;
  s.user = queue + "-user";
  s.submit_time = submit;
  const int per_task = gpus > 8 ? 8 : gpus;
  for (int left = gpus; left > 0; left -= per_task) {
    TaskRequest t;
    t.cpu = MilliCpu(1000);
    t.gpu_count = per_task;
    t.gpu_milli = MilliGpu(kMilliPerGpu);
    s.tasks.push_back(t);
  }
  return s;
}

int Run(const Options& o) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  std::vector<NodeSpec> nodes;
  for (int n = 0; n < o.nodes; ++n) {
    nodes.push_back(MakeUniformNode("n" + std::to_string(n), MilliCpu(128'000), MiB(1 << 20),
                                    *catalog.Find("H100-80GB"), 8, SharingMode::kExclusive));
  }
  QueueTreeSpec spec;
  for (int q = 0; q < 4; ++q) {
    QueueNodeSpec n;
    n.name = "q" + std::to_string(q);
    spec.nodes.push_back(n);
  }
  auto tree = std::make_shared<const QueueTree>(QueueTree::Create(spec, catalog).value());
  StatusOr<SchedulerPolicy> policy = ParseSchedulerPolicy(o.policy);
  if (!policy.ok()) {
    std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
    return 2;
  }
  policy->options.min_run_before_reclaim = 60 * kSec;  // as the live controller

  // The live core: jobs started at 0, then a backlog, snapshotted an hour in.
  ClusterState state = ClusterState::Create(nodes, catalog).value();
  QuotaLedger quota(*tree);
  JobScheduler scheduler(*tree, state, policy->options,
                         MakeJobOrder(policy->job_order, policy->options).value(),
                         policy->queue_order.empty() ? nullptr
                                                     : MakeQueueOrder(policy->queue_order).value(),
                         MakeProfile("bestfit", PolicyContext{ScaleOf(state), nullptr}).value(),
                         policy->fairshare_half_life);
  std::vector<JobRecord> jobs;
  JobLifecycle lifecycle(&jobs, tree.get(), nullptr, JobLifecycle::Options{});
  lifecycle.Bind(&state, &quota, &scheduler);
  Pcg32 rng(7);
  const int sizes[] = {1, 1, 1, 1, 1, 1, 2, 2, 4, 8};
  auto runtime = [&rng] {
    // Minutes to a day, log-uniform.
    const double lo = 60, hi = 86'400;
    return static_cast<Micros>(lo * std::pow(hi / lo, rng.UniformDouble()) * kSec);
  };
  auto submit = [&](Micros at) {
    JobRecord r;
    r.id = JobId(jobs.size());
    const std::string queue = "q" + std::to_string(rng.Uniform(4));
    r.spec = Spec("j" + std::to_string(jobs.size()), queue, sizes[rng.Uniform(10)], at);
    r.queue = tree->FindQueue(queue).value();
    r.gpu_milli = r.spec.TotalGpuMilli(catalog);
    r.predicted_runtime = runtime();
    jobs.push_back(std::move(r));
    lifecycle.Submit(jobs.back(), at);
  };
  for (int i = 0; i < 1'100; ++i) {
    submit(0);
  }
  lifecycle.RunCycle(0, rng);
  const Micros now = 3600 * kSec;
  for (int i = 0; i < o.pending; ++i) {
    submit(60 * kSec + i * (3000 * kSec / o.pending));
  }
  lifecycle.RunCycle(now, rng);
  int running = 0, pending = 0;
  for (const JobRecord& r : jobs) {
    running += r.phase == JobPhase::kRunning;
    pending += r.phase == JobPhase::kPending;
  }
  std::printf("cluster %d nodes x 8 GPUs, policy %s: %d running, %d pending\n", o.nodes,
              o.policy.c_str(), running, pending);

  std::vector<TaskRequest> tasks;
  for (const JobRecord& r : jobs) {
    tasks.insert(tasks.end(), r.spec.tasks.begin(), r.spec.tasks.end());
  }
  const TypicalWorkload typical = FindTypicalTasks(tasks);
  std::vector<double> copy_ms, forecast_ms;
  size_t with_eta = 0;
  int64_t cycles = 0;
  for (int run = 0; run < o.runs; ++run) {
    const auto t0 = bench::Clock::now();
    ForecastInput in;
    in.now = now;
    in.tree = tree;
    in.state = state;
    in.policy = *policy;
    in.placement = "tessera";
    in.typical = typical;
    in.usage = scheduler.usage().Save();
    in.jobs.reserve(jobs.size());
    for (const JobRecord& r : jobs) {
      if (r.phase == JobPhase::kFinished) {
        continue;
      }
      const Micros left = r.phase == JobPhase::kPending
                              ? r.predicted_runtime
                              : ForecastRemaining(r.predicted_runtime, r, now, 60 * kSec);
      in.jobs.push_back(ForecastJob{r, left});
    }
    const auto t1 = bench::Clock::now();
    ForecastOptions fo;
    fo.resolution_fraction = o.resolution;
    StatusOr<Forecast> f = RunStartForecast(std::move(in), fo);
    const auto t2 = bench::Clock::now();
    if (!f.ok()) {
      std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
      return 1;
    }
    copy_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    forecast_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    with_eta = 0;
    for (const JobForecast& j : f->pending) {
      with_eta += j.eta.has_value();
    }
    cycles = f->cycles;
    std::printf("  run %d: snapshot %.1f ms, forecast %.1f ms, %lld cycles\n", run + 1,
                copy_ms.back(), forecast_ms.back(), static_cast<long long>(cycles));
  }
  std::printf(
      "refresh: snapshot copy median %.1f ms, forecast median %.1f ms (p100 %.1f ms); "
      "%zu of %d pending jobs with an ETA, %lld cycles\n",
      bench::Percentile(copy_ms, 0.5), bench::Percentile(forecast_ms, 0.5),
      bench::Percentile(forecast_ms, 1.0), with_eta, pending, static_cast<long long>(cycles));
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](int* v) {
      if (i + 1 < argc) *v = std::atoi(argv[++i]);
    };
    if (std::strcmp(argv[i], "--pending") == 0) {
      next(&o.pending);
    } else if (std::strcmp(argv[i], "--nodes") == 0) {
      next(&o.nodes);
    } else if (std::strcmp(argv[i], "--runs") == 0) {
      next(&o.runs);
    } else if (std::strcmp(argv[i], "--resolution") == 0 && i + 1 < argc) {
      o.resolution = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
      o.policy = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: eta_refresh_bench [--pending N] [--nodes N] [--runs N] [--policy P] [--resolution F]\n");
      return 2;
    }
  }
  return tessera::Run(o);
}
