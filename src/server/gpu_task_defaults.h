// GpuTaskDefaults: the controller's module for the CPUs and memory a GPU task gets when
// its spec names none (api/queue_resource_defaults.h: per GPU, from the task's queue
// or the embedded defaults, bounded by what the nodes offer per GPU). It owns the
// queues' defaults, read again when the queue configuration changes, and each GPU
// model's most generous node, remade when the nodes change.
//
// Hooks: the controller calls SetNodes when its node set changes (with the fit verdicts)
// and Apply on every submission once its queue is resolved, before the job is compared
// with an earlier one under the same idempotency key and before it is stored.
// Thread safety: none of its own; the controller calls it under its core lock.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "api/job_codec.h"
#include "api/queue_resource_defaults.h"
#include "model/gpu_catalog.h"
#include "server/node_registry.h"

namespace tessera {

class GpuTaskDefaults {
 public:
  explicit GpuTaskDefaults(const GpuCatalog& catalog) : catalog_(&catalog) {}

  // The queue configuration's text; read again only when it changed. A text whose
  // defaults do not read (checked when it was accepted) leaves the embedded ones.
  void SetQueues(std::string_view yaml);
  // Each GPU model's most CPUs and memory per GPU on one node (nodes known, up or down).
  void SetNodes(const NodeRegistry& nodes);
  // Fills `job`'s GPU tasks' unstated CPUs and memory for its queue (job.spec.queue).
  void Apply(JobSubmission& job) const;
  // A submission's jobs: the queue configuration `yaml` taken (SetQueues), then each of
  // `jobs` filled in (Apply).
  void ApplyAll(std::string_view yaml, std::span<JobSubmission> jobs);

  const PerGpuRoomByModel& room() const { return room_; }

 private:
  const GpuCatalog* catalog_;
  std::string yaml_;
  std::map<std::string, PerGpuDefaults> by_queue_;
  PerGpuRoomByModel room_;
};

}  // namespace tessera
