#include "plugins/fgd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include "sched/gpu_selection.h"

namespace tessera {
namespace {

constexpr int kMaxGpus = kMaxGpusPerNode;

using ShapeKey = std::tuple<int64_t, int64_t, int, uint64_t>;  // cpu, milli, count, models

}  // namespace

void AddModelDemand(std::vector<ModelDemand>& demand, const GpuModelSet& models, double milli) {
  for (ModelDemand& d : demand) {
    if (d.models == models) {
      d.milli += milli;
      return;
    }
  }
  demand.push_back(ModelDemand{models, milli});
}

TypicalWorkload FindTypicalTasks(std::span<const TaskRequest> requests, double coverage) {
  std::map<ShapeKey, TypicalTask> groups;
  std::vector<ModelDemand> demand;
  for (const TaskRequest& r : requests) {
    if (r.wants_mig()) {
      continue;  // MIG instances follow MIG geometry, not milli shares
    }
    int64_t milli = r.cpu_only() ? 0 : r.gpu_milli.value();
    if (milli > 0) {
      AddModelDemand(demand, r.models, static_cast<double>(milli * r.gpu_count));
    }
    ShapeKey key{r.cpu.value(), milli, r.gpu_count, r.models.bits()};
    TypicalTask& t = groups[key];
    t.cpu = r.cpu;
    t.gpu_milli = MilliGpu(milli);
    t.gpu_count = r.gpu_count;
    t.models = r.models;
    ++t.count;
    t.memory += r.memory;  // summed here, averaged below
  }
  for (auto& [key, t] : groups) {
    t.memory = MiB(t.memory.value() / t.count);
  }
  std::vector<std::pair<ShapeKey, TypicalTask>> sorted(groups.begin(), groups.end());
  // Most frequent first; among equals the larger shape first (the authors' order).
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) {
      return a.second.count > b.second.count;
    }
    return a.first > b.first;
  });
  TypicalWorkload w;
  w.total = static_cast<int64_t>(requests.size());
  w.gpu_demand = std::move(demand);
  for (const auto& [key, task] : sorted) {
    if (static_cast<double>(w.covered) >= coverage * static_cast<double>(w.total)) {
      break;
    }
    w.tasks.push_back(task);
    w.covered += task.count;
  }
  return w;
}

FragmentationModel::FragmentationModel(TypicalWorkload workload) : workload_(std::move(workload)) {
  if (workload_.covered == 0) {
    workload_.covered = 1;  // no typical tasks: fragmentation is 0 everywhere
  }
}

int64_t FragmentationModel::ScaledFrag(int64_t cpu_left, std::span<const int32_t> left,
                                       std::span<const GpuModelId> models) const {
  int64_t idle = 0;
  for (int32_t l : left) {
    idle += l;
  }
  int64_t total = 0;
  for (const TypicalTask& t : workload_.tasks) {
    if (t.gpu_milli.value() == 0 || cpu_left < t.cpu.value()) {
      total += t.count * idle;
      continue;
    }
    int usable = 0;
    int64_t unusable_milli = 0;
    for (size_t g = 0; g < left.size(); ++g) {
      if (left[g] >= t.gpu_milli.value() && t.models.Allows(models[g])) {
        ++usable;
      } else {
        unusable_milli += left[g];
      }
    }
    total += t.count * (usable >= t.gpu_count ? unusable_milli : idle);
  }
  return total;
}

int64_t FragmentationModel::ScaledFrag(const NodeLedger& node) const {
  std::array<int32_t, kMaxGpus> left{};
  std::array<GpuModelId, kMaxGpus> models{};
  const int n = node.gpu_count();
  for (int g = 0; g < n; ++g) {
    left[g] = static_cast<int32_t>(node.gpus()[g].free_milli().value());
    models[g] = node.gpus()[g].model().id;
  }
  return ScaledFrag(node.free_cpu().value(), std::span<const int32_t>(left.data(), n),
                    std::span<const GpuModelId>(models.data(), n));
}

