// Runs a grid of FGD experiment runs (pod lists x policies x seeds) on a pool of
// worker threads, reporting each finished run through a callback (called from the
// worker, under a lock). Results come back in grid order whatever the finishing
// order, so output files are deterministic. Thread safety: the inputs are shared
// read-only between workers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugins/fgd.h"
#include "sim/fgd_experiment.h"

namespace tessera {

struct FgdGridSpec {
  const ClusterState* cluster = nullptr;
  std::vector<const PodList*> traces;
  std::vector<const FragmentationModel*> typical;  // one per trace
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  double tune_ratio = 1.3;
  TieBreak tie_break = TieBreak::kNodePriority;
  int jobs = 0;  // worker threads; 0: one per core
};

struct FgdGridProgress {
  size_t done = 0;
  size_t total = 0;
  const FgdRunResult* run = nullptr;
};

StatusOr<std::vector<FgdRunResult>> RunFgdGrid(
    const FgdGridSpec& spec, const std::function<void(const FgdGridProgress&)>& on_done = {});

}  // namespace tessera
