#include "server/modules/accounting.h"

#include <limits>
#include <set>

#include "server/modules/usage_report.h"

namespace tessera {

void Accounting::OnStoredUsage(const std::vector<UsageRow>& rows) {
  for (const UsageRow& u : rows) {
    tenant_gpu_seconds_[u.tenant] += GpuSeconds(u.gpu_milli, u.start_us, u.end_us);
  }
}

void Accounting::OnIntervalEnded(const UsageRow& row) {
  tenant_gpu_seconds_[row.tenant] += GpuSeconds(row.gpu_milli, row.start_us, row.end_us);
}

double Accounting::TenantGpuSeconds(const std::string& tenant) const {
  auto it = tenant_gpu_seconds_.find(tenant);
  return it != tenant_gpu_seconds_.end() ? it->second : 0.0;
}

void Accounting::RunningIntervals(const ModuleStep& step, Micros since, Micros until,
                                  std::vector<UsageRow>& rows) {
  const Micros now = step.now();
  step.ForEachRunningJob([&](const JobFacts& job) {
    const JobRecord& rec = *job.record;
    if (rec.run_start < until && now > since) {
      rows.push_back(UsageRow{job.id.value(), job.tenant, job.queue, rec.run_start, now,
                              rec.gpu_milli});
      step.FillUsage(rows.back(), job.attempt);
    }
  });
}

void Accounting::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  std::map<std::string, double> in_use;
  std::map<std::string, double> seconds = tenant_gpu_seconds_;
  const Micros now = step.now();
  step.ForEachRunningJob([&](const JobFacts& job) {
    const JobRecord& rec = *job.record;
    in_use[job.tenant] += static_cast<double>(rec.gpu_milli) / 1000.0;
    if (rec.run_start > 0 && now > rec.run_start) {
      seconds[job.tenant] += GpuSeconds(rec.gpu_milli, rec.run_start, now);
    }
  });
  std::set<std::string> tenants;
  for (const auto& [t, quota] : step.TenantQuotaGpus()) {
    tenants.insert(t);
  }
  for (const auto& [t, v] : in_use) {
    tenants.insert(t);
  }
  for (const auto& [t, v] : seconds) {
    tenants.insert(t);
  }
  w.Family("tessera_tenant_gpus_in_use", MetricType::kGauge,
           "GPUs held by each tenant's running jobs (shares and MIG slices by their fraction).");
  for (const std::string& t : tenants) {
    auto it = in_use.find(t);
    w.Sample({{"tenant", t}}, it != in_use.end() ? it->second : 0.0);
  }
  w.Family("tessera_tenant_gpu_seconds_total", MetricType::kCounter,
           "GPU-seconds used by each tenant, all time (from the state store), running jobs included.");
  for (const std::string& t : tenants) {
    auto it = seconds.find(t);
    w.Sample({{"tenant", t}}, it != seconds.end() ? it->second : 0.0);
  }
}

}  // namespace tessera
