// A job's JSON (views/job_json.h).
#include "server/views/job_json.h"

#include <algorithm>

#include "base/time_format.h"
#include "server/job_rows.h"
#include "server/job_attempts.h"

namespace tessera {
namespace {

using job_rows::RunAsJson;
using job_rows::TimeOrNull;

nlohmann::json GrantsJson(const Allocation& a, const NodeInventory& inv, const GpuCatalog& catalog) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuGrant& g : a.gpus) {
    const size_t gi = static_cast<size_t>(g.gpu);
    nlohmann::json gpu = {{"index", g.gpu}, {"milli", g.milli.value()}, {"mig_profile", nullptr}};
    if (gi < inv.spec.gpus.size()) {
      const GpuModel& model = catalog.Get(inv.spec.gpus[gi].model);
      gpu["model"] = model.name;
      if (g.is_mig()) {
        gpu["mig_profile"] = model.mig_profiles[static_cast<size_t>(g.mig_profile)].name;
      }
    }
    if (gi < inv.gpu_uuids.size()) {
      gpu["uuid"] = inv.gpu_uuids[gi];
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

// Each task of the current attempt; a finished job's tasks show where its last ended
// attempt ran (`stored`: the ended attempts, job_attempts.h).
nlohmann::json TasksJson(const JobJsonInputs& in, bool ended, const nlohmann::json& stored) {
  const LiveJob& job = in.job;
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < job.submission.spec.tasks.size(); ++t) {
    nlohmann::json task = {{"index", t}, {"node", nullptr}, {"gpus", nlohmann::json::array()},
                           {"state", "pending"}, {"exit_code", nullptr}};
    if (t < job.tasks.size()) {
      const TaskRun& run = job.tasks[t];
      task["node"] = run.node;
      const TaskOutcome outcome =
          t < in.rec.attempt.tasks.size() ? in.rec.attempt.tasks[t] : TaskOutcome{};
      task["state"] = outcome.exited ? "exited" : "running";
      if (outcome.exited) {
        task["exit_code"] = outcome.exit_code;
      }
      auto node = in.nodes.find(run.node);
      if (t < in.rec.allocations.size() && node != in.nodes.end()) {
        task["gpus"] = GrantsJson(in.rec.allocations[t], node->second.inventory, in.catalog);
      }
    }
    tasks.push_back(std::move(task));
  }
  if (ended && !stored.empty()) {
    const nlohmann::json& last = stored.back().value("tasks", nlohmann::json::array());
    for (size_t t = 0; t < tasks.size() && t < last.size(); ++t) {
      if (tasks[t]["gpus"].empty()) {
        tasks[t]["node"] = last[t].value("node", "");
        tasks[t]["gpus"] = last[t].value("gpus", nlohmann::json::array());
        tasks[t]["state"] = "exited";
        tasks[t]["exit_code"] = last[t].value("exit_code", 0);
      }
    }
  }
  return tasks;
}

}  // namespace

nlohmann::json JobJson(const JobJsonInputs& in) {
  const JobRow& row = in.job.row;
  const JobRecord& rec = in.rec;
  const JobSpec& spec = in.job.submission.spec;
  const bool ended = Terminal(in.state);
  const nlohmann::json stored = StoredAttempts(row.placement_json);
  const bool holding = in.state == JobState::kRunning || in.state == JobState::kStopping;
  return {
      {"id", row.id},
      {"name", row.name},
      {"tenant", row.tenant},
      {"user", spec.user},
      {"queue", row.queue},
      {"state", std::string(JobStateName(in.state))},
      {"priority", spec.priority},
      {"submit_time", TimeOrNull(row.submit_us)},
      {"start_time", TimeOrNull(row.start_us)},
      {"end_time", TimeOrNull(row.end_us)},
      {"attempts", row.attempts},
      // The current attempt's start (run time counts from it), the ended attempts and
      // their run time together.
      {"attempt_start_time", holding ? TimeOrNull(rec.run_start) : nlohmann::json(nullptr)},
      {"attempt_history", AttemptsView(stored)},
      {"ended_attempts_run_seconds", StoredRunSeconds(stored)},
      {"preemptions", row.preemptions},
      // Saved progress the next attempt resumes from (its checkpoint), in seconds.
      {"progress_seconds", static_cast<double>(row.progress_us) / 1e6},
      // The runtime backfill and ordering expect (learned from finished jobs); null: none.
      {"predicted_seconds", rec.predicted_runtime > 0
                                ? nlohmann::json(static_cast<double>(rec.predicted_runtime) / 1e6)
                                : nlohmann::json(nullptr)},
      {"exit_code", ended && in.state != JobState::kCancelled ? nlohmann::json(row.exit_code)
                                                              : nlohmann::json(nullptr)},
      {"gpus", spec.TotalGpus()},
      {"gpu_milli", rec.gpu_milli},
      {"replicas", spec.tasks.size()},
      {"checkpoint_dir", in.checkpoint_dir},
      {"run_as", RunAsJson(in.run_as)},
      {"tasks", TasksJson(in, ended, stored)}};
}

nlohmann::json RestartJson(const std::optional<RestartPolicy>& given, int used,
                           Micros restart_at) {
  const RestartPolicy policy = given.value_or(DefaultRestartPolicy());
  nlohmann::json on = nlohmann::json::array();
  for (RestartOn c : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
    if (policy.Restarts(c)) {
      on.push_back(std::string(RestartOnName(c)));
    }
  }
  return {{"max", policy.max},
          {"on", std::move(on)},
          {"backoff_seconds", static_cast<double>(policy.backoff) / 1e6},
          {"default", !given.has_value()},
          {"used", used},
          {"left", std::max(0, policy.max - used)},
          {"restart_at", restart_at > 0 ? nlohmann::json(FormatRfc3339(restart_at))
                                        : nlohmann::json(nullptr)}};
}

nlohmann::json SubmittedJson(JobIntake::Submitted submitted) {
  if (submitted.shape == JobIntake::Submitted::Shape::kJob) {
    return std::move(submitted.job_view);
  }
  nlohmann::json ids = nlohmann::json::array();
  for (JobNumber id : submitted.jobs) {
    ids.push_back(id.value());
  }
  nlohmann::json out = {{"ids", std::move(ids)}};
  if (submitted.shape == JobIntake::Submitted::Shape::kArray && !submitted.jobs.empty()) {
    out["id"] = submitted.jobs.front().value();
    out["array_job"] = submitted.jobs.front().value();
  }
  return out;
}

}  // namespace tessera
