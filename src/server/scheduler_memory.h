// SchedulerMemory: what the scheduler has learned, kept across node changes and
// restarts: each queue's decayed fair-share usage (and its users'), the runtime
// predictor's histograms and the workload learner's task shapes (placement).
//
// Owns: when they were last written, and the predictor's and learner's counts then. The
// learned state itself stays in the CoreSession; this moves it to and from the store.
// Writes: store keys "scheduler/fairshare", "scheduler/predictor" and
// "scheduler/workload", into the cycle's batch at most every `interval` (Save); the
// predictor and the learner only when they observed something since they were last
// written. Load reads them back at Open.
// A crash loses at most one interval of usage and what finished within it. A stored
// value that cannot be read is logged and ignored: the history is an optimisation of
// fairness and backfill, not state a job depends on.
//
// Thread safety: none of its own; the controller calls it under its core lock, with the
// CoreSession it guards.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "model/queue_tree.h"
#include "plugins/workload_learner.h"
#include "sched/job_order.h"
#include "sched/runtime_predictor.h"
#include "server/core_session.h"
#include "store/store.h"

namespace tessera {

class SchedulerMemory {
 public:
  static constexpr const char* kFairShareKey = "scheduler/fairshare";
  static constexpr const char* kPredictorKey = "scheduler/predictor";
  static constexpr const char* kWorkloadKey = "scheduler/workload";

  // `interval`: the least time between two writes (ControllerOptions::history_interval).
  explicit SchedulerMemory(Micros interval) : interval_(interval) {}

  // Reads the three keys and restores what they hold into `core` (the learner's model
  // is made at once, for the first scheduler). What was restored counts as written at
  // `now`. Unreadable values are logged and left out; store errors too.
  void Load(Store& store, CoreSession& core, Micros now);
  // Into `batch`, when `interval` has passed since the last write: the fair-share usage
  // (taken at `now`), and the predictor and the learner if they changed.
  void Save(Micros now, CoreSession& core, WriteBatch& batch);

 private:
  Micros interval_;
  Micros saved_at_ = 0;
  int64_t predictor_observations_ = 0;  // the predictor's count when last written
  int64_t workload_observed_ = 0;       // the learner's count when last written
};

// A queue's fair-share usage and factor, as the queues' view shows it: null for a
// cohort, before the first scheduler and while the core is rebuilt.
nlohmann::json FairShareJson(const CoreSession& core, QueueId q);

// The stored forms (exposed for tests). FromJson: InvalidArgument for a malformed value.
namespace scheduler_memory {
nlohmann::json UsageJson(const QueueUsage::Saved& saved);
StatusOr<QueueUsage::Saved> UsageFromJson(const nlohmann::json& j);
nlohmann::json PredictorJson(const RuntimePredictor::State& state);
StatusOr<RuntimePredictor::State> PredictorFromJson(const nlohmann::json& j);
nlohmann::json WorkloadJson(const WorkloadLearner::Saved& saved);
StatusOr<WorkloadLearner::Saved> WorkloadFromJson(const nlohmann::json& j);
}  // namespace scheduler_memory

}  // namespace tessera
