#include "plugins/tessera_scorer.h"

#include <algorithm>
#include <array>
#include <optional>

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

// The model of every GPU of `node`; nullopt for a node without GPUs or with mixed models.
std::optional<GpuModelId> TesseraScorer::SingleModel(const NodeLedger& node) {
  const int n = node.gpu_count();
  if (n == 0) {
    return std::nullopt;
  }
  const GpuModelId model = node.gpus()[0].model().id;
  for (int g = 1; g < n; ++g) {
    if (node.gpus()[g].model().id != model) {
      return std::nullopt;
    }
  }
  return model;
}

TesseraScorer::TesseraScorer(const FragmentationModel* model, const ModelGpus& model_gpus) {
  MakeViews(model);
  MakePressure(model_gpus);
}

void TesseraScorer::MakeViews(const FragmentationModel* model) {
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

void TesseraScorer::MakePressure(const ModelGpus& model_gpus) {
  model_gpus_ = model_gpus;
  int64_t all_gpus = 0;
  for (int64_t g : model_gpus) {
    all_gpus += g;
  }
  // Each model's pinned GPU demand, a task allowing several models spread over them
  // by their GPUs (as the tasks would be if placed in proportion to supply). Counted
  // over every task seen, not the typical ones only: the coverage cutoff drops the
  // shapes pinned to small models first (too rare), which read those models' pressure
  // low and the large ones' high, and steered unpinned tasks onto the small models
  // where pins were proportional to supply (docs/fgd-replication.md, "Scarce models").
  std::vector<ModelDemand> by_models = views_[0].model->workload().gpu_demand;
  if (by_models.empty()) {
    for (const TypicalTask& t : views_[0].model->workload().tasks) {
      if (t.gpu_count > 0 && t.gpu_milli.value() > 0) {
        AddModelDemand(by_models, t.models,
                       static_cast<double>(t.count * t.gpu_milli.value() * t.gpu_count));
      }
    }
  }
  std::array<double, GpuModelSet::kMaxModels> pinned{};
  double demand = 0;
  for (const ModelDemand& d : by_models) {
    demand += d.milli;
    int64_t allowed = 0;
    for (size_t m = 0; m < model_gpus.size() && !d.models.empty(); ++m) {
      allowed += d.models.Contains(GpuModelId(static_cast<uint16_t>(m))) ? model_gpus[m] : 0;
    }
    for (size_t m = 0; m < model_gpus.size() && allowed > 0; ++m) {
      if (d.models.Contains(GpuModelId(static_cast<uint16_t>(m)))) {
        pinned[m] += d.milli * static_cast<double>(model_gpus[m]) / static_cast<double>(allowed);
      }
    }
  }
  if (all_gpus == 0 || demand == 0) {
    return;
  }
  for (size_t m = 0; m < model_gpus.size(); ++m) {
    if (model_gpus[m] > 0) {
      const double supply_share =
          static_cast<double>(model_gpus[m]) / static_cast<double>(all_gpus);
      pressure_[m] = std::min(1.0, pinned[m] / demand / supply_share);
      mean_pressure_ += supply_share * pressure_[m];
    }
  }
  for (size_t m = 0; m < model_gpus.size(); ++m) {
    scarcity_ = scarcity_ || (model_gpus[m] > 0 && pressure_[m] > mean_pressure_);
  }
  MakePinnedModels();
}

void TesseraScorer::MakePinnedModels() {
  pinned_of_model_.fill(-1);
  for (size_t m = 0; m < pressure_.size() && scarcity_; ++m) {
    if (pressure_[m] <= 0) {
      continue;  // no placement here is charged
    }
    // Weighed among themselves: the cost asks how much of the taken GPU they could
    // have used, on average over what is pinned here.
    TypicalWorkload w;
    for (const TypicalTask& t : views_[0].model->workload().tasks) {
      if (!t.models.empty() && t.gpu_count > 0 && t.gpu_milli.value() > 0 &&
          t.models.Contains(GpuModelId(static_cast<uint16_t>(m)))) {
        w.tasks.push_back(t);
        w.covered += t.count;
      }
    }
    w.total = w.covered;
    pinned_of_model_[m] = static_cast<int16_t>(pinned_models_.size());
    pinned_models_.push_back(std::make_unique<FragmentationModel>(std::move(w)));
  }
}

double TesseraScorer::MeanPressure(const GpuModelSet& models) const {
  if (models.empty()) {
    return mean_pressure_;
  }
  double weighted = 0;
  int64_t gpus = 0;
  for (size_t m = 0; m < model_gpus_.size(); ++m) {
    if (model_gpus_[m] > 0 && models.Contains(GpuModelId(static_cast<uint16_t>(m)))) {
      weighted += static_cast<double>(model_gpus_[m]) * pressure_[m];
      gpus += model_gpus_[m];
    }
  }
  return gpus > 0 ? weighted / static_cast<double>(gpus) : 0;
}

double TesseraScorer::ScarcityWeight(const NodeLedger& node, const TaskRequest& request) const {
  if (!scarcity_) {
    return 0;
  }
  const std::optional<GpuModelId> model = SingleModel(node);
  if (!model) {
    return 0;  // mixed models: no one model's pressure applies
  }
  return std::max(0.0, pressure(*model) - MeanPressure(request.models));
}

const FragmentationModel* TesseraScorer::PinnedOn(const NodeLedger& node) const {
  const std::optional<GpuModelId> model = SingleModel(node);
  if (!model) {
    return nullptr;
  }
  const int i = pinned_of_model_[model->value() % GpuModelSet::kMaxModels];
  return i < 0 ? nullptr : pinned_models_[static_cast<size_t>(i)].get();
}

const TesseraScorer::View& TesseraScorer::ViewOf(const NodeLedger& node) const {
  if (views_.size() == 1) {
    return views_[0];
  }
  const std::optional<GpuModelId> model = SingleModel(node);
  return model ? ViewOf(*model) : views_[0];
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
  const auto milli = static_cast<double>(RequestGpuMilli(node, request));
  const double stranded_growth =
      Stranded(view, static_cast<double>(node.free_cpu().value() - request.cpu.value()),
               static_cast<double>(node.free_memory().value() - request.memory.value()),
               free_gpu - milli) -
      Stranded(view, static_cast<double>(node.free_cpu().value()),
               static_cast<double>(node.free_memory().value()), free_gpu);
  // Scarcity: the idle GPU the pinned tasks could use that the placement takes, i.e.
  // the milli taken less the pinned tasks' fragmentation it removes (a leftover they
  // cannot use costs nothing). Capped at the milli taken: a milli displaces at most a
  // milli of pinned demand, and charging the whole node's idle GPU when a share makes
  // it unusable to a multi-GPU pinned task measured worse (docs/fgd-replication.md).
  const double weight = ScarcityWeight(node, request);
  const FragmentationModel* pinned = weight > 0 ? PinnedOn(node) : nullptr;
  const int64_t pinned_before = pinned != nullptr ? pinned->ScaledFrag(node) : 0;
  auto scarcity_cost = [&](int64_t pinned_after) {
    if (pinned == nullptr) {
      return 0.0;
    }
    const double freed =
        static_cast<double>(pinned_before - pinned_after) / static_cast<double>(pinned->scale());
    return weight * std::clamp(milli - freed, 0.0, milli);
  };
  auto level = [&](int64_t frag_after, int64_t pinned_after) {
    double gain = static_cast<double>(frag_before - frag_after) / scale - stranded_growth -
                  scarcity_cost(pinned_after);
    return FgdScorer::SigmoidScore(gain);
  };

  if (request.fractional()) {
    std::array<int64_t, kMaxGpusPerNode> pinned_after{};
    if (pinned != nullptr) {
      std::array<uint8_t, kMaxGpusPerNode> candidates{};
      const int n = node.gpu_count();
      for (int g = 0; g < n; ++g) {
        candidates[g] = GpuFitsRequest(node.gpus()[g], request) ? 1 : 0;
      }
      pinned->ScaledFragAfterShare(node, request.cpu.value(), request.gpu_milli.value(),
                                   std::span<const uint8_t>(candidates.data(), n),
                                   std::span<int64_t>(pinned_after.data(), n));
    }
    return BestShareGpu(model, node, request, [&](int gpu, int64_t after) {
      const int64_t leftover = node.gpus()[gpu].free_milli().value() - request.gpu_milli.value();
      return Key(level(after, pinned_after[gpu]), leftover);
    });
  }
  std::optional<int64_t> after = ScaledFragAfterWhole(model, node, request);
  if (!after) {
    return NodeScore{kInfeasibleScore, {}};
  }
  const int64_t pinned_after =
      pinned != nullptr ? ScaledFragAfterWhole(*pinned, node, request).value_or(0) : 0;
  return NodeScore{Key(level(*after, pinned_after), 0), {}};
}

}  // namespace tessera
