// Accounting: GPU usage accounting, the GPU-seconds each tenant's jobs held and the
// intervals the usage API adds up.
//
// Owns: each tenant's GPU-seconds of ended intervals, all time (from the stored usage at
// Open, then each interval as it ends). The usage API's intervals of the running jobs
// are worked out on request (RunningIntervals); the sums over them are
// modules/usage_report.h's (pure).
// Hooks: OnStoredUsage (the stored intervals' GPU-seconds per tenant), OnIntervalEnded (an ended
// interval counted for its tenant), WriteMetrics (tessera_tenant_gpus_in_use,
// tessera_tenant_gpu_seconds_total).
// Invariants: a tenant's GPU-seconds only grow, and are the stored intervals' held
// GPU-seconds (gpu_milli x length), whether or not their use was measured; what
// /metrics reports adds each running job's interval from its start up to the step's
// now; every tenant the queue configuration names has a series in both families (zeros
// when it held nothing), as does every tenant that ever held a GPU.
// Thread safety: none; the controller calls it with its core lock held. The usage API's
// reads (ClusterViews::Usage, UsageSeries) read the store's intervals without that lock
// and take it only for RunningIntervals.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "server/modules/controller_module.h"

namespace tessera {

class Accounting final : public ControllerModule {
 public:
  void OnStoredUsage(const std::vector<UsageRow>& rows) override;
  void OnIntervalEnded(const UsageRow& row) override;
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override;

  // The intervals of the running jobs that overlap [since, until), each from its
  // attempt's start up to step.now(), as the store keeps ended ones (what the other
  // modules measured filled in by the step), appended to `rows`.
  static void RunningIntervals(const ModuleStep& step, Micros since, Micros until,
                               std::vector<UsageRow>& rows);

  // A tenant's GPU-seconds of ended intervals, all time (0 for one never seen).
  double TenantGpuSeconds(const std::string& tenant) const;

 private:
  std::map<std::string, double> tenant_gpu_seconds_;  // ended intervals, all time
};

}  // namespace tessera
