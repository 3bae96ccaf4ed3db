#include "api/queue_resource_defaults.h"

#include <algorithm>

#include "api/queue_config.h"
#include "api/units.h"

namespace tessera {
namespace {

constexpr int64_t kFloorCpuMilli = 1000;  // what a task asking for nothing gets
constexpr int64_t kFloorMemoryMiB = 1024;
constexpr int64_t kMaxCpuMilliPerGpu = 1024 * 1000;
constexpr int64_t kMaxMemoryMiBPerGpu = int64_t{64} * 1024 * 1024;  // 64 TiB

// The task's per-GPU room: the most any node of a model it may use offers; none known: 0.
PerGpuRoom RoomFor(const TaskRequest& task, const PerGpuRoomByModel& room) {
  PerGpuRoom best;
  for (const auto& [model, r] : room) {
    if (task.models.Allows(model)) {
      best.cpu_milli = std::max(best.cpu_milli, r.cpu_milli);
      best.memory_mib = std::max(best.memory_mib, r.memory_mib);
      best.node_cpu_milli = std::max(best.node_cpu_milli, r.node_cpu_milli);
      best.node_memory_mib = std::max(best.node_memory_mib, r.node_memory_mib);
    }
  }
  return best;
}

// `per_gpu` for `milli` thousandths of a GPU, within `room` per GPU and `node` in all
// when known, and not under `floor`.
int64_t Scaled(int64_t per_gpu, int64_t room, int64_t node, int64_t milli, int64_t floor) {
  if (room > 0) {
    per_gpu = std::min(per_gpu, room);
  }
  int64_t total = per_gpu * milli / kMilliPerGpu;
  if (node > 0) {
    total = std::min(total, node);
  }
  return std::max(floor, total);
}

}  // namespace

StatusOr<int64_t> ReadPerGpuDefault(const YAML::Node& node, const std::string& path, bool cpu) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  StatusOr<int64_t> v = cpu ? ParseCpuMilli(text) : ParseMemoryMiB(text);
  const int64_t most = cpu ? kMaxCpuMilliPerGpu : kMaxMemoryMiBPerGpu;
  if (!node.IsScalar() || !v.ok() || *v <= 0 || *v > most) {
    return InvalidArgumentError(
        path + ": " +
        (cpu ? "defaultCpuPerGpu expects cores per GPU, e.g. 8 or 1500m"
             : "defaultMemoryPerGpu expects memory per GPU, e.g. 32GiB") +
        ", more than 0 and at most " + (cpu ? "1024 cores" : "64 TiB") + ", got '" +
        text.substr(0, 40) + "'");
  }
  return *v;
}

StatusOr<std::map<std::string, PerGpuDefaults>> QueuePerGpuDefaults(std::string_view yaml) {
  std::map<std::string, PerGpuDefaults> out;
  TESSERA_RETURN_IF_ERROR(ForEachQueueEntry(
      yaml, [&](const YAML::Node& q, const std::string& path, const std::string& name) -> Status {
        PerGpuDefaults d;
        if (q["defaultCpuPerGpu"]) {
          TESSERA_ASSIGN_OR_RETURN(
              d.cpu_milli, ReadPerGpuDefault(q["defaultCpuPerGpu"], path + ".defaultCpuPerGpu", true));
        }
        if (q["defaultMemoryPerGpu"]) {
          TESSERA_ASSIGN_OR_RETURN(
              d.memory_mib,
              ReadPerGpuDefault(q["defaultMemoryPerGpu"], path + ".defaultMemoryPerGpu", false));
        }
        out[name] = d;
        return Status::Ok();
      }));
  return out;
}

void ApplyPerGpuDefaults(JobSubmission& job, const PerGpuDefaults& defaults,
                         const PerGpuRoomByModel& room, const GpuCatalog& catalog) {
  if (!job.cpu_defaulted && !job.memory_defaulted) {
    return;
  }
  for (TaskRequest& task : job.spec.tasks) {
    if (task.cpu_only()) {
      continue;
    }
    const int64_t milli = task.TotalGpuMilli(catalog).value();
    const PerGpuRoom r = RoomFor(task, room);
    if (job.cpu_defaulted) {
      task.cpu = MilliCpu(Scaled(defaults.cpu_milli, r.cpu_milli, r.node_cpu_milli, milli, kFloorCpuMilli));
    }
    if (job.memory_defaulted) {
      task.memory = MiB(Scaled(defaults.memory_mib, r.memory_mib, r.node_memory_mib, milli,
                                      kFloorMemoryMiB));
    }
  }
  // Stated now: the stored job reads back with these values.
  job.cpu_defaulted = false;
  job.memory_defaulted = false;
}

}  // namespace tessera
