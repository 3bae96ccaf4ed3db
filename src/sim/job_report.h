// Job simulator metrics and reports: the summary table, JSON, and SVG plots.
//
// A JobRun is what one policy produced on one trace; Summarize turns it into the
// figures the issue asks for. Fairness is Jain's index over tenants of a
// demand-normalised share: the GPU-seconds of service a tenant's jobs received
// divided by the GPU-seconds they spent in the system (service plus waiting,
// i.e. sum of gpus x JCT), so a tenant whose jobs never wait scores 1.
// Thread safety: functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"

namespace tessera {

struct JobOutcome {
  std::string name;
  std::string tenant;
  int gpus = 0;
  Micros submit = 0;
  Micros first_start = -1;  // -1: never started
  Micros finish = -1;       // -1: never finished (still queued when the run ended)
  Micros service = 0;       // time spent running, all attempts, lost work included
  int preemptions = 0;
  double lost_gpu_seconds = 0;  // work thrown away by requeues (since the last checkpoint)
  Micros predicted = 0;         // runtime predicted at first start; 0: none
  Micros actual = 0;            // uninterrupted runtime (the trace's duration)
  std::string end;              // "succeeded", "failed", "cancelled"; "" while unfinished
  int attempts = 0;             // starts
  int restarts = 0;             // restarts its restart policy counted
};

// Each tenant's allocated GPU milli over time: a step function, one sample per change.
struct UsageSample {
  Micros time = 0;
  std::vector<int64_t> gpu_milli;  // per tenant, same order as JobRun::tenants
};

struct JobRun {
  std::string policy;
  std::string trace;
  std::vector<JobOutcome> jobs;
  std::vector<std::string> tenants;
  std::vector<int64_t> tenant_quota_milli;  // nominal GPU quota per tenant (0: none)
  std::vector<UsageSample> usage;
  int64_t cluster_gpus = 0;
  int64_t quota_violations = 0;
  int64_t events = 0;
  double wall_seconds = 0;
};

// Finish-time fairness (Themis' rho) of one tenant with a nominal quota: its jobs'
// average JCT under the policy over their average JCT when the tenant runs alone on
// its quota: its jobs only, on a cluster of its nominal quota (whole nodes), under the
// same policy. That is what the quota promises, a private cluster of that size; the
// same policy on both sides, so that rho measures what sharing costs the tenant and
// not how the policy orders its jobs (against FIFO alone, an ordering that beats FIFO
// would hide a tenant's loss to the others).
struct TenantRho {
  std::string tenant;
  double quota_gpus = 0;
  // The tenant's GPU-seconds of work over the run's submission span (first to last
  // submission of any tenant): the GPUs it asks for on average.
  double demand_gpus = 0;
  // demand_gpus <= quota_gpus, the span not empty: the quota covers what it asks for,
  // so rho above 1 is a promise broken.
  bool within_quota = false;
  int64_t jobs = 0;            // its jobs that finished alone: those compared
  double avg_jct_s = 0;        // under the policy; infinity if one never finished
  double alone_avg_jct_s = 0;  // alone on its quota
  double rho = 0;              // avg_jct_s / alone_avg_jct_s; infinity as above
  int64_t jobs_over_1 = 0;     // compared jobs with a JCT longer than alone
};

// rho for every tenant of `shared` with a nominal quota and a job that finished in
// `alone` (the runs alone on its quota, any number, jobs matched by name; a job that
// finished in none is not compared). Tenants in `shared`'s order.
std::vector<TenantRho> FinishTimeFairness(const JobRun& shared, const std::vector<JobRun>& alone);
// The largest rho; 0 when none.
double MaxRho(const std::vector<TenantRho>& rho);

struct JobSummary {
  std::string policy;
  int64_t jobs = 0;           // finished jobs
  int64_t unfinished = 0;     // jobs that never finished
  int64_t never_started = 0;  // of those, jobs that never started
  double avg_jct_s = 0, median_jct_s = 0, p95_jct_s = 0, p99_jct_s = 0;
  double avg_wait_s = 0, median_wait_s = 0, p99_wait_s = 0;  // submit to first start
  double makespan_s = 0;      // first submit to last finish
  double utilization = 0;     // busy GPU-seconds / (cluster GPUs x makespan)
  double jain = 0;
  // Per tenant with a quota, when the runs alone on the quotas were made (empty: not).
  std::vector<TenantRho> rho;
  int64_t preemptions = 0;
  double lost_gpu_hours = 0;
  int64_t quota_violations = 0;
  // Predictor error over started jobs with a prediction: median of
  // |log2(predicted / actual)| and the fraction predicted too short.
  double predictor_median_abs_log2_error = 0;
  double predictor_underestimate_fraction = 0;
  int64_t events = 0;
  double events_per_second = 0;
  double wall_seconds = 0;
};

JobSummary Summarize(const JobRun& run);
// Nearest-rank percentile (p in [0, 100]) of unsorted values; 0 when empty.
double Percentile(std::vector<double> values, double p);
double JainIndex(const std::vector<double>& shares);

// A fixed-width text table, one row per policy.
std::string JobSummaryTable(const std::vector<JobSummary>& rows);
// {"summary": [{"policy": ..., "jobs": ..., "avg_jct_s": ..., ...}, ...]}
std::string JobSummaryJson(const std::vector<JobSummary>& rows);
// CDF of JCT per policy, log-scale x axis (seconds).
std::string JctCdfSvg(const std::vector<JobRun>& runs);
// One panel per tenant with a quota: usage over time (GPUs) against the quota line.
std::string TenantUsageSvg(const JobRun& run);

}  // namespace tessera
