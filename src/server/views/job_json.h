// A job's JSON (GET /v1/jobs/{id}, listings, the published views), from typed inputs the
// core gathers under its lock: the job as the table holds it, its core record, the nodes
// its tasks run on, who it runs as, where its checkpoints go, what its feature modules
// describe (ControllerModule::DescribeJob) and its reason. The view PublishedJobs
// publishes of it (JobViewOf), and what a submission answers (SubmittedJson).
//
// A view: it owns nothing and changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "model/gpu_catalog.h"
#include "model/restart_policy.h"
#include "sched/job_record.h"
#include "server/job_state.h"
#include "server/job_table.h"
#include "server/job_views.h"
#include "server/node_registry.h"
#include "server/services/job_intake.h"

namespace tessera {

struct JobJsonInputs {
  const LiveJob& job;
  // Its core record; null for an archived job (it holds nothing and predicts nothing).
  const JobRecord* rec;
  JobState state;
  const std::map<std::string, NodeInfo>& nodes;  // the tasks' GPUs' models and UUIDs
  const GpuCatalog& catalog;
  std::string checkpoint_dir;
  std::optional<std::pair<int64_t, int64_t>> run_as;  // the tenant's uid:gid, once known
  // Adds the feature modules' members (ControllerModule::DescribeJob).
  std::function<void(nlohmann::json&)> describe = nullptr;
  std::function<std::string()> reason = nullptr;  // the job's reason; null: "reason" left out
  // "spec": the stored text, parsed for this answer only (null when it is not JSON);
  // false: left out (listings splice the text in).
  bool with_spec = false;
};

nlohmann::json JobJson(const JobJsonInputs& in);

// The view PublishedJobs publishes of `job` in `state` (job_views.h): `json`, its JobJson
// without "spec" and "reason", as the body, and the stored spec text when it is JSON
// (checked once per job: LiveJob::spec_text_ok). The reason is left to FillJobReason.
JobView JobViewOf(const LiveJob& job, JobState state, const nlohmann::json& json);

// The job's "restart" block: its policy (`given`: the job's own, else the default), the
// restarts used, and when a backoff ends (0: none).
nlohmann::json RestartJson(const std::optional<RestartPolicy>& given, int used,
                           Micros restart_at);

// A submission's answer (POST /v1/jobs, /v1/jobs/batch): one job's view; an array's
// {"ids", "id", "array_job"} (the last two its first element); a batch's {"ids"}. By
// value: a job's view is moved out, not copied.
nlohmann::json SubmittedJson(JobIntake::Submitted submitted);

}  // namespace tessera
