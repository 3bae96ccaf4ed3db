// Runtime predictor error per trace, the earlier predictor against the current one.
//
// Each trace is turned into simulator jobs exactly as `tessera sim jobs` does
// (JobsFromTrace: tenant as queue and user, the trace's job id as name, users' runtime
// limits drawn to overestimate) and replayed in submission order with no queueing: a
// job is predicted at its submission from the jobs that finished before it, a job
// finishing at submit + runtime (what an online predictor would see on an idle
// cluster; in the simulator jobs finish later, so it sees a little less). A finish and
// a submission at the same instant: the finish first.
//
// Per trace and predictor: jobs, median and p90 of |log2(predicted / actual)|, the share
// predicted too short (actual > predicted), the share within 2x, and the share of
// actual runtimes at or below the prediction (calibration: should be near --quantile).
// Run twice over: with the users' limits, and with none (the limits the simulator
// draws are synthetic, so the second shows what the trace's own features give).
//
//   build/release/bench/predictor_error_bench [--quantile 0.7] [--traces-dir DIR]
//       [--sim [--cluster philly-vc] [--load 0.8] [--policy tessera]] [TRACE...]
//
// TRACE as for `tessera sim jobs --trace` (philly:PATH, tiresias:PATH, pollux:PATH,
// synthetic[:PARAMS]); none: Philly, Tiresias' 60 jobs, the 8 Pollux workloads and two
// synthetic traces. --sim also replays the first trace through the job simulator with
// each predictor (same binary, same everything else) and prints the policy's JCT.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugins/job_policies.h"
#include "sched/runtime_predictor.h"
#include "sim/cluster_preset.h"
#include "sim/job_report.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"

namespace tessera {
namespace {

using Method = RuntimePredictor::Method;

struct ErrorRow {
  size_t jobs = 0;
  double median = 0, p90 = 0, too_short = 0, within_2x = 0, covered = 0;
};

// What FeaturesOf gives the scheduler for a job of JobsFromTrace: the queue is the
// tenant itself (a flat tree of one level per tenant).
RuntimeFeatures Features(const SimJob& job, bool with_limit) {
  RuntimeFeatures f;
  f.tenant = job.spec.queue;
  f.user = job.spec.user;
  f.name = job.spec.name;
  f.gpus = job.spec.TotalGpus();
  f.limit = with_limit ? job.spec.runtime_limit : 0;
  return f;
}

ErrorRow Replay(const std::vector<SimJob>& jobs, RuntimePredictor::Options options,
                bool with_limit) {
  RuntimePredictor predictor(options);
  std::vector<RuntimeFeatures> features;
  features.reserve(jobs.size());
  for (const SimJob& j : jobs) features.push_back(Features(j, with_limit));
  // Jobs in order of finish, consumed as submissions pass them.
  std::vector<size_t> by_finish(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) by_finish[i] = i;
  auto finish = [&](size_t i) { return jobs[i].spec.submit_time + jobs[i].duration; };
  std::stable_sort(by_finish.begin(), by_finish.end(),
                   [&](size_t a, size_t b) { return finish(a) < finish(b); });
  std::vector<double> errors;
  errors.reserve(jobs.size());
  size_t next = 0;
  int too_short = 0, within = 0, covered = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Micros now = jobs[i].spec.submit_time;
    while (next < by_finish.size() && finish(by_finish[next]) <= now) {
      predictor.Observe(features[by_finish[next]], jobs[by_finish[next]].duration);
      ++next;
    }
    const Micros predicted = predictor.Predict(features[i]);
    const Micros actual = jobs[i].duration;
    const double e = std::log2(static_cast<double>(predicted) / static_cast<double>(actual));
    errors.push_back(std::fabs(e));
    too_short += actual > predicted;
    covered += actual <= predicted;
    within += std::fabs(e) <= 1.0;
  }
  ErrorRow row;
  row.jobs = jobs.size();
  if (jobs.empty()) return row;
  const double n = static_cast<double>(jobs.size());
  row.median = Percentile(errors, 50);
  row.p90 = Percentile(errors, 90);
  row.too_short = too_short / n;
  row.within_2x = within / n;
  row.covered = covered / n;
  return row;
}

void PrintRow(const std::string& trace, const char* predictor, const ErrorRow& r) {
  std::printf("| %s | %s | %zu | %.2f | %.2f | %.1f%% | %.1f%% | %.1f%% |\n", trace.c_str(),
              predictor, r.jobs, r.median, r.p90, 100 * r.too_short, 100 * r.within_2x,
              100 * r.covered);
}

int RunSim(const JobTrace& trace, const std::string& cluster, double load,
           const std::string& policy_name, const RuntimePredictor::Options& base,
           const std::string& traces_dir) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<ClusterSetup> setup =
      MakeClusterPreset(cluster, TraceTenants(trace), traces_dir, catalog);
  StatusOr<SchedulerPolicy> policy = ParseSchedulerPolicy(policy_name);
  if (!setup.ok() || !policy.ok()) {
    std::fprintf(stderr, "cannot build cluster '%s' or policy '%s'\n", cluster.c_str(),
                 policy_name.c_str());
    return 1;
  }
  // As `tessera sim jobs` by default: a preemption costs 60 s of restart, a victim may
  // run on 30 min to its next checkpoint.
  policy->options.restart_overhead = 60LL * 1'000'000;
  policy->options.checkpoint_wait = 30LL * 60 * 1'000'000;
  JobTrace scaled = trace;
  if (load > 0) {
    ScaleToLoad(&scaled, static_cast<int64_t>(setup->nodes.size()) * setup->gpus_per_node,
                load);
  }
  WorkloadOptions w;
  w.gpus_per_node = setup->gpus_per_node;
  const std::vector<SimJob> jobs = JobsFromTrace(scaled, w);
  std::printf("\n%s on %s at load %.2f, policy %s (predictor error as the simulator "
              "measures it, over started jobs)\n\n",
              trace.name.c_str(), cluster.c_str(), load, policy_name.c_str());
  std::printf("| predictor | avg JCT (h) | p50 JCT (h) | p99 JCT (h) | avg wait (h) | "
              "median abs log2 err | too short |\n|---|---|---|---|---|---|---|\n");
  for (Method method : {Method::kLevelCutoff, Method::kBlended}) {
    JobSimOptions options;
    options.policy = policy.value();
    options.record_usage = false;
    options.predictor = base;
    options.predictor.method = method;
    StatusOr<JobSimResult> r =
        RunJobSimulation(setup->nodes, setup->queues, jobs, options, catalog);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    const JobSummary s = Summarize(r->run);
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f%% |\n",
                method == Method::kLevelCutoff ? "before" : "after", s.avg_jct_s / 3600,
                s.median_jct_s / 3600, s.p99_jct_s / 3600, s.avg_wait_s / 3600,
                s.predictor_median_abs_log2_error, 100 * s.predictor_underestimate_fraction);
    std::fflush(stdout);
  }
  return 0;
}

