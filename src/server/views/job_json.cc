// A job's JSON (views/job_json.h).
#include "server/views/job_json.h"

#include <algorithm>

#include "base/time_format.h"
#include "server/job_rows.h"
#include "server/job_attempts.h"
#include "server/modules/job_gates.h"

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
nlohmann::json TasksJson(const JobJsonInputs& in, const JobRecord& rec, bool ended,
                         const nlohmann::json& stored) {
  const LiveJob& job = in.job;
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < job.submission.spec.tasks.size(); ++t) {
    nlohmann::json task = {{"index", t}, {"node", nullptr}, {"gpus", nlohmann::json::array()},
                           {"state", "pending"}, {"exit_code", nullptr}};
    if (t < job.tasks.size()) {
      const TaskRun& run = job.tasks[t];
      task["node"] = run.node;
      const TaskOutcome outcome =
          t < rec.attempt.tasks.size() ? rec.attempt.tasks[t] : TaskOutcome{};
      task["state"] = outcome.exited ? "exited" : "running";
      if (outcome.exited) {
        task["exit_code"] = outcome.exit_code;
      }
      auto node = in.nodes.find(run.node);
      if (t < rec.allocations.size() && node != in.nodes.end()) {
        task["gpus"] = GrantsJson(rec.allocations[t], node->second.inventory, in.catalog);
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

// Everything but the modules' members, "held", "reason" and "spec".
nlohmann::json BaseJson(const JobJsonInputs& in, const JobRecord& rec) {
  const JobRow& row = in.job.row;
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
      {"tasks", TasksJson(in, rec, ended, stored)}};
}

}  // namespace

nlohmann::json JobJson(const JobJsonInputs& in) {
  JobRecord archived;
  if (in.rec == nullptr) {
    archived.gpu_milli = in.job.submission.spec.TotalGpuMilli(in.catalog);
  }
  nlohmann::json out = BaseJson(in, in.rec != nullptr ? *in.rec : archived);
  if (in.describe) {
    in.describe(out);  // the restart block too (RestartsModule)
  }
  out["held"] = in.state == JobState::kPending && IsHeldReason(in.job.row.reason);
  if (in.reason) {
    out["reason"] = in.reason();
  }
  if (in.with_spec) {
    // Parsed for this answer only: a parsed tree kept per job cost more than the rest of
    // a pending job (reads of the API are served from the published text instead).
    nlohmann::json parsed = nlohmann::json::parse(in.job.row.spec_json.str(), nullptr, false);
    out["spec"] = parsed.is_discarded() ? nlohmann::json(nullptr) : std::move(parsed);
  }
  return out;
}

JobView JobViewOf(const LiveJob& job, JobState state, const nlohmann::json& json) {
  JobView view;
  view.id = job.id();
  view.tasks = static_cast<int>(job.submission.spec.tasks.size());
  view.tenant = job.row.tenant;
  view.queue = job.row.queue;
  view.state = std::string(JobStateName(state));
  view.user = job.submission.spec.user;
  // The spec never changes: the view shares the stored text (spliced in at read time)
  // rather than a parsed tree or a copy.
  if (job.spec_text_ok < 0) {
    job.spec_text_ok = nlohmann::json::accept(job.row.spec_json.str()) ? 1 : 0;
  }
  std::string body = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  body.pop_back();  // the closing brace
  body.shrink_to_fit();
  view.body = std::move(body);
  if (job.spec_text_ok == 1) {
    view.spec = job.row.spec_json;
  }
  return view;
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
