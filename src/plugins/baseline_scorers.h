// The baseline scorers of the FGD paper's study (Weng et al., USENIX ATC'23), with
// the semantics of its public simulator, so that Tessera reproduces the published
// comparison. All scores are integers in [0, 100], truncated as the original does;
// the resulting ties are broken at random by the Placer, as kube-scheduler does.
//
// `NodeScale` normalises node resources: the CPU and GPU of the largest node in the
// cluster (128 cores and 8 GPUs in the Alibaba trace). Thread safety: stateless.
#pragma once

#include <array>
#include <cstdint>

#include "model/gpu_catalog.h"
#include "sched/framework.h"

namespace tessera {

struct NodeScale {
  int64_t max_cpu_milli = 128000;
  int64_t max_gpu_milli = 8000;
  // The cluster's GPUs of each model (by GpuModelId), for scorers that weigh a
  // model's scarcity (TesseraScorer); all 0 when unknown.
  std::array<int64_t, GpuModelSet::kMaxModels> model_gpus{};
};

// Every feasible node scores the same: the node is uniform among feasible ones.
// Pair with GpuSelection::kRandom.
class RandomScorer final : public ScorePlugin {
 public:
  std::string_view name() const override { return "random"; }
  NodeScore Score(const NodeLedger&, const TaskRequest&) override { return {0, {}}; }
};

// Least resources left after placement (CPU and GPU, equally weighted).
class BestFitScorer final : public ScorePlugin {
 public:
  explicit BestFitScorer(NodeScale scale) : scale_(scale) {}
  std::string_view name() const override { return "bestfit"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

 private:
  NodeScale scale_;
};

// Smallest dot product of the node's free (CPU, GPU) and the request's.
class DotProductScorer final : public ScorePlugin {
 public:
  explicit DotProductScorer(NodeScale scale) : scale_(scale) {}
  std::string_view name() const override { return "dotprod"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

 private:
  NodeScale scale_;
};

// Packs shares onto partly used GPUs first, then onto used nodes, then empty ones.
class GpuPackingScorer final : public ScorePlugin {
 public:
  std::string_view name() const override { return "gpupacking"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;
};

// Puts a task beside tasks of the same GPU shape (share, 1-GPU, 2-GPU, ...).
class GpuClusteringScorer final : public ScorePlugin {
 public:
  explicit GpuClusteringScorer(NodeScale scale) : scale_(scale) {}
  std::string_view name() const override { return "gpuclustering"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

 private:
  NodeScale scale_;
};

// GPU milli the request takes in all (a MIG instance counts its charged share).
int64_t RequestGpuMilli(const NodeLedger& node, const TaskRequest& request);

}  // namespace tessera
