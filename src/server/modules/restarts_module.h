// RestartsModule: the controller's restart bookkeeping as a module
// (modules/controller_module.h). Which ends of an attempt restart a job, how many times
// and after what backoff is the core's attempt machine's (sched/attempt_machine.h, the
// policy in model/restart_policy.h); a backoff is the lifecycle's hold; the count and
// backoff stored with each ended attempt, and put back into the core's records at Open,
// are the core's too. This module owns what is shown of them:
//   - the restarts counted since the controller started, by cause (the policy's `on`),
//     written as tessera_job_restarts_total{cause};
//   - the detail a requeued attempt's stored record gets from the job's reason (which GPU
//     failed, what the idle policy saw), which the cause's name alone does not say;
//   - the job view's "restart" block (views/job_json.h RestartJson): the policy (the
//     job's own, else the default), the restarts used and left, and when a backoff ends.
//
// Hooks: OnAttemptEnded (a requeued attempt: its detail; the restart its policy counted),
// DescribeJob (the "restart" block), WriteMetrics (the family).
//
// Invariants: counts only grow and are not durable (they start at 0 with the controller,
// as the family's help says); a restart is counted once, when the attempt it follows ends
// (the hook runs once per ended attempt); every cause is written, 0 until counted. The
// block's `used` is the core's count (the record's, or the last stored attempt's for a
// job read back from the store), never one the module keeps.
// Thread safety: none; the controller calls it with its core lock held.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>

#include "model/restart_policy.h"
#include "server/modules/controller_module.h"

namespace tessera {

class RestartsModule final : public ControllerModule {
 public:
  // Restarts counted since the controller started against `cause`.
  uint64_t counted(RestartOn cause) const;

  // The hooks.
  void OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                      nlohmann::json& stored_attempt, const ModuleStep& step) override;
  void DescribeJob(const JobFacts& job, nlohmann::json& out) const override;
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override;

 private:
  std::map<RestartOn, uint64_t> counted_;
};

}  // namespace tessera
