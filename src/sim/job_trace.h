// Job traces for the job-level simulator: Philly, Tiresias and Pollux/Sia workloads.
//
// Every reader returns jobs sorted by submission time (stable: file order breaks
// ties), with times in microseconds relative to the first submission. Errors name
// the file and line. Thread safety: functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace tessera {

struct TraceJob {
  std::string name;         // the trace's id, else "<trace>-<line>"
  Micros submit = 0;        // since the trace's first submission
  Micros duration = 0;      // run time on its GPUs when never interrupted (> 0)
  int gpus = 0;             // total GPUs of the job (>= 1)
  std::string tenant;       // virtual cluster / team; "" when the trace has none
  std::string application;  // model name when the trace has one
};

struct JobTrace {
  std::string name;  // e.g. "philly"
  std::vector<TraceJob> jobs;
  int skipped = 0;   // rows dropped (zero duration or zero GPUs), reported to the user
};

// Sia's philly.csv: timestamp("YYYY-MM-DD HH:MM:SS"),duration(s),num_gpus,gpu_time,cluster.
// Blank lines are ignored; rows with zero GPUs or zero duration are skipped and counted.
StatusOr<JobTrace> ReadPhillyTrace(const std::string& path);

// Tiresias' 60_job.csv: job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
StatusOr<JobTrace> ReadTiresiasTrace(const std::string& path);

// Pollux/Sia workload-N.csv: name,time,application,num_replicas,batch_size. The
// duration is derived from the application's profiles in `profiles_dir` (Sia's
// traces/<application>/): iterations to the end of validation-<batch>.csv (nearest
// batch size) times the step plus sync time of scalability.csv at the nearest
// (replicas, local batch) point. One GPU per replica.
StatusOr<JobTrace> ReadPolluxWorkload(const std::string& path, const std::string& profiles_dir);

// A seeded synthetic trace (synthetic_trace.cc) from "KEY=VALUE,..." (each optional):
//   jobs=1000      how many jobs (1 to 1,000,000)
//   seed=1         the generator's seed: the same seed gives the same trace
//   gpus=1:70/2:10/4:10/8:10   GPUs per job and their relative weights
//   median=30m     the median duration; durations are log-normal around it
//   sigma=1.5      the log-normal's shape (0: every job the median; 0 to 5)
//   max=7d         durations are clipped to [1s, max]
//   tenants=0      jobs spread uniformly over tenants t0..tN-1 (0: no tenant)
//   arrival=poisson  or batch: the same jobs, all submitted at 0
//   tenant_weights=10/1  jobs spread over t0, t1, ... in these proportions (sets tenants)
// Submissions are Poisson, one a minute on average; `--load` rescales them.
StatusOr<JobTrace> MakeSyntheticTrace(std::string_view params);

// "philly:PATH", "tiresias:PATH", "pollux:PATH" (the profiles are looked up in
// `traces_dir`/sia/traces) or "synthetic:PARAMS" (above; "synthetic" alone takes the
// defaults). A bare PATH is read as Philly.
StatusOr<JobTrace> ReadJobTrace(std::string_view spec, const std::string& traces_dir);

// GPU-seconds demanded over (cluster GPUs x the submission span, first to last).
double OfferedLoad(const JobTrace& trace, int64_t cluster_gpus);

// Scales submission times by a constant factor so that OfferedLoad becomes
// `target_load` (> 0); durations are unchanged. Returns the factor applied.
double ScaleToLoad(JobTrace* trace, int64_t cluster_gpus, double target_load);

}  // namespace tessera
