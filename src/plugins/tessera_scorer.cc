#include "plugins/tessera_scorer.h"

#include <algorithm>
#include <array>

#include "plugins/baseline_scorers.h"
#include "sched/gpu_selection.h"

namespace tessera {
namespace {

// Packs the sigmoid level and the share's GPU fit into one integer.
int64_t Key(int64_t level, int64_t leftover_on_gpu) {
  return level * 16 + (10 - leftover_on_gpu / 100);
}

}  // namespace

TesseraScorer::TesseraScorer(const FragmentationModel* model) : model_(model) {
  double cpu = 0;
  double memory = 0;
  double gpu = 0;
  for (const TypicalTask& t : model_->workload().tasks) {
    if (t.gpu_count == 0 || t.gpu_milli.value() == 0) {
      continue;  // CPU-only (and, defensively, MIG) tasks say nothing of CPU per GPU
    }
    const auto n = static_cast<double>(t.count);
    cpu += n * static_cast<double>(t.cpu.value());
    memory += n * static_cast<double>(t.memory.value());
    gpu += n * static_cast<double>(t.gpu_milli.value() * t.gpu_count);
  }
  if (gpu > 0) {
    cpu_per_gpu_ = cpu / gpu;
    memory_per_gpu_ = memory / gpu;
  }
}

double TesseraScorer::StrandedGpu(double free_cpu, double free_memory, double free_gpu) const {
  double fed = free_gpu;
  if (cpu_per_gpu_ > 0) {
    fed = std::min(fed, free_cpu / cpu_per_gpu_);
  }
  if (memory_per_gpu_ > 0) {
    fed = std::min(fed, free_memory / memory_per_gpu_);
  }
  return std::max(0.0, free_gpu - fed);
}

NodeScore TesseraScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  const auto scale = static_cast<double>(model_->scale());
  const int64_t frag_before = model_->ScaledFrag(node);
  const auto free_gpu = static_cast<double>(node.free_gpu_milli().value());
  const double stranded_growth =
      StrandedGpu(static_cast<double>(node.free_cpu().value() - request.cpu.value()),
                  static_cast<double>(node.free_memory().value() - request.memory.value()),
                  free_gpu - static_cast<double>(RequestGpuMilli(node, request))) -
      StrandedGpu(static_cast<double>(node.free_cpu().value()),
                  static_cast<double>(node.free_memory().value()), free_gpu);
  auto level = [&](int64_t frag_after) {
    double gain = static_cast<double>(frag_before - frag_after) / scale - stranded_growth;
    return FgdScorer::SigmoidScore(gain);
  };

  if (request.fractional()) {
    return BestShareGpu(*model_, node, request, [&](int gpu, int64_t after) {
      const int64_t leftover = node.gpus()[gpu].free_milli().value() - request.gpu_milli.value();
      return Key(level(after), leftover);
    });
  }
  std::optional<int64_t> after = ScaledFragAfterWhole(*model_, node, request);
  return after ? NodeScore{Key(level(*after), 0), {}} : NodeScore{kInfeasibleScore, {}};
}

}  // namespace tessera
