#include "plugins/workload_learner.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tessera {
namespace {

// Typical-task counts are integers: each shape's share of the decayed total in these
// units (fine enough that a shape of weight 1e-6 still counts).
constexpr double kCountUnits = 1'000'000;
// Weights grow by the increment instead of all decaying; rescaled before they overflow.
constexpr double kRescaleAbove = 1e200;
// A shape unseen for 30 half-lives weighs under 1e-9 of a new task: forgotten, so that
// the shapes kept (walked by every Refresh, written with the history) stay those of the
// recent workload. Checked every kPruneEvery tasks.
constexpr double kForgetBelow = 0x1p-30;
constexpr int64_t kPruneEvery = 4096;

GpuModelSet ModelsFromBits(uint64_t bits) {
  GpuModelSet set;
  for (uint32_t b = 0; b < 64; ++b) {
    if ((bits >> b) & 1U) {
      set.Add(GpuModelId(b));
    }
  }
  return set;
}

}  // namespace

WorkloadLearner::WorkloadLearner() : WorkloadLearner(Options{}) {}

WorkloadLearner::WorkloadLearner(Options options) : options_(options) {}

void WorkloadLearner::Observe(const TaskRequest& task) {
  if (task.wants_mig()) {
    return;  // MIG instances follow MIG geometry, not milli shares
  }
  const int64_t milli = task.cpu_only() ? 0 : task.gpu_milli.value();
  Weight& w = weights_[Key{task.cpu.value(), milli, task.gpu_count, task.models.bits()}];
  w.weight += increment_;
  w.memory_weighted += increment_ * static_cast<double>(task.memory.value());
  total_ += increment_;
  ++observed_;
  dirty_ = true;
  increment_ *= std::exp2(1.0 / std::max(1.0, options_.half_life_tasks));
  if (increment_ > kRescaleAbove || observed_ % kPruneEvery == 0) {
    Rescale();
  }
}

void WorkloadLearner::ObserveJob(const JobSpec& spec) {
  for (const TaskRequest& t : spec.tasks) {
    Observe(t);
  }
}

void WorkloadLearner::Rescale() {
  const double by = increment_;
  increment_ = 1.0;
  total_ = 0;
  for (auto it = weights_.begin(); it != weights_.end();) {
    it->second.weight /= by;
    it->second.memory_weighted /= by;
    if (it->second.weight < kForgetBelow) {
      it = weights_.erase(it);  // not seen for 30 half-lives
      continue;
    }
    total_ += it->second.weight;
    ++it;
  }
}

double WorkloadLearner::DistanceFromPublished() const {
  double distance = 0;
  for (const auto& [key, w] : weights_) {
    auto it = published_.find(key);
    distance += std::abs(w.weight / total_ - (it == published_.end() ? 0.0 : it->second));
  }
  for (const auto& [key, share] : published_) {
    if (weights_.count(key) == 0) {
      distance += share;
    }
  }
  return distance / 2;
}

TypicalWorkload WorkloadLearner::Typical() const {
  TypicalWorkload w;
  if (total_ <= 0) {
    return w;
  }
  std::vector<std::pair<Key, const Weight*>> sorted;
  sorted.reserve(weights_.size());
  for (const auto& [key, weight] : weights_) {
    sorted.emplace_back(key, &weight);
    // Every shape's GPU demand, in the count units below, typical or not (fgd.h).
    if (std::get<1>(key) > 0) {
      AddModelDemand(w.gpu_demand, ModelsFromBits(std::get<3>(key)),
                     weight.weight / total_ * kCountUnits *
                         static_cast<double>(std::get<1>(key) * std::get<2>(key)));
    }
  }
  // Heaviest first; among equals the larger shape first (FindTypicalTasks' order).
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second->weight != b.second->weight) {
      return a.second->weight > b.second->weight;
    }
    return a.first > b.first;
  });
  w.total = static_cast<int64_t>(kCountUnits);
  for (const auto& [key, weight] : sorted) {
    if (static_cast<double>(w.covered) >= options_.coverage * static_cast<double>(w.total)) {
      break;
    }
    const auto count =
        std::max<int64_t>(1, std::llround(weight->weight / total_ * kCountUnits));
    TypicalTask t;
    t.cpu = MilliCpu(std::get<0>(key));
    t.gpu_milli = MilliGpu(std::get<1>(key));
    t.gpu_count = std::get<2>(key);
    t.models = ModelsFromBits(std::get<3>(key));
    t.count = count;
    t.memory = MiB(std::llround(weight->memory_weighted / weight->weight));
    w.tasks.push_back(t);
    w.covered += count;
  }
  return w;
}

bool WorkloadLearner::Refresh() {
  if (!dirty_ || total_ <= 0) {
    return false;
  }
  dirty_ = false;
  if (model_ != nullptr && DistanceFromPublished() <= options_.republish_distance) {
    return false;
  }
  previous_ = std::move(model_);
  model_ = std::make_unique<FragmentationModel>(Typical());
  published_.clear();
  for (const auto& [key, w] : weights_) {
    published_[key] = w.weight / total_;
  }
  ++models_made_;
  return true;
}

WorkloadLearner::Saved WorkloadLearner::Save() const {
  Saved saved;
  saved.observed = observed_;
  for (const auto& [key, w] : weights_) {
    // Relative to the newest task's weight, so the numbers stay readable.
    saved.shapes.push_back(Shape{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                                 std::get<3>(key), w.weight / increment_,
                                 w.memory_weighted / increment_});
  }
  return saved;
}

Status WorkloadLearner::Restore(const Saved& saved) {
  std::map<Key, Weight> weights;
  double total = 0;
  for (const Shape& s : saved.shapes) {
    if (!std::isfinite(s.weight) || !std::isfinite(s.memory_weighted) || s.weight < 0 ||
        s.memory_weighted < 0 || s.cpu < 0 || s.gpu_milli < 0 || s.gpu_count < 0) {
      return InvalidArgumentError("stored workload shape is malformed");
    }
    if (s.weight == 0) {
      continue;
    }
    Weight& w = weights[Key{s.cpu, s.gpu_milli, s.gpu_count, s.models}];
    w.weight += s.weight;
    w.memory_weighted += s.memory_weighted;
    total += s.weight;
  }
  weights_ = std::move(weights);
  total_ = total;
  increment_ = 1.0;
  observed_ = std::max<int64_t>(0, saved.observed);
  published_.clear();
  model_.reset();
  dirty_ = total_ > 0;
  return Status::Ok();
}

}  // namespace tessera
