// JobSubmissionToJson: a submission back into the job file format (api/job_codec.h).
#include <string>
#include <string_view>

#include "api/job_codec.h"
#include "api/job_codec_relations.h"
#include "api/json_fields.h"
#include "api/units.h"

namespace tessera {
namespace {

std::string_view GpuTopologyName(GpuTopology t) {
  switch (t) {
    case GpuTopology::kPreferLocal:
      return "prefer-local";
    case GpuTopology::kRequireLocal:
      return "require-local";
    case GpuTopology::kAny:
      return "any";
  }
  return "prefer-local";
}

}  // namespace

nlohmann::json JobSubmissionToJson(const JobSubmission& job, const GpuCatalog& catalog) {
  const JobSpec& spec = job.spec;
  Json j = Json::object();
  if (!spec.name.empty()) {
    j["name"] = spec.name;
  }
  if (!spec.queue.empty()) {
    j["queue"] = spec.queue;
  }
  if (!spec.user.empty()) {
    j["user"] = spec.user;
  }
  j["priority"] = spec.priority;
  j["command"] = job.command;
  if (!job.env.empty()) {
    j["env"] = job.env;
  }
  if (!job.working_dir.empty()) {
    j["working_dir"] = job.working_dir;
  }
  if (!job.submit_dir.empty()) {
    j["submit_dir"] = job.submit_dir;
  }
  j["replicas"] = spec.tasks.size();

  const TaskRequest task = spec.tasks.empty() ? TaskRequest{} : spec.tasks.front();
  Json r = Json::object();
  if (task.wants_mig()) {
    r["gpus"] = 1;
    r["mig"] = task.mig_profile;
  } else if (task.gpu_count > 0) {
    r["gpus"] = task.gpu_count;
    if (task.gpu_milli != kWholeGpu) {
      r["gpu_milli"] = task.gpu_milli.value();
    }
  } else {
    r["gpus"] = 0;
  }
  if (task.gpu_memory.value() != 0) {
    r["gpu_memory"] = FormatMiB(task.gpu_memory.value());
  }
  if (!task.models.empty()) {
    Json models = Json::array();
    for (const GpuModel& m : catalog.models()) {
      if (task.models.Contains(m.id)) {
        models.push_back(m.name);
      }
    }
    r["gpu_model"] = std::move(models);
  }
  r["cpu"] = FormatCpuMilli(task.cpu.value());
  r["memory"] = FormatMiB(task.memory.value());
  r["gpu_topology"] = std::string(GpuTopologyName(task.topology));
  j["resources"] = std::move(r);

  j["topology"] = {{"scope", std::string(TopologyScopeName(spec.topology.scope))},
                   {"hard", spec.topology.hard}};
  Json ckpt = Json::object();
  if (spec.checkpoint_interval != 0) {
    ckpt["interval"] = FormatDuration(spec.checkpoint_interval);
  }
  ckpt["on_signal"] = spec.checkpoint_on_signal;
  if (!job.checkpoint_dir.empty()) {
    ckpt["dir"] = job.checkpoint_dir;
  }
  j["checkpoint"] = std::move(ckpt);
  if (spec.runtime_limit != 0) {
    j["runtime_limit"] = FormatDuration(spec.runtime_limit);
  }
  j["preemptible"] = spec.preemptible;
  if (job.hold_if_unfit) {
    j["hold_if_unfit"] = true;
  }
  if (job.restart) {
    Json on = Json::array();
    for (RestartOn c : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
      if (job.restart->Restarts(c)) {
        on.push_back(std::string(RestartOnName(c)));
      }
    }
    j["restart"] = {{"max", job.restart->max},
                    {"on", std::move(on)},
                    {"backoff", FormatDuration(job.restart->backoff)}};
  }
  WriteJobRelations(job, j);
  return j;
}

}  // namespace tessera