int Main(int argc, char** argv) {
  const char* env = std::getenv("TESSERA_TRACES_DIR");
  std::string dir = env != nullptr && *env != '\0' ? env : TESSERA_DEFAULT_TRACES_DIR;
  RuntimePredictor::Options options;
  bool sim = false;
  std::string cluster = "philly-vc", policy = "tessera";
  double load = 0.8;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--quantile" && has_value) {
      options.quantile = std::atof(argv[++i]);
    } else if (arg == "--traces-dir" && has_value) {
      dir = argv[++i];
    } else if (arg == "--sim") {
      sim = true;
    } else if (arg == "--cluster" && has_value) {
      cluster = argv[++i];
    } else if (arg == "--load" && has_value) {
      load = std::atof(argv[++i]);
    } else if (arg == "--policy" && has_value) {
      policy = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "unknown flag %s (see the comment atop the source)\n", arg.c_str());
      return 2;
    } else {
      specs.push_back(arg);
    }
  }
  if (specs.empty()) {
    specs = {"philly:" + dir + "/sia/traces/philly.csv", "tiresias:" + dir + "/tiresias/60_job.csv"};
    for (int w = 1; w <= 8; ++w) {
      specs.push_back("pollux:" + dir + "/pollux-adaptdl-workloads/workloads/workload-" +
                      std::to_string(w) + ".csv");
    }
    specs.push_back("synthetic:jobs=20000,seed=1");
    specs.push_back("synthetic:jobs=20000,seed=2,tenants=8,sigma=2");
  }
  std::vector<JobTrace> traces;
  for (const std::string& spec : specs) {
    StatusOr<JobTrace> t = ReadJobTrace(spec, dir);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    // Tell the Pollux workloads apart by their file.
    if (t->name == "pollux") t->name += "/" + spec.substr(spec.find_last_of('/') + 1);
    if (t->name == "synthetic") t->name = spec;
    traces.push_back(std::move(t).value());
  }
  for (bool with_limit : {true, false}) {
    std::printf("\n%s users' runtime limits; quantile %.2f\n\n",
                with_limit ? "With" : "Without", options.quantile);
    std::printf("| trace | predictor | jobs | median abs log2 err | p90 | too short | "
                "within 2x | at or below prediction |\n|---|---|---|---|---|---|---|---|\n");
    for (const JobTrace& t : traces) {
      const std::vector<SimJob> jobs = JobsFromTrace(t, WorkloadOptions{});
      for (Method method : {Method::kLevelCutoff, Method::kBlended}) {
        RuntimePredictor::Options o = options;
        o.method = method;
        PrintRow(t.name, method == Method::kLevelCutoff ? "before" : "after",
                 Replay(jobs, o, with_limit));
      }
      std::fflush(stdout);
    }
  }
  if (sim) return RunSim(traces.front(), cluster, load, policy, options, dir);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::Main(argc, argv); }
