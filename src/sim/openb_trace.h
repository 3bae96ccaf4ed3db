// Readers for the Alibaba GPU-sharing trace of 2023 ("openb", the FGD paper's
// data): node lists (sn,cpu_milli,memory_mib,gpu,model) and pod lists
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]). Columns are found
// by header name; errors name the file and line. Nodes get shared-mode GPUs (the
// trace's GPUs are shared by milli), one NUMA node and no NVLink.
//
// Pod conversion follows the trace's own YAML converter: a pod with num_gpu 0 is
// CPU-only whatever its gpu_milli; gpu_milli above 1000 means a whole GPU; a pod
// asking for GPUs with gpu_milli 0 asks for none (counted in `zero_milli_gpu_pods`).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "model/request.h"

namespace tessera {

struct TracePod {
  std::string name;
  TaskRequest request;
};

struct PodList {
  std::string trace;  // "default" for openb_pod_list_default.csv
  std::vector<TracePod> pods;
  int zero_milli_gpu_pods = 0;

  // The pods' requests, in list order (what typical tasks are found from).
  std::vector<TaskRequest> Requests() const;
};

StatusOr<std::vector<NodeSpec>> ReadOpenbNodes(const std::string& path, const GpuCatalog& catalog);
StatusOr<PodList> ReadOpenbPods(const std::string& path, const GpuCatalog& catalog);

// "default" for ".../openb_pod_list_default.csv"; otherwise the file's stem.
std::string TraceNameFromPath(const std::string& path);

// Model-constrained variants of a pod list. The published pod lists pin no pod to a
// GPU model (`gpu_spec` is empty throughout), so a scorer's handling of pinned pods
// is tested on variants: `percent` % of the GPU pods (exactly, rounded; chosen by the
// seed) are pinned to GPU models their request fits, i.e. models with at least one
// node in `nodes` whose CPU, memory and GPU count could host the pod when empty.
// kSingle pins to one such model; kSubset to a non-empty subset, its size uniform in
// 1..(fitting models). Models are drawn without replacement in proportion to the
// fitting nodes' GPU count, as demand for a model tends to follow its supply (a
// uniform draw would pin as many pods to a model of 2 GPUs as to one of 4,000).
// kScarce concentrates pins where supply is short: each chosen pod (in a shuffled
// order) goes to one fitting model, the one with the fewest nodes (then fewest GPUs)
// whose pinned GPU demand is still below its share of the list's GPU demand (the
// model's share of the cluster's GPUs); past every fitting model's share, to the one
// with the most nodes. So pinned demand alone asks each scarce model for about all it
// has, scarcest models first, which a placement can honour only by keeping other pods
// off them. A pod that fits no node, or is already pinned, is left as it is.
enum class PinMode { kSubset, kSingle, kScarce };

struct PinSpec {
  int percent = 0;  // 0..100
  PinMode mode = PinMode::kSubset;
  uint64_t seed = 1;
};

// "default-pin50" (kSubset), "default-pin50one" (kSingle) or "default-pin50scarce"
// (kScarce); `trace` for percent 0.
std::string PinnedTraceName(const std::string& trace, const PinSpec& spec);

// The variant of `pods` described by `spec`, named by PinnedTraceName. Pure: the
// same inputs give the same pins on every platform.
StatusOr<PodList> PinPodsToModels(const PodList& pods, const std::vector<NodeSpec>& nodes,
                                  const PinSpec& spec);

}  // namespace tessera
