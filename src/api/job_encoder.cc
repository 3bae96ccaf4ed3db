// JobSubmissionToJson: a submission back into the job file format (api/job_codec.h).
#include <string>
#include <string_view>

#include "api/job_codec.h"
#include "api/job_codec_container.h"
#include "api/job_codec_relations.h"
#include "api/job_draft.h"
#include "api/job_keys.h"
#include "api/json_fields.h"
#include "api/units.h"
#include "base/time_format.h"

namespace tessera {
namespace {

namespace keys = job_keys;

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

Json IntOrTextJson(const IntOrText& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) {
    return *i;
  }
  return std::get<std::string>(v);
}

// The RestartOn bits as the codec's names, in its order.
Json RestartOnJson(uint8_t on) {
  Json names = Json::array();
  for (RestartOn c : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
    if ((on & static_cast<uint8_t>(c)) != 0) {
      names.push_back(std::string(RestartOnName(c)));
    }
  }
  return names;
}

Json DraftResourcesJson(const JobDraft::Resources& d) {
  Json r = Json::object();
  if (d.gpus) {
    r[keys::kGpus] = *d.gpus;
  }
  if (d.gpu_model.size() == 1) {
    r[keys::kGpuModel] = d.gpu_model.front();
  } else if (!d.gpu_model.empty()) {
    r[keys::kGpuModel] = d.gpu_model;
  }
  if (!d.gpu_fraction.empty()) {
    r[keys::kGpuFraction] = d.gpu_fraction;
  }
  if (!d.gpu_memory.empty()) {
    r[keys::kGpuMemory] = d.gpu_memory;
  }
  if (!d.mig.empty()) {
    r[keys::kMig] = d.mig;
  }
  if (d.cpu) {
    r[keys::kCpu] = IntOrTextJson(*d.cpu);
  }
  if (!d.memory.empty()) {
    r[keys::kMemory] = d.memory;
  }
  return r;
}

// Arrays, dependencies, holds, signals, checkpoints, preemption: when the job may run and
// how it is stopped.
void WriteDraftRunConditions(const JobDraft& d, Json& j) {
  if (!d.array.empty()) {
    j[keys::kArray] = d.array;
  }
  if (!d.dependency.empty()) {
    j[keys::kDependency] = d.dependency;
  }
  if (d.hold) {
    j[keys::kHold] = true;
  }
  if (!d.signal_name.empty()) {
    j[keys::kSignal] = {{keys::kName, d.signal_name},
                        {keys::kBefore, FormatDuration(d.signal_before)}};
  }
  if (!d.checkpoint_interval.empty()) {
    j[keys::kCheckpoint] = {{keys::kInterval, d.checkpoint_interval}};
  }
  if (d.preemptible) {
    j[keys::kPreemptible] = *d.preemptible;
  }
  if (d.hold_if_unfit) {
    j[keys::kHoldIfUnfit] = true;
  }
}

}  // namespace

Json JobDraftToJson(const JobDraft& d) {
  Json j = Json::object();
  if (!d.name.empty()) {
    j[keys::kName] = d.name;
  }
  if (!d.queue.empty()) {
    j[keys::kQueue] = d.queue;
  }
  if (d.priority) {
    j[keys::kPriority] = IntOrTextJson(*d.priority);
  }
  if (!d.command.empty()) {
    j[keys::kCommand] = d.command;
  }
  if (d.env) {
    j[keys::kEnv] = Json(*d.env);
  }
  if (!d.working_dir.empty()) {
    j[keys::kWorkingDir] = d.working_dir;
  }
  if (!d.submit_dir.empty()) {
    j[keys::kSubmitDir] = d.submit_dir;
  }
  if (d.replicas) {
    j[keys::kReplicas] = *d.replicas;
  }
  if (d.topology) {
    j[keys::kTopology] = {{keys::kScope, std::string(TopologyScopeName(d.topology->scope))},
                          {keys::kHard, d.topology->hard}};
  }
  if (!d.resources.empty()) {
    j[keys::kResources] = DraftResourcesJson(d.resources);
  }
  if (!d.runtime_limit.empty()) {
    j[keys::kRuntimeLimit] = d.runtime_limit;
  }
  if (!d.restart.empty()) {
    Json restart = Json::object();
    if (d.restart.max) {
      restart[keys::kMax] = *d.restart.max;
    }
    if (d.restart.on != 0) {
      restart[keys::kOn] = RestartOnJson(d.restart.on);
    }
    if (!d.restart.backoff.empty()) {
      restart[keys::kBackoff] = d.restart.backoff;
    }
    j[keys::kRestart] = std::move(restart);
  }
  WriteDraftRunConditions(d, j);
  WriteContainer(d.container, j);
  return j;
}

