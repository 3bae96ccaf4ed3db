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

}  // namespace tessera
