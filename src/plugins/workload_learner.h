// WorkloadLearner: the workload's typical tasks (plugins/fgd.h), learned online from the
// tasks submitted, for the fragmentation-aware placements (tessera, fgd) where no trace
// gives the workload up front: the live controller and the job simulator.
//
// Every task shape (CPU, per-GPU milli, GPU count, GPU models, as FindTypicalTasks
// groups them) keeps a weight that decays by half every `half_life_tasks` later tasks, so
// the model follows what users submit now, not last month. The FragmentationModel the
// scorers read is rebuilt only when the learned distribution of shapes has moved by more
// than `republish_distance` (total variation, 0..1) since the model in use was made:
// a new model resets the placer's score caches, and a model that changes with every
// submission would make them useless. MIG requests are left out, as FindTypicalTasks
// does. Weights are deterministic functions of the tasks seen, in order.
//
// Thread safety: none; the driver's core lock (the controller's) or its single thread
// (the simulator's) guards it. model() stays valid until the second Refresh after it
// that returns true (the driver replaces its profiles after each one).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "model/job.h"
#include "model/request.h"
#include "plugins/fgd.h"

namespace tessera {

class WorkloadLearner {
 public:
  struct Options {
    // A task's weight halves after this many later tasks.
    double half_life_tasks = 2'000;
    // Total-variation distance between the shape distribution the model was made from and
    // the current one past which Refresh makes a new model.
    double republish_distance = 0.02;
    double coverage = 0.95;  // as FindTypicalTasks
  };

  // One shape's learned weight, for saving and restoring (weights are relative to
  // `scale` in Saved: only their ratios matter).
  struct Shape {
    int64_t cpu = 0;        // milli-CPU
    int64_t gpu_milli = 0;  // per GPU; 0 for CPU-only tasks
    int32_t gpu_count = 0;
    uint64_t models = 0;    // GpuModelSet bits
    double weight = 0;
    double memory_weighted = 0;  // sum of weight x MiB (mean memory = this / weight)
  };
  struct Saved {
    std::vector<Shape> shapes;
    int64_t observed = 0;
  };

  WorkloadLearner();
  explicit WorkloadLearner(Options options);

  void Observe(const TaskRequest& task);
  void ObserveJob(const JobSpec& spec);

  // Makes a new model when none exists yet or the shapes moved past the threshold;
  // true when model() changed.
  bool Refresh();
  // Null until a task (not MIG) has been observed and Refresh ran.
  const FragmentationModel* model() const { return model_.get(); }

  int64_t observed() const { return observed_; }
  int64_t models_made() const { return models_made_; }
  // The typical workload of the current weights (what Refresh would publish).
  TypicalWorkload Typical() const;

  Saved Save() const;
  // Replaces what was learned; InvalidArgument for negative or non-finite weights. The
  // model is made again at the next Refresh.
  Status Restore(const Saved& saved);

 private:
  using Key = std::tuple<int64_t, int64_t, int32_t, uint64_t>;  // cpu, milli, count, models
  struct Weight {
    double weight = 0;
    double memory_weighted = 0;
  };
  // Total variation between the current weights and those the model was made from.
  double DistanceFromPublished() const;
  void Rescale();

  Options options_;
  std::map<Key, Weight> weights_;
  std::map<Key, double> published_;  // shape -> share, when the model was made
  double increment_ = 1.0;           // a new task's weight; grows instead of decaying all
  double total_ = 0;
  int64_t observed_ = 0;
  int64_t models_made_ = 0;
  bool dirty_ = false;  // observed since the last Refresh
  std::unique_ptr<FragmentationModel> model_;
  // The model before the last one: profiles made from it may still be in use until the
  // driver replaces them, right after the Refresh that made a new one.
  std::unique_ptr<FragmentationModel> previous_;
};

}  // namespace tessera