nlohmann::json JobSubmissionToJson(const JobSubmission& job, const GpuCatalog& catalog) {
  const JobSpec& spec = job.spec;
  Json j = Json::object();
  if (!spec.name.empty()) {
    j[keys::kName] = spec.name;
  }
  if (!spec.queue.empty()) {
    j[keys::kQueue] = spec.queue;
  }
  if (!spec.user.empty()) {
    j[keys::kUser] = spec.user;
  }
  j[keys::kPriority] = spec.priority;
  if (!job.command.empty() || job.container.empty()) {
    j[keys::kCommand] = job.command;
  }
  if (!job.env.empty()) {
    j[keys::kEnv] = job.env;
  }
  if (!job.working_dir.empty()) {
    j[keys::kWorkingDir] = job.working_dir;
  }
  if (!job.submit_dir.empty()) {
    j[keys::kSubmitDir] = job.submit_dir;
  }
  j[keys::kReplicas] = spec.tasks.size();

  const TaskRequest task = spec.tasks.empty() ? TaskRequest{} : spec.tasks.front();
  Json r = Json::object();
  if (task.wants_mig()) {
    r[keys::kGpus] = 1;
    r[keys::kMig] = task.mig_profile;
  } else if (task.gpu_count > 0) {
    r[keys::kGpus] = task.gpu_count;
    if (task.gpu_milli != kWholeGpu) {
      r[keys::kGpuMilli] = task.gpu_milli.value();
    }
  } else {
    r[keys::kGpus] = 0;
  }
  if (task.gpu_memory.value() != 0) {
    r[keys::kGpuMemory] = FormatMiB(task.gpu_memory.value());
  }
  if (!task.models.empty()) {
    Json models = Json::array();
    for (const GpuModel& m : catalog.models()) {
      if (task.models.Contains(m.id)) {
        models.push_back(m.name);
      }
    }
    r[keys::kGpuModel] = std::move(models);
  }
  r[keys::kCpu] = FormatCpuMilli(task.cpu.value());
  r[keys::kMemory] = FormatMiB(task.memory.value());
  r[keys::kGpuTopology] = std::string(GpuTopologyName(task.topology));
  j[keys::kResources] = std::move(r);

  j[keys::kTopology] = {{keys::kScope, std::string(TopologyScopeName(spec.topology.scope))},
                   {keys::kHard, spec.topology.hard}};
  Json ckpt = Json::object();
  if (spec.checkpoint_interval != 0) {
    ckpt[keys::kInterval] = FormatDuration(spec.checkpoint_interval);
  }
  ckpt[keys::kOnSignal] = spec.checkpoint_on_signal;
  if (!job.checkpoint_dir.empty()) {
    ckpt[keys::kDir] = job.checkpoint_dir;
  }
  j[keys::kCheckpoint] = std::move(ckpt);
  if (spec.runtime_limit != 0) {
    j[keys::kRuntimeLimit] = FormatDuration(spec.runtime_limit);
  }
  j[keys::kPreemptible] = spec.preemptible;
  if (job.hold_if_unfit) {
    j[keys::kHoldIfUnfit] = true;
  }
  if (job.restart) {
    j[keys::kRestart] = {{keys::kMax, job.restart->max},
                    {keys::kOn, RestartOnJson(job.restart->on)},
                    {keys::kBackoff, FormatDuration(job.restart->backoff)}};
  }
  WriteJobRelations(job, j);
  WriteJobContainer(job, j);
  return j;
}

}  // namespace tessera
