#include "server/modules/restarts_module.h"

#include <string>
#include <string_view>

#include "server/views/job_json.h"

namespace tessera {

uint64_t RestartsModule::counted(RestartOn cause) const {
  auto it = counted_.find(cause);
  return it != counted_.end() ? it->second : 0;
}

void RestartsModule::OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                                    nlohmann::json& stored_attempt, const ModuleStep& step) {
  if (!ended.requeued) {
    return;
  }
  // What the cause's name alone does not say: which GPU failed, what the idle policy saw.
  if (ended.cause == RequeueCause::kGpuFault || ended.cause == RequeueCause::kIdle) {
    const std::string_view prefix =
        ended.cause == RequeueCause::kGpuFault ? "requeued: gpu-fault: " : "requeued: idle: ";
    const std::string& reason = step.Reason(job.id);
    if (reason.rfind(prefix, 0) == 0) {
      stored_attempt["detail"] = reason.substr(prefix.size());
    } else if (reason.rfind("requeued: ", 0) == 0) {
      stored_attempt["detail"] = reason.substr(10);
    }
  }
  if (ended.counted) {
    ++counted_[*ended.counted];
  }
}

void RestartsModule::DescribeJob(const JobFacts& job, nlohmann::json& out) const {
  const int used = job.record != nullptr ? job.record->attempt.restarts : job.stored_restarts;
  out["restart"] = RestartJson(job.submission.restart, used, job.held_until);
}

void RestartsModule::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  (void)step;
  w.Family("tessera_job_restarts_total", MetricType::kCounter,
           "Restarts counted by jobs' restart policies, by cause (failure, node-lost, "
           "gpu-fault), since the controller started.");
  for (RestartOn cause : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
    w.Sample({{"cause", std::string(RestartOnName(cause))}}, static_cast<double>(counted(cause)));
  }
}

}  // namespace tessera
