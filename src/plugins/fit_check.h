// FitCheck: could a job ever run on the cluster's nodes as they are (their specs and
// drains), whatever else runs? The answer that lets the controller refuse a job at
// submission and say "never fits" for a pending one.
//
// It runs the placer's Filter plugins (ResourceFit, GpuFit, GpuLocality: every
// profile's filters) against EMPTY copies of the schedulable nodes (present and not
// drained; drained GPUs stay unusable), task by task, then places the whole gang on
// those empty copies first-fit (largest tasks first) as the placer would, within one
// topology group (node, NVLink domain, rack, block) when the job's scope is hard.
// The gangs users submit are `replicas` copies of one task, for which first-fit on
// empty nodes is exact up to GPU locality and MIG geometry.
//
// A "never" answer names what is missing, e.g. "never fits: a task asks 90 GiB of GPU
// memory per GPU; the largest GPU has 79.6 GiB (H100-80GB)".
//
// Pure: no I/O, no clock. Thread safety: a FitChecker is immutable after
// construction; Check may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/job.h"
#include "sched/framework.h"
#include "state/cluster_state.h"

namespace tessera {

struct FitVerdict {
  bool fits = true;
  // When !fits: "never fits: ...", or with `no_schedulable_node` "no node is up" or
  // "held by a drain: every node is drained (...)" (a cluster starting up or in
  // maintenance, which a submission should not be refused for).
  std::string reason;
  bool no_schedulable_node = false;
};

class FitChecker {
 public:
  // kEmpty: the nodes present in `live`, with its drains, emptied (Check's "ever").
  // kAsIs: a copy of `live` as it is (GangPlaces' "now").
  enum class Copy { kEmpty, kAsIs };
  // `filters` null: the filters every placement profile starts with.
  explicit FitChecker(
      const ClusterState& live, Copy copy = Copy::kEmpty,
      std::shared_ptr<const std::vector<std::unique_ptr<FilterPlugin>>> filters = nullptr);
  FitChecker(FitChecker&&) noexcept;
  FitChecker& operator=(FitChecker&&) noexcept;
  ~FitChecker();

  // Nodes present (drained ones included).
  size_t nodes() const { return node_count_; }
  // Whether the job could ever run on the (empty) copy; kEmpty copies only.
  FitVerdict Check(const JobSpec& spec) const;
  // Whether the whole gang could be placed on the copy as it is, first fit, within one
  // group of its hard topology scope.
  bool GangPlaces(const JobSpec& spec) const;

  // The copy (kEmpty: null when no node is present).
  const ClusterState& state() const { return *empty_; }
  // The first filter the task fails on `node` of the copy, else Fits (drains aside).
  FilterResult Filter(const NodeLedger& node, const TaskRequest& task) const;

  // ResourceFit, GpuFit, GpuLocality.
  static std::shared_ptr<const std::vector<std::unique_ptr<FilterPlugin>>> StandardFilters();

 private:
  // Nodes grouped by a hard topology scope, in schedulable order: group k is
  // nodes[starts[k], starts[k + 1]). Built once per scope, on first use.
  struct Grouping {
    std::vector<NodeId> nodes;
    std::vector<size_t> starts;
  };
  struct GroupCache;
  // Running sums of CPU, memory and GPU milli over a gang's tasks in placing order.
  struct Prefix {
    std::vector<int64_t> cpu, memory, gpu_milli;
  };

  // Why no schedulable node can hold `task` even when empty; "" when some can.
  std::string TaskNeverFits(const TaskRequest& task) const;
  // Tasks of `order` placed first-fit on `nodes` of the copy (copying only the nodes a
  // task goes to); how many were placed before the first that found no room.
  size_t PlaceGang(const std::vector<const TaskRequest*>& order,
                   std::span<const NodeId> nodes) const;
  // The gang's tasks, largest first (equal ones together), and the node groups it may
  // use (one group of every schedulable node unless its scope is hard).
  static std::vector<const TaskRequest*> Order(const JobSpec& spec);
  std::vector<std::span<const NodeId>> Groups(const JobSpec& spec) const;
  const Grouping& GroupsFor(TopologyScope scope) const;
  // How many tasks of the order's head the free CPU, memory and GPU milli of `nodes`
  // add up to: PlaceGang places no more there, so a group below the gang is skipped.
  static Prefix PrefixOf(const std::vector<const TaskRequest*>& order);
  size_t RoomBound(const Prefix& prefix, std::span<const NodeId> nodes) const;
  bool Passes(const NodeLedger& node, const TaskRequest& task) const;
  // " (2 drained: node n3 GPU 5, node n4)" for the drained GPUs that could serve
  // `task`; "" when none.
  std::string DrainNote(const TaskRequest& task) const;

  // The present nodes of the live state, empty, drains applied; null when none.
  std::unique_ptr<ClusterState> empty_;
  std::shared_ptr<const std::vector<std::unique_ptr<FilterPlugin>>> filters_;
  std::vector<NodeId> schedulable_;
  size_t node_count_ = 0;
  std::unique_ptr<GroupCache> groups_;
};

}  // namespace tessera
