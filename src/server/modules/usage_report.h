// Usage accounting: GPU-hours over a window and the GPUs each tenant held over time,
// added up from usage intervals (the store's finished intervals and the running jobs'
// open ones, which Accounting gathers: modules/accounting.h). An interval counts only
// for its part inside [since, until); a share or a MIG slice counts by its milli-GPU.
//
// The checks are separate from the sums so that a bad query is refused before any
// rows are read. Thread safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "store/store.h"

namespace tessera {

// InvalidArgument unless `by` is tenant, queue, job or user and the window is not empty.
Status CheckUsageQuery(Micros since, Micros until, std::string_view by);
// GPU-seconds of `milli` milli-GPUs over [from, to): held (gpu_milli) or used
// (used_gpu_milli), as accounting and the idle watch count them.
double GpuSeconds(int64_t milli, Micros from, Micros to);

// GET /v1/usage: per key of `by`, the GPU-hours and the number of distinct jobs, in key
// order (job ids by number), with "used_gpu_hours" (GPU-hours x measured utilisation)
// "measured_gpu_hours" (the GPU-hours of intervals whose utilisation was measured) and
// "efficiency" (used / measured GPU-hours; null when none was measured). `tenant` non-empty: only that tenant's rows.
nlohmann::json SumUsage(const std::vector<UsageRow>& rows, Micros since, Micros until,
                        std::string_view by, std::string_view tenant);

// Who a job belongs to: its tenant and the user inside it ("" when none).
struct JobOwner {
  std::string tenant, user;
};

// GET /v1/usage?by=user: SumUsage's rows by job (`by_job`, its answer for by=job) added
// up per (tenant, user) of `owners` (a job it lacks counts for its own tenant's user
// ""), in (tenant, user) order; each row's "key" is the user and "tenant" its tenant.
nlohmann::json UsageByUser(const nlohmann::json& by_job, const std::map<uint64_t, JobOwner>& owners);

// The most buckets a series may have.
inline constexpr int64_t kMaxUsageBuckets = 1000;

// InvalidArgument for an empty window, a step <= 0 or more than kMaxUsageBuckets.
Status CheckUsageSeriesQuery(Micros since, Micros until, Micros step);

// GET /v1/usage/series: per tenant, the average number of GPUs held in each bucket of
// `step` (the last one may be shorter), with its nominal GPU quota from `quota_gpus`
// (null for a tenant the queue configuration no longer names). Every tenant of
// `quota_gpus` has a series, zeros when it held nothing. `tenant` non-empty: only it.
nlohmann::json UsageSeries(const std::vector<UsageRow>& rows, Micros since, Micros until,
                           Micros step, std::string_view tenant,
                           const std::map<std::string, double>& quota_gpus);

}  // namespace tessera
