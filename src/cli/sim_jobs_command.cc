#include "cli/sim_jobs_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "api/queue_config.h"
#include "api/units.h"
#include "base/strings.h"
#include "plugins/registry.h"
#include "cli/output_files.h"
#include "plugins/job_policies.h"
#include "sim/cluster_preset.h"
#include "sim/job_report.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"
#include "sim/policy_fingerprint.h"

// The traces folder CMake recorded (TESSERA_TRACES_DIR: the source tree's data/traces).
#ifndef TESSERA_DEFAULT_TRACES_DIR
#define TESSERA_DEFAULT_TRACES_DIR "data/traces"
#endif

namespace tessera {
namespace {

struct JobsOptions {
  std::string trace;
  std::string cluster = "philly-vc";
  std::string queues;  // YAML file replacing the preset's queue tree
  std::string policies = "fifo,static-vc,slurm,tiresias,srtf,tessera";
  std::string placement = JobSimOptions{}.placement;
  std::string traces_dir;
  std::string out = "out/jobs";
  double load = 0;  // 0: the trace's own timing
  int64_t limit = 0;
  int64_t every = 1;
  uint64_t seed = 42;
  double checkpoint_minutes = 30;
  bool checkpoint_on_signal = false;
  bool gpus_anywhere = false;
  std::string restart_overhead = "60s";
  std::string checkpoint_wait = "30m";
  int threads = 0;
  bool json = false;
  bool quiet = false;
  bool per_job = false;
  bool no_rho = false;
  bool print_defaults = false;
};

std::string PerJobCsv(const JobRun& run) {
  std::string out =
      "name,tenant,gpus,submit_s,first_start_s,finish_s,runtime_s,service_s,preemptions,"
      "lost_gpu_seconds,predicted_s\n";
  auto s = [](Micros t) { return t < 0 ? std::string() : std::to_string(t / 1'000'000); };
  for (const JobOutcome& j : run.jobs) {
    out += j.name + "," + j.tenant + "," + std::to_string(j.gpus) + "," + s(j.submit) + "," +
           s(j.first_start) + "," + s(j.finish) + "," + s(j.actual) + "," + s(j.service) + "," +
           std::to_string(j.preemptions) + "," + std::to_string(j.lost_gpu_seconds) + "," +
           s(j.predicted) + "\n";
  }
  return out;
}

// Where the public traces are when --traces-dir is not given: $TESSERA_TRACES_DIR, else
// the copy a package installs beside this binary (<bin>/../share/tessera/traces), else
// the data/traces of the source tree this binary was built from (as configured).
std::string DefaultTracesDir() {
  const char* env = std::getenv("TESSERA_TRACES_DIR");
  if (env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed =
        self.parent_path().parent_path() / "share" / "tessera" / "traces";
    if (std::filesystem::is_directory(installed, ec)) {
      return installed.string();
    }
  }
  return TESSERA_DEFAULT_TRACES_DIR;
}

StatusOr<std::vector<SchedulerPolicy>> ParsePolicies(std::string_view list) {
  std::vector<SchedulerPolicy> policies;
  for (std::string_view p : Split(list, ',')) {
    if (Trim(p).empty()) {
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy policy, ParseSchedulerPolicy(p));
    policies.push_back(std::move(policy));
  }
  if (policies.empty()) {
    return InvalidArgumentError("--policy lists no policy");
  }
  return policies;
}

// A duration flag's value, which must be >= 0 (e.g. 60s, 30m, 0).
StatusOr<Micros> FlagDuration(std::string_view flag, const std::string& text) {
  StatusOr<int64_t> d = ParseDurationMicros(text);
  if (!d.ok() || d.value() < 0) {
    return InvalidArgumentError(std::string(flag) + ": '" + text +
                                "' is not a duration >= 0 (e.g. 60s, 30m, 0)");
  }
  return d.value();
}

// What every policy replays: the trace's jobs on the cluster.
struct Replay {
  JobTrace trace;
  ClusterSetup setup;
  std::vector<SimJob> jobs;
};

// Reads the trace (scaled to --load), builds the cluster and the jobs, and says on stderr
// what is about to run.
StatusOr<Replay> LoadReplay(const JobsOptions& o, const std::string& traces_dir,
                            const GpuCatalog& catalog, size_t policy_count) {
  Replay r;
  TESSERA_ASSIGN_OR_RETURN(r.trace, ReadJobTrace(o.trace, traces_dir));
  JobTrace& trace = r.trace;
  if (o.every > 1) {
    // Thinning keeps the trace's mix of jobs and its arrival pattern; --load then
    // restores the offered load.
    size_t kept = 0;
    for (size_t i = 0; i < trace.jobs.size(); i += static_cast<size_t>(o.every)) {
      trace.jobs[kept++] = std::move(trace.jobs[i]);
    }
    trace.jobs.resize(kept);
  }
  if (o.limit > 0 && static_cast<size_t>(o.limit) < trace.jobs.size()) {
    trace.jobs.resize(static_cast<size_t>(o.limit));
  }
  if (trace.jobs.empty()) {
    return InvalidArgumentError("trace '" + o.trace + "' has no jobs");
  }
  TESSERA_ASSIGN_OR_RETURN(r.setup,
                           MakeClusterPreset(o.cluster, TraceTenants(trace), traces_dir, catalog));
  if (!o.queues.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.setup.queues, LoadQueueTreeFile(o.queues, catalog));
  }
  int64_t cluster_gpus = 0;
  for (const NodeSpec& n : r.setup.nodes) {
    cluster_gpus += static_cast<int64_t>(n.gpus.size());
  }
  const double own_load = OfferedLoad(trace, cluster_gpus);
  double factor = 1.0;
  if (o.load > 0) {
    factor = ScaleToLoad(&trace, cluster_gpus, o.load);
  }
  WorkloadOptions w;
  w.gpus_per_node = r.setup.gpus_per_node;
  w.checkpoint_interval = static_cast<Micros>(o.checkpoint_minutes * 60e6);
  w.checkpoint_on_signal = o.checkpoint_on_signal;
  w.seed = o.seed;
  w.gpus_anywhere = o.gpus_anywhere;
  r.jobs = JobsFromTrace(trace, w);
  std::fprintf(stderr,
               "tessera sim jobs: %zu jobs of '%s' (%d rows skipped) on %s: %lld GPUs in %zu "
               "nodes; offered load %.3f%s; %zu policies\n",
               r.jobs.size(), trace.name.c_str(), trace.skipped, o.cluster.c_str(),
               static_cast<long long>(cluster_gpus), r.setup.nodes.size(), own_load,
               o.load > 0 ? (" scaled to " + std::to_string(o.load) + " (arrivals x" +
                             std::to_string(factor) + ")")
                                .c_str()
                          : "",
               policy_count);
  return r;
}

// Calls fn(0) .. fn(n - 1) on at most --jobs threads (default: one per core).
void ParallelFor(const JobsOptions& o, size_t n, const std::function<void(size_t)>& fn) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(n, static_cast<size_t>(o.threads > 0 ? o.threads : cores));
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= n) {
          return;
        }
        i = next++;
      }
      fn(i);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back(worker);
  }
  for (std::thread& t : pool) {
    t.join();
  }
}

