// The placement half of the scheduling cycle: extension points for Filter and
// Score plugins, in the style of the Kubernetes scheduling framework.
//
//   Filter  says whether a node can take the task: fits now, not now (would fit on
//           the empty node: preemption could help), or never (wrong model, too small).
//   Score   ranks a feasible node with an integer (higher is better) and may say which
//           GPUs of the node it had in mind; the Placer sums weighted scores, keeps
//           the best, and breaks ties at random.
//
// Plugins are pure: they read the node ledger and the request, never a clock, a
// file or another thread. A plugin whose score depends only on (node state,
// request) says so with cacheable(), and the Placer reuses its scores until the
// node changes. Thread safety: a Profile and its plugins belong to one driver
// thread; make one per thread.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/rng.h"
#include "model/request.h"
#include "state/cluster_state.h"
#include "state/node_ledger.h"

namespace tessera {

enum class FilterCode {
  kFits,
  kUnschedulable,  // not now: the node is busy
  kUnresolvable,   // never: the node cannot hold the task even when empty
};

// What a failed filter found short, for callers that explain a wait (the reason text
// is for people and may be reworded; match on this).
enum class FilterCause : uint8_t {
  kNone,       // fits
  kCpu,        // CPU (the node's, or free now)
  kMemory,     // host memory
  kGpuCount,   // fewer GPUs on the node, or fewer free now, than the task asks
  kGpuKind,    // too few GPUs of an allowed model, sharing mode and GPU memory
  kMig,        // no MIG GPU with the profile, or no free slot for it now
  kLocality,   // not enough GPUs (free) in one NVLink domain or NUMA node
  kMpsUser,    // shared GPUs with room serve another user's shares (single-user MPS)
  kOther,      // a plugin that names no cause
};

struct FilterResult {
  FilterCode code = FilterCode::kFits;
  std::string_view reason;  // static text, e.g. "not enough free CPU"
  FilterCause cause = FilterCause::kNone;

  static FilterResult Fits() { return {}; }
  static FilterResult NotNow(std::string_view why, FilterCause cause = FilterCause::kOther) {
    return {FilterCode::kUnschedulable, why, cause};
  }
  static FilterResult Never(std::string_view why, FilterCause cause = FilterCause::kOther) {
    return {FilterCode::kUnresolvable, why, cause};
  }
  bool fits() const { return code == FilterCode::kFits; }
};

// GPUs of one node picked for a task: a bit per GPU index, plus the MIG start slot
// when the task gets a MIG instance.
struct GpuChoice {
  uint64_t mask = 0;
  int mig_start = -1;

  bool empty() const { return mask == 0; }
  bool operator==(const GpuChoice&) const = default;
};

inline constexpr int64_t kInfeasibleScore = std::numeric_limits<int64_t>::min();

struct NodeScore {
  int64_t score = 0;
  GpuChoice gpus;  // empty: no opinion; the Profile's GPU selection decides
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view name() const = 0;
  virtual FilterResult Filter(const NodeLedger& node, const TaskRequest& request) const = 0;
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view name() const = 0;
  // Called once per placement before any Score, with the whole cluster: the place
  // for plugins that weigh a node against cluster-wide state (those are not
  // cacheable). Default: nothing.
  virtual void PreScore(const ClusterState& /*state*/, const TaskRequest& /*request*/) {}
  // Called on a node that passed every filter.
  virtual NodeScore Score(const NodeLedger& node, const TaskRequest& request) = 0;
  // True when Score depends only on the node's ledger and the request.
  virtual bool cacheable() const { return true; }
};

// How GPUs are picked inside the chosen node when no scorer proposed a choice.
enum class GpuSelection {
  kBestFit,   // shares: the fitting GPU with the least free milli (lowest index on ties)
  kRandom,    // shares: a uniformly random fitting GPU
  kFirstFit,  // shares: the lowest-index fitting GPU
};

struct WeightedScorer {
  std::unique_ptr<ScorePlugin> plugin;
  int64_t weight = 1;
};

// How the Placer chooses among nodes that share the best score.
enum class TieBreak {
  kNodePriority,  // the node with the lowest rank in a fixed order (Placer::SetNodeRanks;
                  // node order by default): consistent choices, which pack better
  kRandom,        // uniformly at random with the caller's Rng (kube-scheduler's rule)
};

// A named set of plugins: what `--policy NAME` selects.
struct Profile {
  std::string name;
  std::vector<std::unique_ptr<FilterPlugin>> filters;
  std::vector<WeightedScorer> scorers;
  GpuSelection gpu_selection = GpuSelection::kBestFit;
  // Set when the policy itself needs a tie rule (random placement: kRandom).
  std::optional<TieBreak> tie_break;
};

}  // namespace tessera
