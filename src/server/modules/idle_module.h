// IdleModule: idle and hung jobs, and how much of their GPUs jobs use.
//
// Owns: the IdleWatch of every running job (sched/idle_watch.h, whose verdicts the
// simulator shares), each queue's idle policy read from the queue configuration
// (api/queue_idle.h), and each tenant's utilisation-weighted GPU-seconds.
// Hooks: OnStoredUsage (the tenants' used GPU-seconds from the stored usage), BeforeCycle
// (at each instant of the sample grid, IdleSampleAfter: samples, flags and the queue's action), OnOutput (output
// silence marks a hang), OnUsage (what an interval used), DescribeJob, DescribeQueue,
// WriteMetrics.
// Invariants: a job's sample is the grant-weighted mean over its GPUs from its nodes'
// last telemetry, and there is none when one of its nodes has no fresh telemetry or it
// holds a MIG instance (NVML measures none); a queue's action (requeue, cancel) is
// asked of the attempt machine once per flag; a job no longer running is forgotten at
// the next sample.
// Thread safety: none; the controller calls it with its core lock held.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "api/queue_idle.h"
#include "server/modules/controller_module.h"
#include "sched/idle_watch.h"

namespace tessera {

class IdleModule final : public ControllerModule {
 public:
  void OnStoredUsage(const std::vector<UsageRow>& rows) override;
  void BeforeCycle(ModuleStep& step) override;
  void OnOutput(JobNumber job, Micros now) override { watch_.Output(job.value(), now); }
  void OnUsage(UsageRow& row, int attempt, bool ended) override;
  void DescribeJob(const JobFacts& job, nlohmann::json& out) const override;
  void DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                     nlohmann::json& out) override;
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override;

  // The job's GPU utilisation now (0..100) from its nodes' last telemetry; none
  // without (see the invariants above).
  static std::optional<double> UtilisationNow(const ModuleStep& step, const JobFacts& job);
  const IdleWatch& watch() const { return watch_; }

 private:
  const IdlePolicy& PolicyOf(const std::string& queue) const;
  void RefreshPolicies(const std::string& queues_yaml);
  // What attempt `attempt` of `job` used of `gpu_milli` so far; -1: not measured.
  int64_t UsedGpuMilli(uint64_t job, int attempt, int64_t gpu_milli) const;

  IdleWatch watch_;
  std::string policies_yaml_;  // the queue configuration the policies were read from
  std::map<std::string, IdlePolicy> policies_;  // by queue
  Micros next_check_ = 0;
  // Utilisation-weighted GPU-seconds of ended intervals per tenant (from the store).
  std::map<std::string, double> tenant_used_seconds_;
};

}  // namespace tessera