// Simulates the replay under each policy, showing their progress on stderr unless
// --quiet.
std::vector<StatusOr<JobSimResult>> RunPolicies(const JobsOptions& o,
                                                const std::vector<SchedulerPolicy>& policies,
                                                const Replay& replay, const GpuCatalog& catalog) {
  std::vector<StatusOr<JobSimResult>> results(policies.size(), InternalError("not run"));
  std::mutex mu;
  std::vector<double> progress(policies.size(), 0.0);
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto report = [&](size_t i, double f) {
    std::lock_guard<std::mutex> lock(mu);
    const int before = static_cast<int>(progress[i] * 10);
    progress[i] = f;
    if (o.quiet) {
      return;
    }
    if (tty) {
      std::string line = "\r";
      for (size_t k = 0; k < policies.size(); ++k) {
        line +=
            policies[k].name + " " + std::to_string(static_cast<int>(progress[k] * 100)) + "%  ";
      }
      std::fputs(line.c_str(), stderr);
    } else if (static_cast<int>(f * 10) != before) {
      std::fprintf(stderr, "  %s: %d%% of jobs finished\n", policies[i].name.c_str(),
                   static_cast<int>(f * 100));
    }
  };
  ParallelFor(o, policies.size(), [&](size_t i) {
    JobSimOptions options;
    options.policy = policies[i];
    options.placement = o.placement;
    options.seed = o.seed;
    options.progress = [&report, i](double f) { report(i, f); };
    results[i] =
        RunJobSimulation(replay.setup.nodes, replay.setup.queues, replay.jobs, options, catalog);
    report(i, 1.0);
  });
  if (tty && !o.quiet) {
    std::fputs("\n", stderr);
  }
  return results;
}

