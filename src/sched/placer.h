// Placer: decides where one task goes, given the cluster state and a Profile.
//
// For each node: every filter, then the weighted sum of the scorers; the node with
// the highest total wins, ties broken uniformly at random with the caller's Rng;
// the GPUs inside it come from the scorer that proposed some, else from the
// Profile's GpuSelection. Place() only decides; the driver applies the returned
// Allocation to its ClusterState (or not), so the same Placer serves the server,
// the simulator and what-if forks.
//
// Speed: requests with equal resources form a class. When every scorer is
// cacheable, each class keeps its nodes' scores in a ScoreTree and re-evaluates
// only the nodes that changed since (ClusterState::ChangesSince), so a placement
// costs O(changed nodes x plugin cost + log n) instead of a full scan.
//
// Thread safety: none; one Placer per driver thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/request.h"
#include "sched/framework.h"
#include "sched/score_tree.h"
#include "state/cluster_state.h"

namespace tessera {

struct PlaceOptions {
  // Tally why nodes were filtered out when the task does not fit (costs a scan).
  bool explain = false;
};

struct Placement {
  bool placed = false;
  Allocation allocation;
  int64_t score = 0;
  uint32_t tied_nodes = 0;  // nodes that shared the best score
  // With PlaceOptions::explain and !placed: filter reasons and how many nodes each
  // excluded, and whether some node is only busy (so preemption could help).
  std::vector<std::pair<std::string, int>> reasons;
  bool busy_nodes_exist = false;
};

struct ScoreTerm {
  std::string plugin;
  int64_t score = 0;  // the plugin's own score
  int64_t weight = 0;
};

class Placer {
 public:
  // `tie_break` applies unless the profile sets its own.
  explicit Placer(Profile profile, TieBreak tie_break = TieBreak::kNodePriority);

  // Node ranks for TieBreak::kNodePriority: a permutation of 0..n-1 (lower wins).
  void SetNodeRanks(std::vector<uint32_t> ranks);

  const Profile& profile() const { return profile_; }

  Placement Place(const ClusterState& state, const TaskRequest& request, Rng& rng,
                  const PlaceOptions& options = {});

  // Like Place, restricted to `nodes` (a rack, a node group); scans them, no caching.
  Placement PlaceWithin(const ClusterState& state, const TaskRequest& request,
                        std::span<const NodeId> nodes, Rng& rng);

  // Filter outcome on one node: the first failing filter, or Fits.
  FilterResult Check(const NodeLedger& node, const TaskRequest& request) const;
  // Each scorer's view of one node (like Slurm's sprio): empty if the node is infeasible.
  std::vector<ScoreTerm> Explain(const NodeLedger& node, const TaskRequest& request);

  // Number of request classes with live caches (for tests and benchmarks).
  size_t cached_classes() const { return classes_.size(); }

 private:
  struct RequestHash {
    size_t operator()(const TaskRequest& r) const;
  };
  struct ClassCache {
    uint64_t state_uid = 0;
    uint64_t synced_seq = 0;
    ScoreTree tree;
    std::vector<GpuChoice> choices;
  };
  static constexpr size_t kMaxClasses = 4096;

  // Total weighted score, or kInfeasibleScore; `choice` gets a scorer's GPU pick.
  int64_t Evaluate(const NodeLedger& node, const TaskRequest& request, GpuChoice* choice);
  // Best node of `nodes` (all nodes when null) by a full evaluation.
  Placement Scan(const ClusterState& state, const TaskRequest& request,
                 const std::span<const NodeId>* nodes, Rng& rng);
  void Sync(ClassCache& cache, const ClusterState& state, const TaskRequest& request);
  Placement Finish(const ClusterState& state, const TaskRequest& request, NodeId node,
                   int64_t score, uint32_t tied, GpuChoice choice, Rng& rng);
  uint32_t RankOf(size_t node) const;
  void ExplainFailure(const ClusterState& state, const TaskRequest& request, Placement* out) const;

  Profile profile_;
  TieBreak tie_break_;
  std::vector<uint32_t> ranks_;
  bool cacheable_ = true;
  std::unordered_map<TaskRequest, ClassCache, RequestHash> classes_;
  std::vector<NodeId> changed_;       // scratch
  std::vector<uint64_t> seen_stamp_;  // scratch: dedupes changed nodes
  uint64_t stamp_ = 0;
};

}  // namespace tessera
