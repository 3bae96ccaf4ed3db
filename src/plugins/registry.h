// Policy registry: builds the Profile (filters, scorers, GPU selection) that a
// policy name stands for. Names: random, bestfit, dotprod, gpupacking,
// gpuclustering, fgd (the FGD paper's baselines) and tessera (the default).
// Thread safety: MakeProfile is reentrant; the Profiles it returns are not shared.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "plugins/baseline_scorers.h"
#include "plugins/fgd.h"
#include "sched/framework.h"
#include "state/cluster_state.h"

namespace tessera {

struct PolicyContext {
  NodeScale scale;
  // The workload's typical tasks, for fragmentation-aware policies. Must outlive
  // the Profile.
  const FragmentationModel* fragmentation = nullptr;
};

// The scale of the largest node of the cluster (CPU and GPU each), and its GPUs per
// model.
NodeScale ScaleOf(const ClusterState& state);

const std::vector<std::string>& PolicyNames();

StatusOr<Profile> MakeProfile(std::string_view policy, const PolicyContext& context);

// Whether the placement needs the workload's typical tasks (fgd, tessera).
bool PlacementNeedsWorkload(std::string_view policy);

// The placement for a driver that learns the workload as it goes (WorkloadLearner):
// `policy`, or bestfit while a policy that needs typical tasks has none yet (no task
// seen). `typical` may be null.
StatusOr<Profile> MakeLearnedProfile(std::string_view policy, NodeScale scale,
                                     const FragmentationModel* typical);

}  // namespace tessera