// The reference of finish-time fairness (sim/job_report.h, TenantRho): each tenant with
// a nominal quota alone on a cluster of its quota, i.e. its jobs only, on the first
// whole nodes of the cluster that hold its nominal GPUs, under the same queue tree
// with no borrowing (so confined to the quota when the nodes hold more) and the same
// policy: what the tenant would get from a private cluster of its quota. Returns per
// policy the runs alone, one per such tenant; none when jobs depend on others (a
// tenant's jobs alone would lose what they wait for).
StatusOr<std::vector<std::vector<JobRun>>> RunAlone(const JobsOptions& o,
                                                    const std::vector<SchedulerPolicy>& policies,
                                                    const Replay& replay,
                                                    const std::vector<JobRun>& shared,
                                                    const GpuCatalog& catalog) {
  std::vector<std::vector<JobRun>> alone(policies.size());
  if (shared.empty()) {
    return alone;
  }
  std::map<std::string, std::string> tenant_of;  // job name -> tenant (its queue's)
  for (const JobOutcome& j : shared.front().jobs) {
    // Runs are matched by job name: a name twice would pair the wrong jobs.
    if (!tenant_of.emplace(j.name, j.tenant).second) {
      return alone;
    }
  }
  std::vector<std::vector<SimJob>> subsets;       // per tenant with a quota, its jobs
  std::vector<std::vector<NodeSpec>> partitions;  // and its nodes
  for (size_t t = 0; t < shared.front().tenants.size(); ++t) {
    const int64_t quota_milli = shared.front().tenant_quota_milli[t];
    if (quota_milli <= 0) {
      continue;
    }
    std::vector<NodeSpec>& nodes = partitions.emplace_back();
    for (int64_t milli = 0; milli < quota_milli && nodes.size() < replay.setup.nodes.size();) {
      nodes.push_back(replay.setup.nodes[nodes.size()]);
      milli += 1000 * static_cast<int64_t>(nodes.back().gpus.size());
    }
    std::vector<SimJob>& jobs = subsets.emplace_back();
    for (const SimJob& j : replay.jobs) {
      if (!j.dependency.items.empty()) {
        return alone;
      }
      if (tenant_of[j.spec.name] == shared.front().tenants[t]) {
        jobs.push_back(j);
      }
    }
  }
  std::vector<StatusOr<JobSimResult>> results(policies.size() * subsets.size(),
                                              InternalError("not run"));
  ParallelFor(o, results.size(), [&](size_t k) {
    JobSimOptions options;
    options.policy = policies[k / subsets.size()];
    options.policy.options.borrowing = false;
    options.placement = o.placement;
    options.seed = o.seed;
    options.record_usage = false;
    results[k] = RunJobSimulation(partitions[k % subsets.size()], replay.setup.queues,
                                  subsets[k % subsets.size()], options, catalog);
  });
  for (size_t k = 0; k < results.size(); ++k) {
    if (!results[k].ok()) {
      return results[k].status();
    }
    alone[k / subsets.size()].push_back(std::move(results[k].value().run));
  }
  return alone;
}

// The default policies' fingerprint (sim/policy_fingerprint.h) under sim jobs' own
// defaults, whatever else the command line says: the stamp of a policy matrix.
Status PrintDefaults(const GpuCatalog& catalog) {
  const JobsOptions defaults;
  DefaultSimModel model;
  model.placement = defaults.placement;
  TESSERA_ASSIGN_OR_RETURN(model.restart_overhead,
                           FlagDuration("--restart-overhead", defaults.restart_overhead));
  TESSERA_ASSIGN_OR_RETURN(model.checkpoint_wait,
                           FlagDuration("--checkpoint-wait", defaults.checkpoint_wait));
  model.checkpoint_interval = static_cast<Micros>(defaults.checkpoint_minutes * 60e6);
  model.checkpoint_on_signal = defaults.checkpoint_on_signal;
  TESSERA_ASSIGN_OR_RETURN(PolicyFingerprint f, DefaultPolicyFingerprint(model, catalog));
  nlohmann::ordered_json out = {{"fingerprint", f.fingerprint},
                                {"options_hash", f.options_hash},
                                {"probe_hash", f.probe_hash},
                                {"options", f.options}};
  std::cout << out.dump(2) << std::endl;
  return Status::Ok();
}

