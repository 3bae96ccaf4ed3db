// Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation: Scheduling
// GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC'23).
//
// Typical tasks: the most frequent task shapes (CPU, per-GPU milli, GPU count, GPU
// models) of a workload, most frequent first, until they cover 95% of its tasks;
// each weighs its share of the covered tasks.
//
// A node's fragmentation, for one typical task, is the idle GPU milli that task
// could not use: all of the node's idle GPU if the task does not fit on the node
// (not enough CPU, too few GPUs with room, or a CPU-only task), otherwise the idle
// milli of the GPUs too full (or of a model it cannot use) to serve it. The node's
// fragmentation is the popularity-weighted sum over typical tasks. FGD places a
// task on the node and GPU that grow fragmentation least, scored as
// int(100 * sigmoid((F_before - F_after) / 1000)) like the authors' simulator.
//
// Arithmetic is exact: fragmentation is kept scaled by the typical-task count
// total (integers), and divided only to form the score. Thread safety: immutable
// after construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/request.h"
#include "sched/framework.h"
#include "sched/gpu_selection.h"

namespace tessera {

struct TypicalTask {
  MilliCpu cpu{0};
  MilliGpu gpu_milli{0};  // per GPU; 0 for CPU-only tasks
  int gpu_count = 0;
  GpuModelSet models;
  int64_t count = 0;  // tasks of this shape in the workload
  MiB memory{0};      // mean host memory of the tasks of this shape (not part of the shape)
};

// GPU demand, in milli-GPU, of the tasks allowed exactly `models` (empty: any model).
struct ModelDemand {
  GpuModelSet models;
  double milli = 0;
};

struct TypicalWorkload {
  std::vector<TypicalTask> tasks;  // most frequent first
  int64_t covered = 0;             // sum of counts of the selected shapes
  int64_t total = 0;               // tasks in the workload
  // The GPU demand of every task, typical or not, by the models it is allowed, in the
  // units of `count` (the tessera scorer's scarcity reads it: a shape pinned to a small
  // model is too rare to be typical, yet it is that model's demand). Empty when unknown
  // (a hand-made workload): readers then use the typical tasks.
  std::vector<ModelDemand> gpu_demand;
};

// Adds `milli` of demand for `models` to `demand`.
void AddModelDemand(std::vector<ModelDemand>& demand, const GpuModelSet& models, double milli);

// The typical tasks of `requests` covering at least `coverage` of them. MIG requests
// are left out: their placement follows MIG geometry, not milli shares.
TypicalWorkload FindTypicalTasks(std::span<const TaskRequest> requests, double coverage = 0.95);

class FragmentationModel {
 public:
  explicit FragmentationModel(TypicalWorkload workload);

  const TypicalWorkload& workload() const { return workload_; }
  int64_t scale() const { return workload_.covered; }

  // Fragmentation of a node in milli-GPU times scale().
  int64_t ScaledFrag(const NodeLedger& node) const;
  // Same for a hypothetical state: free CPU and per-GPU free milli and models.
  int64_t ScaledFrag(int64_t cpu_left, std::span<const int32_t> gpu_left,
                     std::span<const GpuModelId> gpu_models) const;
  double FragMilli(const NodeLedger& node) const {
    return static_cast<double>(ScaledFrag(node)) / static_cast<double>(scale());
  }

  // Scaled fragmentation after giving `milli` of GPU g and `cpu` of CPU to a task,
  // for every candidate GPU g at once (out[g]; entries of non-candidates are
  // meaningless). O(tasks x GPUs) for all candidates together.
  void ScaledFragAfterShare(const NodeLedger& node, int64_t cpu, int64_t milli,
                            std::span<const uint8_t> candidates, std::span<int64_t> out) const;

 private:
  TypicalWorkload workload_;
};

class FgdScorer final : public ScorePlugin {
 public:
  explicit FgdScorer(const FragmentationModel* model) : model_(model) {}
  std::string_view name() const override { return "fgd"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

  // int(100 * sigmoid(delta_milli / 1000)), the authors' mapping of a fragmentation
  // decrease to 0..100 (100 only past a decrease of ~36,700 milli).
  static int64_t SigmoidScore(double delta_milli);

 private:
  const FragmentationModel* model_;
};

// Scaled fragmentation of `node` after the request lands on the GPUs of `choice`
// (whole GPUs, or CPU only). Shares use FragmentationModel::ScaledFragAfterShare.
int64_t ScaledFragAfter(const FragmentationModel& model, const NodeLedger& node,
                        const TaskRequest& request, uint64_t gpu_mask);

// For a request that is not a share: scaled fragmentation after it takes its CPU and
// the whole GPUs the Placer would give it (none for CPU-only and MIG requests), or
// nullopt when the node lacks the free GPUs.
std::optional<int64_t> ScaledFragAfterWhole(const FragmentationModel& model, const NodeLedger& node,
                                            const TaskRequest& request);

inline constexpr int kMaxGpusPerNode = 64;

// For a share: the GPU with the highest `key(gpu, scaled_frag_after)` among those that
// can take it (the first on ties), as a NodeScore; kInfeasibleScore when none can.
template <typename KeyFn>
NodeScore BestShareGpu(const FragmentationModel& model, const NodeLedger& node,
                       const TaskRequest& request, KeyFn key) {
  const int n = node.gpu_count();
  std::array<uint8_t, kMaxGpusPerNode> candidates{};
  std::array<int64_t, kMaxGpusPerNode> after{};
  for (int g = 0; g < n; ++g) {
    candidates[g] = GpuFitsRequest(node.gpus()[g], request) ? 1 : 0;
  }
  model.ScaledFragAfterShare(node, request.cpu.value(), request.gpu_milli.value(),
                             std::span<const uint8_t>(candidates.data(), n),
                             std::span<int64_t>(after.data(), n));
  NodeScore best{kInfeasibleScore, {}};
  for (int g = 0; g < n; ++g) {
    if (candidates[g] == 0) {
      continue;
    }
    const int64_t k = key(g, after[g]);
    if (k > best.score) {
      best = {k, GpuChoice{uint64_t{1} << g, -1}};
    }
  }
  return best;
}

}  // namespace tessera
