// TesseraScorer: Tessera's default placement score.
//
// FGD (plugins/fgd.h) steers each task to the node and GPU where the workload's
// typical tasks lose least idle GPU to fragmentation. It judges each typical task
// alone, so it does not see a node running out of CPU or memory before its GPUs:
// eight GPUs with 10 free cores cannot host eight tasks that need 11 cores each.
// Tessera adds that term. A node's *stranded GPU* is the idle GPU milli its free
// CPU and memory cannot feed at the workload's own ratios,
//
//   stranded = max(0, free_gpu - min(free_cpu / cpu_per_gpu, free_mem / mem_per_gpu)),
//
// where cpu_per_gpu and mem_per_gpu are the typical GPU tasks' CPU and memory per
// milli-GPU. A placement is scored by the fragmentation it removes minus the
// stranded GPU it adds, both in milli-GPU, through FGD's sigmoid into 100 levels:
// low-CPU tasks go where CPU is scarce, CPU-hungry ones where it is plentiful, and
// nodes stay able to use their GPUs. Among equal levels a share goes to the GPU
// it fills best (in 100-milli steps); remaining ties go by node order (TieBreak).
//
// GPU models. When some typical tasks are pinned to GPU models, both terms are
// computed per model, from the typical tasks that may run on it: a node of model M
// counts fragmentation only for the tasks that could land on M (a task pinned to
// other models can never use M's idle GPU, so FGD's "all of it is fragment" for
// that task says nothing about how M is packed), and its stranded GPU uses the CPU
// and memory per GPU of those tasks (M's GPUs are fed by what may run on M, not by
// the whole workload). Weights stay each task's share of the whole workload. Without
// pinned typical tasks every model sees the whole workload, and the score is the
// same as before. Nodes with mixed GPU models use the whole workload.
//
// Scarcity. Per-model terms alone cannot see that a model's idle GPUs are needed:
// when pinned demand asks a model with few nodes for all it has, every other task
// placed there displaces a pinned one, which then finds no GPU. Given the cluster's
// GPUs per model, each model gets a *pressure*: the GPU demand of the tasks pinned to
// it (a task allowing several models spread over them by their GPUs), as a share of
// all GPU demand, over the model's share of the cluster's GPUs, capped at 1 (pinned
// demand then wants every GPU of it). Demand counts every task the workload saw
// (TypicalWorkload::gpu_demand), not the typical tasks only: shapes pinned to small
// models are the rare ones the coverage cutoff drops. A placement on a node of
// model M costs, subtracted from the gain, the idle GPU milli that M's pinned tasks
// could use and it takes (the GPU taken less the pinned tasks' fragmentation it
// removes, at most the GPU taken: filling a leftover they cannot use is free), times
// (pressure(M) - the mean pressure, by GPUs, of the models the task may use), when
// positive: a milli there displaces that much more pinned demand than an average
// milli of the supply the task could take. The baseline is the mean, not the least,
// pressure: a model of two GPUs that nothing is pinned to is no alternative for the
// thousands of GPUs a workload needs, and charging every other model against it
// shifted all scores alike, into ties (docs/fgd-replication.md). Placements on
// models at or below the mean, and tasks pinned to one model, are not charged;
// without pinned typical tasks every pressure is 0 and the score is as before.
//
// Thread safety: immutable after construction; Score is reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "plugins/fgd.h"
#include "sched/framework.h"

namespace tessera {

class TesseraScorer final : public ScorePlugin {
 public:
  using ModelGpus = std::array<int64_t, GpuModelSet::kMaxModels>;
  // `model_gpus`: the cluster's GPUs per model (NodeScale::model_gpus); all 0 leaves
  // scarcity out.
  explicit TesseraScorer(const FragmentationModel* model, const ModelGpus& model_gpus = {});
  std::string_view name() const override { return "tessera"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

  // Idle GPU milli the given free CPU and memory cannot feed, at the whole workload's
  // ratios (StrandedGpuOn: at those of the tasks that may use `model`).
  double StrandedGpu(double free_cpu, double free_memory, double free_gpu) const;
  double StrandedGpuOn(GpuModelId model, double free_cpu, double free_memory,
                       double free_gpu) const;
  double cpu_per_gpu() const { return views_[0].cpu_per_gpu; }
  double memory_per_gpu() const { return views_[0].memory_per_gpu; }
  double cpu_per_gpu(GpuModelId model) const { return ViewOf(model).cpu_per_gpu; }
  double memory_per_gpu(GpuModelId model) const { return ViewOf(model).memory_per_gpu; }
  // The fragmentation model a node of `model` is judged by (the typical tasks that
  // may use it; the whole workload when none is pinned).
  const FragmentationModel& fragmentation(GpuModelId model) const { return *ViewOf(model).model; }
  // How many distinct per-model views there are (1 when no typical task is pinned).
  int view_count() const { return static_cast<int>(views_.size()); }
  // The model's pressure in [0, 1] (see above); 0 for a model with no GPUs.
  double pressure(GpuModelId model) const {
    return pressure_[model.value() % GpuModelSet::kMaxModels];
  }
  // What each milli of idle GPU the pinned tasks could use costs when `request` takes
  // it on `node`: the node's model's pressure less the mean pressure, by GPUs, of the
  // models the request may use, or 0 (also on mixed nodes and without scarcity).
  double ScarcityWeight(const NodeLedger& node, const TaskRequest& request) const;

 private:
  struct View {
    const FragmentationModel* model = nullptr;  // views_[0]: the scorer's own model
    double cpu_per_gpu = 0;     // milli-CPU per milli-GPU of the view's typical GPU tasks
    double memory_per_gpu = 0;  // MiB per milli-GPU of the view's typical GPU tasks
  };
  const View& ViewOf(GpuModelId model) const {
    return views_[view_of_model_[model.value() % GpuModelSet::kMaxModels]];
  }
  // The view for a node: its GPUs' model's, or the whole workload's for a node
  // without GPUs or with mixed models.
  const View& ViewOf(const NodeLedger& node) const;
  static std::optional<GpuModelId> SingleModel(const NodeLedger& node);
  static View MakeView(const FragmentationModel* model);
  void MakeViews(const FragmentationModel* model);
  void MakePressure(const ModelGpus& model_gpus);
  void MakePinnedModels();
  // The typical tasks pinned to the node's model, or null when a placement there is
  // never charged.
  const FragmentationModel* PinnedOn(const NodeLedger& node) const;
  // The mean pressure, by GPUs, of the models with GPUs that `models` allows.
  double MeanPressure(const GpuModelSet& models) const;
  static double Stranded(const View& v, double free_cpu, double free_memory, double free_gpu);

  std::vector<View> views_;
  std::vector<std::unique_ptr<FragmentationModel>> owned_;  // the per-model models
  std::array<uint8_t, GpuModelSet::kMaxModels> view_of_model_{};
  std::array<double, GpuModelSet::kMaxModels> pressure_{};
  std::vector<std::unique_ptr<FragmentationModel>> pinned_models_;
  std::array<int16_t, GpuModelSet::kMaxModels> pinned_of_model_{};  // -1: none
  ModelGpus model_gpus_{};
  double mean_pressure_ = 0;  // over every model with GPUs
  bool scarcity_ = false;     // some model is pressed above the mean
};

}  // namespace tessera
