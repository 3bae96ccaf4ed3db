// The FGD paper's fragmentation experiment (Weng et al., USENIX ATC'23, Figure 9a),
// run on Tessera's placement core.
//
// One run = (pod list, policy, seed): pods sorted by name, shuffled with the seed,
// then "tuned" to `tune_ratio` of the cluster's GPU capacity: random clones of the
// original pods are appended until the next would pass the target (the authors'
// rule compares the clone's per-GPU milli with the remaining room), or random pods
// removed while the total is above it. Pods are placed one by one, no departures,
// no retries. After every pod the run records arrived GPU milli (every pod tried),
// allocated GPU milli and the cluster's fragmentation; samples are binned by
// arrived % of capacity, 0..130, as the authors' analysis scripts do.
//
// Thread safety: RunFgdExperiment is reentrant; runs share only immutable inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugins/fgd.h"
#include "sched/placer.h"
#include "sim/openb_trace.h"
#include "state/cluster_state.h"

namespace tessera {

inline constexpr int kArrivedBins = 131;  // 0..130 % of capacity

struct FgdRunSpec {
  const ClusterState* cluster = nullptr;        // empty cluster, copied per run
  const PodList* pods = nullptr;                // as read, any order
  const FragmentationModel* typical = nullptr;  // typical tasks of `pods`
  std::string policy;
  uint64_t seed = 42;
  double tune_ratio = 1.3;
  // kNodePriority: ties go to the node first in a random order drawn per seed, which
  // is how the authors' simulator behaves; kRandom: a fresh draw per placement.
  TieBreak tie_break = TieBreak::kNodePriority;
};

struct FgdRunResult {
  std::string trace;
  std::string policy;
  uint64_t seed = 0;
  int64_t total_gpus = 0;
  // Per arrived-% bin (NaN where no sample fell near): allocated GPU % of capacity,
  // fragmentation % of capacity, and fragmentation % of idle GPU.
  std::vector<double> alloc_pct;
  std::vector<double> frag_pct;
  std::vector<double> frag_ratio_pct;
  int64_t pods_tried = 0;
  int64_t pods_placed = 0;
  int64_t gpu_pods_failed = 0;
  double seconds = 0;  // wall time of the placement loop

  // 100 - allocated % at 100 % arrived: the paper's headline number.
  double UnallocatedAt100() const { return 100.0 - alloc_pct[100]; }
};

// The pods of one run in arrival order: name-sorted, shuffled, tuned.
std::vector<TaskRequest> PrepareWorkload(const PodList& pods, int64_t total_gpu_milli,
                                         double tune_ratio, Rng& rng);

StatusOr<FgdRunResult> RunFgdExperiment(const FgdRunSpec& spec);

// The authors' name for a policy in their result files ("06-FGD"); ours for new ones.
std::string AuthorsPolicyLabel(const std::string& policy);
// The inverse: "06-FGD" -> "fgd"; an unknown label is returned as it is.
std::string PolicyFromAuthorsLabel(const std::string& label);

// Rounds half to even at `decimals` places, as Python's round() does.
double RoundHalfEven(double value, int decimals);

}  // namespace tessera
