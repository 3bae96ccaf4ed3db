// `tessera show`: run time of the current attempt, the total over attempts, and the
// table of attempts, from a job's JSON (GET /v1/jobs/{id}: attempt_start_time,
// attempt_history, ended_attempts_run_seconds; server/job_attempts.h). A controller
// that sends none of these gets the old reading (from the first start).
// Thread safety: functions, no shared state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"

namespace tessera {

// The current attempt's run time ("5m3s"); for a job that ended, its last attempt's;
// "-" while pending.
std::string AttemptRunTime(const nlohmann::json& job, Micros now);

// Run time over all attempts, the current one included; "-" when it never ran.
std::string TotalRunTime(const nlohmann::json& job, Micros now);

// The current attempt's run time, and after a requeue the total too:
// "1m40s (6m10s over 2 attempts)".
std::string RunTimeWithTotal(const nlohmann::json& job, Micros now);

// "Attempt history:\n" and one row per attempt (the running one last), or "" when the job
// never ran:
//   #  START  END  RUN  NODES  GPUS  ENDED
std::string AttemptsTable(const nlohmann::json& job, Micros now);

}  // namespace tessera
