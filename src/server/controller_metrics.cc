// What the controller tells Prometheus (/metrics, /metrics/gpus) and the dashboard's
// usage charts (UsageSeries): the figures gathered under the core lock, written by the
// views (views/metrics_views.h).
#include "server/controller.h"
#include "server/modules/usage_report.h"
#include "server/views/metrics_views.h"

namespace tessera {

std::string Controller::Metrics() {
  MutexLock lock(mu_);
  MetricsWriter w;
  // Jobs per queue and state.
  std::map<std::pair<std::string, std::string>, int64_t> jobs;  // (queue, state)
  for (const auto& [id, job] : jobs_.all()) {
    const JobPhase phase = jobs_.Rec(job).phase;
    if (job.durable && phase != JobPhase::kFinished) {
      ++jobs[{job.row.queue, phase == JobPhase::kPending ? "pending" : "running"}];
    }
  }
  WriteJobMetrics(w, core_.tree(), jobs, counters_);
  const WorkloadLearner& learner = core_.learner();
  WriteSchedulerMetrics(
      w, counters_,
      SchedulerFigures{core_.rebuilds(), learner.observed(), learner.models_made(),
                       learner.model() == nullptr ? 0 : learner.model()->workload().tasks.size()});
  const bool built = !core_.rebuild_pending();
  WriteQuotaMetrics(w, core_.tree(), built ? core_.quota() : nullptr, *catalog_);
  WriteNodeMetrics(w, nodes_.all(), built ? core_.state() : nullptr);
  ModulesWriteMetrics(clock_->NowMicros(), w);  // Accounting's per-tenant GPU families first
  return w.Take();
}

std::string Controller::GpuMetrics() {
  MutexLock lock(mu_);
  return GpuMetricsText(nodes_.all(), GpuHolders(), *catalog_);
}

StatusOr<nlohmann::json> Controller::UsageSeries(Micros since, Micros until, Micros step,
                                                 const std::string& tenant) {
  TESSERA_RETURN_IF_ERROR(CheckUsageSeriesQuery(since, until, step));
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  std::map<std::string, double> quota_gpus;
  {  // the store is read above, without mu_
    MutexLock lock(mu_);
    const std::unique_ptr<ModuleStep> s = LockedStep(clock_->NowMicros(), nullptr);
    Accounting::RunningIntervals(*s, since, until, rows);
    quota_gpus = s->TenantQuotaGpus();
  }
  return ::tessera::UsageSeries(rows, since, until, step, tenant, quota_gpus);
}

}  // namespace tessera