// The summary, the plots and (with --per-job) the per-job CSVs under --out; the summary
// also on stdout.
Status WriteResults(const JobsOptions& o, const std::vector<JobSummary>& rows,
                    const std::vector<JobRun>& runs) {
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    return UnavailableError("cannot create '" + o.out + "': " + ec.message());
  }
  const std::filesystem::path dir(o.out);
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "summary.txt", JobSummaryTable(rows)));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "summary.json", JobSummaryJson(rows) + "\n"));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "jct_cdf.svg", JctCdfSvg(runs)));
  for (const JobRun& run : runs) {
    TESSERA_RETURN_IF_ERROR(
        WriteTextFile(dir / ("usage_" + run.policy + ".svg"), TenantUsageSvg(run)));
    if (o.per_job) {
      TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / ("jobs_" + run.policy + ".csv"), PerJobCsv(run)));
    }
  }
  if (o.json) {
    std::cout << JobSummaryJson(rows) << std::endl;
  } else {
    std::cout << JobSummaryTable(rows) << "\nresults in " << dir.string() << "/\n";
  }
  return Status::Ok();
}

Status Run(const JobsOptions& o) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  if (o.print_defaults) {
    return PrintDefaults(catalog);
  }
  if (o.trace.empty()) {
    return InvalidArgumentError("--trace is required");
  }
  const std::string traces_dir = o.traces_dir.empty() ? DefaultTracesDir() : o.traces_dir;
  TESSERA_ASSIGN_OR_RETURN(std::vector<SchedulerPolicy> policies, ParsePolicies(o.policies));
  TESSERA_ASSIGN_OR_RETURN(Micros overhead,
                           FlagDuration("--restart-overhead", o.restart_overhead));
  TESSERA_ASSIGN_OR_RETURN(Micros wait, FlagDuration("--checkpoint-wait", o.checkpoint_wait));
  // The same preemption model for every policy: what a preemption costs and how long
  // a victim may run on to its next checkpoint are the cluster's, not a policy's.
  for (SchedulerPolicy& p : policies) {
    p.options.restart_overhead = overhead;
    p.options.checkpoint_wait = wait;
  }
  if (o.load < 0 || o.load > 10) {
    return InvalidArgumentError("--load must be in (0, 10] (0: the trace's own timing)");
  }
  if (o.checkpoint_minutes < 0) {
    return InvalidArgumentError("--checkpoint-minutes must be >= 0");
  }
  TESSERA_ASSIGN_OR_RETURN(Replay replay, LoadReplay(o, traces_dir, catalog, policies.size()));
  std::vector<StatusOr<JobSimResult>> results = RunPolicies(o, policies, replay, catalog);

  std::vector<JobSummary> rows;
  std::vector<JobRun> runs;
  for (size_t i = 0; i < policies.size(); ++i) {
    if (!results[i].ok()) {
      return results[i].status();
    }
    JobSimResult& r = results[i].value();
    r.run.trace = replay.trace.name;
    for (const std::string& v : r.violations) {
      std::fprintf(stderr, "quota violation under %s: %s\n", policies[i].name.c_str(), v.c_str());
    }
    rows.push_back(Summarize(r.run));
    runs.push_back(std::move(r.run));
  }
  if (!o.no_rho) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::vector<JobRun>> alone,
                             RunAlone(o, policies, replay, runs, catalog));
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].rho = FinishTimeFairness(runs[i], alone[i]);
    }
  }
  return WriteResults(o, rows, runs);
}

}  // namespace

