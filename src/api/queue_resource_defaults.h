// Default CPUs and memory for GPU tasks that ask for none, as Slurm's DefCpuPerGPU and
// DefMemPerGPU: per GPU of the task, from its queue or the embedded defaults.
//
//   queues:
//     - name: team-a
//       defaultCpuPerGpu: 8           # cores ("500m": milli-cores)
//       defaultMemoryPerGpu: 32GiB
//
// The embedded defaults (4 cores and 16 GiB of host memory per GPU) are the low end of
// the common rule of 4-8 cores and 16-32 GiB per GPU. Each is bounded by what a node
// offers per GPU (its CPUs or memory over its GPUs, the most generous node of a model the
// task may use; and in all by the most one such node has), so that a default never makes
// a job unable to run; a share or a MIG
// instance gets its part of a GPU's; and no task gets less than the 1 core and 1 GiB a
// task asking for nothing gets. A request the job states is kept as it is.
//
// queue_config.cc accepts the keys and checks them with ReadPerGpuDefault; the controller
// reads them from the same text (QueuePerGpuDefaults) and applies them at submission, so
// the stored job holds the values it ran with. Errors name the YAML path.
// Thread safety: functions, no shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "api/job_codec.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct PerGpuDefaults {
  int64_t cpu_milli = 4000;
  int64_t memory_mib = 16 * 1024;

  bool operator==(const PerGpuDefaults&) const = default;
};

// Per GPU model: what one GPU of a node comes with at most (the most generous node), and
// the most one node of it has in all (a task never gets more than a node has).
struct PerGpuRoom {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t node_cpu_milli = 0;
  int64_t node_memory_mib = 0;
};
using PerGpuRoomByModel = std::map<GpuModelId, PerGpuRoom>;

// The value of `defaultCpuPerGpu` (cpu true) or `defaultMemoryPerGpu` at `path`.
StatusOr<int64_t> ReadPerGpuDefault(const YAML::Node& node, const std::string& path, bool cpu);
// Every queue's defaults by name (the embedded ones where it names none), from the queue
// configuration's YAML text.
StatusOr<std::map<std::string, PerGpuDefaults>> QueuePerGpuDefaults(std::string_view yaml);

// Fills the CPUs and memory of `job`'s GPU tasks where its spec named none.
void ApplyPerGpuDefaults(JobSubmission& job, const PerGpuDefaults& defaults,
                         const PerGpuRoomByModel& room, const GpuCatalog& catalog);

}  // namespace tessera
