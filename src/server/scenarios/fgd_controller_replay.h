// ReplayFgdThroughController: the FGD fragmentation experiment (sim/fgd_experiment.h)
// through the live controller in process, to show that the placement users get live is
// the one the simulator measures.
//
// The pods are prepared exactly as RunFgdExperiment prepares them for the seed (sorted,
// shuffled, tuned to `tune_ratio` of capacity), then each is submitted as a one-task job
// to a controller (in-memory store, manual clock) whose nodes are the trace's, registered
// through the agent protocol. After each submission one scheduling cycle runs; a pod that
// did not start is cancelled (the experiment never retries a pod). Nothing departs. The
// controller learns the workload from the submissions (WorkloadLearner), where the
// experiment is given the pod list's typical tasks up front; the difference between the
// two figures is what learning online costs.
//
// Allocated GPU is sampled after every pod and binned by arrived % of capacity as the
// experiment bins it; the result is the mean unallocated GPU % in the 100 % bin.
// Thread safety: one replay per call; replays share nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "sim/openb_trace.h"

namespace tessera {

struct FgdLiveReplaySpec {
  const std::vector<NodeSpec>* nodes = nullptr;
  const PodList* pods = nullptr;
  std::string placement = "tessera";  // the controller's placement profile
  uint64_t seed = 42;
  double tune_ratio = 1.3;
};

struct FgdLiveReplayResult {
  double unallocated_at_100 = 0;  // % of GPU capacity, as FgdRunResult::UnallocatedAt100
  int64_t pods_tried = 0;
  int64_t pods_placed = 0;
  double seconds = 0;       // wall time of the submissions and cycles
};

StatusOr<FgdLiveReplayResult> ReplayFgdThroughController(const FgdLiveReplaySpec& spec,
                                                         const GpuCatalog& catalog);

}  // namespace tessera
