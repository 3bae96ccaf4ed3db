// Finish-time fairness (job_report.h): each tenant's JCT under a policy against its JCT
// alone on its quota.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sim/job_report.h"

namespace tessera {
namespace {

double FairnessSeconds(Micros t) { return static_cast<double>(t) / 1e6; }

// The run's submission span in seconds: first to last submission of any tenant.
double SubmissionSpanSeconds(const JobRun& run) {
  if (run.jobs.empty()) {
    return 0;
  }
  Micros first = run.jobs.front().submit;
  Micros last = first;
  for (const JobOutcome& job : run.jobs) {
    first = std::min(first, job.submit);
    last = std::max(last, job.submit);
  }
  return FairnessSeconds(last - first);
}

}  // namespace

std::vector<TenantRho> FinishTimeFairness(const JobRun& shared, const std::vector<JobRun>& alone) {
  std::map<std::string, Micros> alone_jct;  // job name -> JCT alone, finished jobs only
  for (const JobRun& run : alone) {
    for (const JobOutcome& job : run.jobs) {
      if (job.finish >= 0) {
        alone_jct[job.name] = job.finish - job.submit;
      }
    }
  }
  const double span_s = SubmissionSpanSeconds(shared);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<TenantRho> out;
  for (size_t t = 0; t < shared.tenants.size(); ++t) {
    const int64_t quota = t < shared.tenant_quota_milli.size() ? shared.tenant_quota_milli[t] : 0;
    if (quota <= 0) {
      continue;
    }
    TenantRho r;
    r.tenant = shared.tenants[t];
    r.quota_gpus = static_cast<double>(quota) / 1000;
    double gpu_seconds = 0;
    double jct_sum = 0;
    double alone_sum = 0;
    for (const JobOutcome& job : shared.jobs) {
      if (job.tenant != r.tenant) {
        continue;
      }
      gpu_seconds += job.gpus * FairnessSeconds(job.actual);
      auto it = alone_jct.find(job.name);
      if (it == alone_jct.end()) {
        continue;
      }
      ++r.jobs;
      alone_sum += FairnessSeconds(it->second);
      // A job the policy never finished is infinitely late: no average may hide it.
      const double jct = job.finish >= 0 ? FairnessSeconds(job.finish - job.submit) : kInf;
      jct_sum += jct;
      r.jobs_over_1 += job.finish < 0 || job.finish - job.submit > it->second ? 1 : 0;
    }
    if (r.jobs == 0) {
      continue;
    }
    r.demand_gpus = span_s > 0 ? gpu_seconds / span_s : kInf;
    r.within_quota = r.demand_gpus <= r.quota_gpus;
    r.avg_jct_s = jct_sum / static_cast<double>(r.jobs);
    r.alone_avg_jct_s = alone_sum / static_cast<double>(r.jobs);
    // Jobs that take no time alone and none shared are no slowdown.
    r.rho = alone_sum > 0 ? jct_sum / alone_sum : (jct_sum > 0 ? kInf : 1.0);
    out.push_back(std::move(r));
  }
  return out;
}

double MaxRho(const std::vector<TenantRho>& rho) {
  double max = 0;
  for (const TenantRho& r : rho) {
    max = std::max(max, r.rho);
  }
  return max;
}

}  // namespace tessera
