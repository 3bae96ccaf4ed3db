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

TesseraScorer::View TesseraScorer::MakeView(const FragmentationModel* model) {
  View v;
  v.model = model;
  double cpu = 0;
  double memory = 0;
  double gpu = 0;
  for (const TypicalTask& t : model->workload().tasks) {
    if (t.gpu_count == 0 || t.gpu_milli.value() == 0) {
      continue;  // CPU-only (and, defensively, MIG) tasks say nothing of CPU per GPU
    }
    const auto n = static_cast<double>(t.count);
    cpu += n * static_cast<double>(t.cpu.value());
    memory += n * static_cast<double>(t.memory.value());
    gpu += n * static_cast<double>(t.gpu_milli.value() * t.gpu_count);
  }
  if (gpu > 0) {
    v.cpu_per_gpu = cpu / gpu;
    v.memory_per_gpu = memory / gpu;
  }
  return v;
}

TesseraScorer::TesseraScorer(const FragmentationModel* model) {
  views_.push_back(MakeView(model));
  const std::vector<TypicalTask>& tasks = model->workload().tasks;
  bool any_pinned = false;
  for (const TypicalTask& t : tasks) {
    any_pinned = any_pinned || !t.models.empty();
  }
  if (!any_pinned) {
    return;  // every model sees the whole workload: one view
  }
  // One view per distinct set of typical tasks a model admits. Models no pinned task
  // names admit exactly the unpinned tasks, so the views stay few.
  std::vector<std::vector<bool>> signatures;
  for (size_t id = 0; id < GpuModelSet::kMaxModels; ++id) {
    const GpuModelId m(static_cast<uint16_t>(id));
    std::vector<bool> admits(tasks.size());
    bool all = true;
    for (size_t i = 0; i < tasks.size(); ++i) {
      admits[i] = tasks[i].models.Allows(m);
      all = all && admits[i];
    }
    if (all) {
      continue;  // view 0
    }
    auto found = std::find(signatures.begin(), signatures.end(), admits);
    if (found != signatures.end()) {
      view_of_model_[id] = static_cast<uint8_t>(1 + (found - signatures.begin()));
      continue;
    }
    TypicalWorkload w;
    w.total = model->workload().total;
    // Weights stay shares of the whole workload: a model few tasks may use is not
    // judged as if those few were all that arrives (renormalising over the admitted
    // tasks measured worse: docs/fgd-replication.md, "GPU models").
    w.covered = model->scale();
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (admits[i]) {
        w.tasks.push_back(tasks[i]);
      }
    }
    owned_.push_back(std::make_unique<FragmentationModel>(std::move(w)));
    views_.push_back(MakeView(owned_.back().get()));
    signatures.push_back(std::move(admits));
    view_of_model_[id] = static_cast<uint8_t>(views_.size() - 1);
  }
}

const TesseraScorer::View& TesseraScorer::ViewOf(const NodeLedger& node) const {
  const int n = node.gpu_count();
  if (views_.size() == 1 || n == 0) {
    return views_[0];
  }
  const GpuModelId model = node.gpus()[0].model().id;
  for (int g = 1; g < n; ++g) {
    if (node.gpus()[g].model().id != model) {
      return views_[0];
    }
  }
  return ViewOf(model);
}

double TesseraScorer::Stranded(const View& v, double free_cpu, double free_memory,
                               double free_gpu) {
  double fed = free_gpu;
  if (v.cpu_per_gpu > 0) {
    fed = std::min(fed, free_cpu / v.cpu_per_gpu);
  }
  if (v.memory_per_gpu > 0) {
    fed = std::min(fed, free_memory / v.memory_per_gpu);
  }
  return std::max(0.0, free_gpu - fed);
}

double TesseraScorer::StrandedGpu(double free_cpu, double free_memory, double free_gpu) const {
  return Stranded(views_[0], free_cpu, free_memory, free_gpu);
}

double TesseraScorer::StrandedGpuOn(GpuModelId model, double free_cpu, double free_memory,
                                    double free_gpu) const {
  return Stranded(ViewOf(model), free_cpu, free_memory, free_gpu);
}

NodeScore TesseraScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  const View& view = ViewOf(node);
  const FragmentationModel& model = *view.model;
  const auto scale = static_cast<double>(model.scale());
  const int64_t frag_before = model.ScaledFrag(node);
  const auto free_gpu = static_cast<double>(node.free_gpu_milli().value());
  const double stranded_growth =
      Stranded(view, static_cast<double>(node.free_cpu().value() - request.cpu.value()),
               static_cast<double>(node.free_memory().value() - request.memory.value()),
               free_gpu - static_cast<double>(RequestGpuMilli(node, request))) -
      Stranded(view, static_cast<double>(node.free_cpu().value()),
               static_cast<double>(node.free_memory().value()), free_gpu);
  auto level = [&](int64_t frag_after) {
    double gain = static_cast<double>(frag_before - frag_after) / scale - stranded_growth;
    return FgdScorer::SigmoidScore(gain);
  };

  if (request.fractional()) {
    return BestShareGpu(model, node, request, [&](int gpu, int64_t after) {
      const int64_t leftover = node.gpus()[gpu].free_milli().value() - request.gpu_milli.value();
      return Key(level(after), leftover);
    });
  }
  std::optional<int64_t> after = ScaledFragAfterWhole(model, node, request);
  return after ? NodeScore{Key(level(*after), 0), {}} : NodeScore{kInfeasibleScore, {}};
}

}  // namespace tessera