void AddSimJobsCommand(CLI::App& sim, int* exit_code) {
  auto opts = std::make_shared<JobsOptions>();
  CLI::App* cmd = sim.add_subcommand(
      "jobs", "Replay a job trace under scheduling policies (quotas, fair share, preemption)");
  cmd->add_option("--trace", opts->trace,
                  "philly:PATH, tiresias:PATH, pollux:PATH (a bare PATH is Philly), or "
                  "synthetic[:jobs=N,seed=S,gpus=1:70/8:30,median=30m,sigma=1.5,max=7d,"
                  "tenants=N,tenant_weights=10/1]; required but with --print-defaults");
  cmd->add_option(
         "--cluster", opts->cluster,
         "philly-vc (Philly's virtual clusters as quotas) or NxGxMODEL, e.g. 64x8xH100-80GB")
      ->capture_default_str();
  cmd->add_option("--queues", opts->queues, "queue tree YAML replacing the preset's queues")
      ->check(CLI::ExistingFile);
  cmd->add_option("--policy", opts->policies,
                  "comma-separated policies: presets fifo, fifo-strict, static-vc, priority, "
                  "fairshare, drf, slurm, tiresias, srtf, tessera, or combinations such as "
                  "fairshare+fifo+reclaim+backfill")
      ->capture_default_str();
  cmd->add_option("--placement", opts->placement,
                  "task placement for every policy: " + Join(PolicyNames(), ", ") +
                      " (tessera and fgd learn the workload's typical tasks from the "
                      "jobs submitted, as the live controller does)")
      ->check(CLI::IsMember(PolicyNames()))
      ->capture_default_str();
  cmd->add_option("--load", opts->load,
                  "compress arrivals to this offered load (GPU demand / capacity); default: the "
                  "trace's own timing");
  cmd->add_option("--limit", opts->limit, "replay only the first N jobs");
  cmd->add_option("--every", opts->every,
                  "replay every N-th job of the trace (a smaller sample of the same mix; "
                  "before --limit)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd->add_option("--seed", opts->seed, "seed for tie-breaks and users' runtime limits")
      ->capture_default_str();
  cmd->add_option("--checkpoint-minutes", opts->checkpoint_minutes,
                  "jobs checkpoint every this many minutes of progress (0: never)")
      ->capture_default_str();
  cmd->add_flag("--checkpoint-on-signal", opts->checkpoint_on_signal,
                "jobs save their progress when preempted (within the grace period)");
  cmd->add_flag("--gpus-anywhere", opts->gpus_anywhere,
                "a job's GPUs may lie on any nodes (one task per GPU), as the Tiresias "
                "simulator counts GPUs without placing them");
  cmd->add_option("--restart-overhead", opts->restart_overhead,
                  "GPU time every resumption after a preemption spends before progress "
                  "(restoring the checkpoint), for every policy")
      ->capture_default_str();
  cmd->add_option("--checkpoint-wait", opts->checkpoint_wait,
                  "for every policy, a victim whose next periodic checkpoint comes within this "
                  "time is evicted right after it; others after the 30 s grace (0: always "
                  "after the grace)")
      ->capture_default_str();
  cmd->add_option("--traces-dir", opts->traces_dir,
                  "where the public traces are (default: $TESSERA_TRACES_DIR, else "
                  "../share/tessera/traces beside this binary, else the source tree's "
                  "data/traces)");
  cmd->add_option("--out", opts->out, "output directory")->capture_default_str();
  cmd->add_option("--jobs,-j", opts->threads, "worker threads (default: one per core)");
  cmd->add_flag("--json", opts->json, "print the summary as one JSON object on stdout");
  cmd->add_flag("--quiet,-q", opts->quiet, "no progress on stderr");
  cmd->add_flag("--per-job", opts->per_job, "also write each job's outcome, jobs_<policy>.csv");
  cmd->add_flag("--no-rho", opts->no_rho,
                "skip finish-time fairness (rho): the runs of each tenant with a quota alone "
                "on it, under each policy");
  cmd->add_flag("--print-defaults", opts->print_defaults,
                "print the default policies' options and fingerprint as JSON (the stamp of a "
                "policy matrix) and exit");
  for (const char* name : {"--policy", "--out", "--trace", "--cluster"}) {
    cmd->get_option(name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  cmd->callback([opts, exit_code]() {
    Status s = Run(*opts);
    if (!s.ok()) {
      std::cerr << "tessera sim jobs: " << s.ToString() << std::endl;
      *exit_code =
          s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
    }
  });
}

}  // namespace tessera
