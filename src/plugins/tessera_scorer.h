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
// Thread safety: immutable after construction; Score is reentrant.
#pragma once

#include "plugins/fgd.h"
#include "sched/framework.h"

namespace tessera {

class TesseraScorer final : public ScorePlugin {
 public:
  explicit TesseraScorer(const FragmentationModel* model);
  std::string_view name() const override { return "tessera"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& request) override;

  // Idle GPU milli the given free CPU and memory cannot feed.
  double StrandedGpu(double free_cpu, double free_memory, double free_gpu) const;
  double cpu_per_gpu() const { return cpu_per_gpu_; }
  double memory_per_gpu() const { return memory_per_gpu_; }

 private:
  const FragmentationModel* model_;
  double cpu_per_gpu_ = 0;     // milli-CPU per milli-GPU of the typical GPU tasks
  double memory_per_gpu_ = 0;  // MiB per milli-GPU of the typical GPU tasks
};

}  // namespace tessera