void FragmentationModel::ScaledFragAfterShare(const NodeLedger& node, int64_t cpu, int64_t milli,
                                              std::span<const uint8_t> candidates,
                                              std::span<int64_t> out) const {
  const int n = node.gpu_count();
  std::array<int32_t, kMaxGpus> left{};
  int64_t idle = 0;
  for (int g = 0; g < n; ++g) {
    left[g] = static_cast<int32_t>(node.gpus()[g].free_milli().value());
    idle += left[g];
    out[g] = 0;
  }
  const int64_t cpu_after = node.free_cpu().value() - cpu;
  const int64_t idle_after = idle - milli;
  for (const TypicalTask& t : workload_.tasks) {
    const int64_t m = t.gpu_milli.value();
    if (m == 0 || cpu_after < t.cpu.value()) {
      for (int g = 0; g < n; ++g) {
        out[g] += t.count * idle_after;
      }
      continue;
    }
    // Per-node counts before the change, then adjust for each candidate GPU.
    int usable = 0;
    int64_t unusable_milli = 0;
    std::array<bool, kMaxGpus> allowed{};
    for (int g = 0; g < n; ++g) {
      allowed[g] = t.models.Allows(node.gpus()[g].model().id);
      if (allowed[g] && left[g] >= m) {
        ++usable;
      } else {
        unusable_milli += left[g];
      }
    }
    for (int g = 0; g < n; ++g) {
      if (candidates[g] == 0) {
        continue;
      }
      const int64_t before = left[g];
      const int64_t after = before - milli;
      const bool was = allowed[g] && before >= m;
      const bool is = allowed[g] && after >= m;
      const int u = usable - (was ? 1 : 0) + (is ? 1 : 0);
      const int64_t un = unusable_milli - (was ? 0 : before) + (is ? 0 : after);
      out[g] += t.count * (u >= t.gpu_count ? un : idle_after);
    }
  }
}

int64_t ScaledFragAfter(const FragmentationModel& model, const NodeLedger& node,
                        const TaskRequest& request, uint64_t gpu_mask) {
  std::array<int32_t, kMaxGpus> left{};
  std::array<GpuModelId, kMaxGpus> models{};
  const int n = node.gpu_count();
  const int64_t per_gpu = request.wants_mig() ? 0 : request.gpu_milli.value();
  for (int g = 0; g < n; ++g) {
    left[g] = static_cast<int32_t>(node.gpus()[g].free_milli().value());
    if ((gpu_mask >> g) & 1U) {
      left[g] -= static_cast<int32_t>(per_gpu);
    }
    models[g] = node.gpus()[g].model().id;
  }
  return model.ScaledFrag(node.free_cpu().value() - request.cpu.value(),
                          std::span<const int32_t>(left.data(), n),
                          std::span<const GpuModelId>(models.data(), n));
}

int64_t FgdScorer::SigmoidScore(double delta_milli) {
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(-delta_milli / 1000.0)));
}

std::optional<int64_t> ScaledFragAfterWhole(const FragmentationModel& model, const NodeLedger& node,
                                            const TaskRequest& request) {
  uint64_t mask = 0;
  if (!request.cpu_only() && !request.wants_mig()) {
    std::optional<uint64_t> whole = PickWholeGpus(node, request);
    if (!whole) {
      return std::nullopt;
    }
    mask = *whole;
  }
  return ScaledFragAfter(model, node, request, mask);
}

NodeScore FgdScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  const auto scale = static_cast<double>(model_->scale());
  const int64_t before = model_->ScaledFrag(node);
  auto score = [&](int64_t after) {
    return SigmoidScore(static_cast<double>(before - after) / scale);
  };
  if (request.fractional()) {
    return BestShareGpu(*model_, node, request,
                        [&](int /*gpu*/, int64_t after) { return score(after); });
  }
  std::optional<int64_t> after = ScaledFragAfterWhole(*model_, node, request);
  return after ? NodeScore{score(*after), {}} : NodeScore{kInfeasibleScore, {}};
}

}  // namespace tessera
