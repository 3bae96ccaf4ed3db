// Job simulator speed on the Philly trace (82,247 jobs, Sia's philly.csv).
//
//   BM_PhillyReplay/<policy>/<load%>: one whole replay on the philly-vc preset
//     (2,816 GPUs, 11 virtual clusters as quotas), arrivals compressed to the offered
//     load given (0: the trace's own timing). The benchmark's time is one replay;
//     counters: events_per_s (simulator events: arrivals, finishes, evictions,
//     ticks, each followed by a scheduling cycle when it changes something) and
//     avg_jct_h, to show the run did the real work.
//
// Build the release preset and run: build/release/bench/job_sim_bench
// (--benchmark_filter='policy:[34]/load_pct:80': tiresias and tessera at 80% load, the
// replays docs/benchmarks.md times before and after the victim search's changes).
// The traces folder comes from TESSERA_TRACES_DIR, else the path CMake recorded.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "plugins/job_policies.h"
#include "sim/cluster_preset.h"
#include "sim/job_report.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"

namespace tessera {
namespace {

const char* const kPolicies[] = {"fifo", "static-vc", "slurm", "tiresias", "tessera"};

std::string TracesDir() {
  const char* env = std::getenv("TESSERA_TRACES_DIR");
  return env != nullptr && *env != '\0' ? env : TESSERA_DEFAULT_TRACES_DIR;
}

void BM_PhillyReplay(benchmark::State& state) {
  const std::string dir = TracesDir();
  StatusOr<JobTrace> trace = ReadPhillyTrace(dir + "/sia/traces/philly.csv");
  if (!trace.ok()) {
    state.SkipWithError(trace.status().ToString().c_str());
    return;
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<ClusterSetup> setup =
      MakeClusterPreset("philly-vc", TraceTenants(trace.value()), dir, catalog);
  StatusOr<SchedulerPolicy> policy = ParseSchedulerPolicy(kPolicies[state.range(0)]);
  if (!setup.ok() || !policy.ok()) {
    state.SkipWithError("cannot build the cluster or the policy");
    return;
  }
  const double load = static_cast<double>(state.range(1)) / 100.0;
  if (load > 0) {
    ScaleToLoad(&trace.value(), setup->nodes.size() * static_cast<int64_t>(setup->gpus_per_node),
                load);
  }
  WorkloadOptions w;
  w.gpus_per_node = setup->gpus_per_node;
  const std::vector<SimJob> jobs = JobsFromTrace(trace.value(), w);
  JobSimOptions options;
  options.policy = policy.value();
  options.record_usage = false;
  int64_t events = 0;
  double jct = 0;
  for (auto _ : state) {
    StatusOr<JobSimResult> r = RunJobSimulation(setup->nodes, setup->queues, jobs, options, catalog);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    events += r->run.events;
    jct = Summarize(r->run).avg_jct_s / 3600.0;
  }
  state.SetLabel(std::string(kPolicies[state.range(0)]) + ", " + std::to_string(jobs.size()) +
                 " jobs");
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["avg_jct_h"] = jct;
}
BENCHMARK(BM_PhillyReplay)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 80}})
    ->ArgNames({"policy", "load_pct"})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
