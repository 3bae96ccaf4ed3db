// Queue tree configuration in YAML.
//
//   priorityClasses:
//     - {name: high, value: 100}
//   cohorts:
//     - name: org
//       parent: ""              # optional: cohorts nest
//       quota: {gpu: 16}        # a cohort may hold quota of its own
//   queues:
//     - name: team-a
//       cohort: org             # optional: a queue without a cohort borrows from nobody
//       tenant: a               # optional, default the queue's name
//       weight: 2               # fair-share weight, default 1
//       quota:
//         gpu: {nominal: 8, borrowingLimit: 4, lendingLimit: 2}
//         "gpu:H100-80GB": 4    # a bare number is the nominal quota
//         cpu: 64               # cores; "500m" is milli-cores
//         memory: 512Gi         # Mi, Gi, Ti (binary); a bare number is MiB
//         gpu-memory: 640Gi
//
// GPU quantities are GPUs ("1.5" or "1500m" for milli-GPU). Unknown keys are
// errors (a typo must not silently drop a quota). Errors name the YAML path.
// Thread safety: functions, no shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"

namespace tessera {

StatusOr<QueueTreeSpec> ParseQueueTreeYaml(const YAML::Node& root, const GpuCatalog& catalog);
// YAML text (an admin's PUT /v1/queues, the store's copy); errors start with `source`.
StatusOr<QueueTreeSpec> ParseQueueTreeText(std::string_view yaml, const GpuCatalog& catalog,
                                           const std::string& source = "queue configuration");
// A file; NotFound when it cannot be read, errors otherwise start with its path.
StatusOr<QueueTreeSpec> LoadQueueTreeFile(const std::string& path, const GpuCatalog& catalog);
// The YAML text of `spec`, which ParseQueueTreeYaml reads back as `spec` (quantities in
// their ledger units: "1500m" GPUs and CPUs, MiB).
std::string QueueTreeYaml(const QueueTreeSpec& spec, const GpuCatalog& catalog);

// Calls `fn` with each named entry of `queues` in a queue configuration's text, its
// YAML path ("queues[3]") and its name, for the keys the controller reads from the same
// text (queue_idle.h, queue_limits.h); stops at fn's first error. Unparsable text: an
// error; text without a `queues` list: no call.
Status ForEachQueueEntry(
    std::string_view yaml,
    const std::function<Status(const YAML::Node& entry, const std::string& path,
                               const std::string& name)>& fn);
// Parses a quantity of `kind` in its ledger unit (milli-GPU, milli-CPU, MiB).
StatusOr<int64_t> ParseResourceQuantity(const YAML::Node& node, ResourceKind kind);

}  // namespace tessera
