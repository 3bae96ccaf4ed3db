// Kueue import: Kueue objects (multi-document YAML, kueue.x-k8s.io) to Tessera's queue
// tree (api/queue_config.h).
//
//   ClusterQueue            -> a queue; spec.cohort (or cohortName) -> its cohort;
//                              fairSharing.weight (a whole number) -> weight
//   Cohort                  -> a cohort; spec.parent (or parentName) -> its parent;
//                              its resourceGroups -> the cohort's own quota
//   ResourceFlavor          -> a GPU model, from nodeLabels nvidia.com/gpu.product
//                              (or cloud.google.com/gke-accelerator); none: any model
//   LocalQueue              -> the queue's tenant: the LocalQueue's namespace
//   WorkloadPriorityClass   -> a priority class (name, value)
//
// Per flavor and resource, nominalQuota, borrowingLimit and lendingLimit map one to
// one: nvidia.com/gpu -> "gpu:<model>" (or "gpu" for a flavor without a model), cpu
// -> cpu, memory -> memory (Kubernetes quantities; bytes rounded down to whole MiB,
// with a warning). A cohort named by a queue but not declared is created bare, as
// Kueue does.
//
// What Tessera has no equivalent for is a "problem": an error naming the object and
// field (with the line), or, when `lenient`, a warning and the field is left out. The
// problems: other resources (MIG resources, pods, ephemeral-storage), cpu or memory or
// model-less GPUs under two flavors of one queue, other node labels, taints and
// tolerations, admissionChecks, flavorFungibility, namespaceSelector other than {},
// StrictFIFO, stopPolicy other than None, fractional or zero weights, preemption
// settings other than what Tessera's policy does (reclaimWithinCohort: Any,
// withinClusterQueue: LowerPriority, borrowWithinCohort: Never), one queue used from
// two namespaces, other kinds and apiVersions. Preemption is a cluster-wide policy in
// Tessera (`--policy`): a ClusterQueue without a preemption block is imported as is.
//
// The result is checked with QueueTree::Create, so a successful import is a valid tree.
// Thread safety: functions, no shared state; pure (no I/O).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"

namespace tessera {

struct KueueImportOptions {
  bool lenient = false;  // problems become warnings (default: errors)
};

struct KueueImport {
  QueueTreeSpec spec;
  std::vector<std::string> warnings;  // "Kind name: field: message (line L, column C)"
};

// `source` prefixes errors about the text itself (e.g. the file name).
StatusOr<KueueImport> ImportKueueYaml(std::string_view yaml, const GpuCatalog& catalog,
                                      const KueueImportOptions& options = {},
                                      const std::string& source = "kueue");

// Kubernetes memory quantity ("512Gi", "100G", "1.5Ti", "1073741824") in whole MiB,
// rounded down; `exact` tells whether nothing was rounded away.
StatusOr<int64_t> KubernetesBytesToMiB(std::string_view text, bool* exact);

}  // namespace tessera
