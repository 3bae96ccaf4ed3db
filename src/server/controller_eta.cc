// Controller: pending jobs' ETAs (declared in controller.h). The core is copied under
// the core lock (the cluster state, the records of the jobs in it, fair-share usage,
// each job's predicted runtime); the forecast (sim/start_forecast.h) runs without it,
// and its table is published to the job views, which API reads take without the core
// lock.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/runtime_predictor.h"
#include "server/controller.h"
#include "sim/start_forecast.h"

namespace tessera {

StatusOr<std::shared_ptr<const EtaTable>> Controller::ForecastEtas(EtaRuntimes runtimes) {
  MutexLock one_at_a_time(eta_mu_);
  ForecastInput in;
  std::vector<JobNumber> ids;  // by the forecast's job index
  std::unordered_map<uint64_t, std::string> gated;
  // Wall time, not the injected clock: this measures the controller itself.
  const auto t0 = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    if (core_.rebuild_pending() || core_.state() == nullptr || core_.scheduler() == nullptr) {
      return std::shared_ptr<const EtaTable>();
    }
    const Micros now = clock_->NowMicros();
    in.now = now;
    in.tree = core_.shared_tree();
    in.state = *core_.state();
    in.policy = core_.policy();
    in.placement = options_.placement;
    if (const FragmentationModel* typical = core_.learner().model()) {
      in.typical = typical->workload();  // a copy: the learner may remake its model
    }
    in.usage = core_.scheduler()->usage().Save();
    const bool limits = runtimes == EtaRuntimes::kUserLimit;
    const RuntimePredictor& predictor =
        core_.policy().uses_predictor ? core_.predictor() : eta_predictor_;
    in.jobs.reserve(core_.scheduler()->pending() + 64);
    ids.reserve(core_.scheduler()->pending() + 64);
    const JobId reserved = core_.reservation() ? core_.reservation()->job : JobId();
    for (const auto& [id, job] : jobs_.all()) {
      const JobRecord& rec = jobs_.Rec(job);
      if (!job.durable || rec.phase == JobPhase::kFinished) {
        continue;
      }
      // Behind a gate it would start only when released: no estimate, and it takes no
      // room in the forecast from the jobs that may start.
      if (rec.phase == JobPhase::kPending && core_.lifecycle()->Gated(rec.id)) {
        const std::string why = GateReason(job);
        gated.emplace(id.value(), why.empty() ? "waiting for the next scheduling cycle" : why);
        continue;
      }
      // The whole job's runtime: the user's limit, or the predictor's estimate now (it
      // learned since the job was submitted), within the limit.
      Micros estimate = rec.spec.runtime_limit;
      if (!limits || estimate <= 0) {
        const Micros predicted = predictor.Predict(FeaturesOf(rec, core_.tree()));
        estimate = rec.spec.runtime_limit > 0 ? std::min(predicted, rec.spec.runtime_limit)
                                              : predicted;
      }
      Micros runtime = estimate;
      if (rec.phase == JobPhase::kRunning) {
        runtime = ForecastRemaining(estimate, rec, now, options_.eta_overdue_floor,
                                    options_.eta_overdue_factor);
      } else if (rec.phase == JobPhase::kStopping) {
        // A preemption victim is evicted when the forecast says (its checkpoint or grace),
        // unless its work is done first; a job stopped for another reason (cancelled, a
        // failed task) ends within its grace.
        runtime = ForecastRemaining(estimate, rec, now, 1'000'000);
        if (!rec.preemptor.valid()) {
          runtime = std::min(runtime, std::max<Micros>(options_.stop_grace, 1'000'000));
        }
      }
      if (rec.id == reserved && reserved.valid()) {
        in.reserved = static_cast<int64_t>(in.jobs.size());
      }
      in.jobs.push_back(ForecastJob{rec, runtime});
      if (limits) {
        // The scheduler's own estimates (backfill, reservations) trust the limits too.
        in.jobs.back().record.predicted_runtime = estimate;
      }
      ids.push_back(id);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  ForecastOptions options;
  options.seed = options_.seed;
  options.horizon = options_.eta_horizon;
  options.max_cycles = options_.eta_max_cycles;
  StatusOr<Forecast> forecast = RunStartForecast(std::move(in), options);
  if (!forecast.ok()) {
    return forecast.status();
  }
  auto table = std::make_shared<EtaTable>();
  table->computed_at = forecast->now;
  table->horizon_end = forecast->horizon_end;
  table->pending = static_cast<int64_t>(forecast->pending.size());
  table->snapshot_seconds = std::chrono::duration<double>(t1 - t0).count();
  table->forecast_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  table->gated = std::move(gated);
  table->jobs.reserve(forecast->pending.size());
  for (const JobForecast& f : forecast->pending) {
    JobEta e;
    e.eta = f.eta;
    e.position = f.position;
    e.queue_position = f.queue_position;
    e.blocking = std::string(BlockingKindName(f.blocking.kind));
    e.blocking_queue = f.blocking.queue;
    e.blocking_model = f.blocking.model;
    if (f.blocking.job >= 0 && static_cast<size_t>(f.blocking.job) < ids.size()) {
      e.blocking_job = ids[static_cast<size_t>(f.blocking.job)];
    }
    table->jobs.emplace(ids[f.job].value(), std::move(e));
  }
  return std::shared_ptr<const EtaTable>(std::move(table));
}

void Controller::LearnRuntime(const JobRecord& job, const LifecycleEvent& event) {
  // The core's lifecycle teaches its own predictor when the policy uses it.
  if (core_.policy().uses_predictor || event.kind != LifecycleEvent::Kind::kFinished ||
      event.end != JobEnd::kSucceeded || event.ran <= 0) {
    return;
  }
  // Its whole runtime: the progress its last attempt resumed from, and that attempt's
  // run less its start-up.
  eta_predictor_.Observe(FeaturesOf(job, core_.tree()),
                         job.resumed_from + std::max<Micros>(0, event.ran - job.startup));
}

StatusOr<std::shared_ptr<const EtaTable>> Controller::RefreshEtas() {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const EtaTable> table,
                           ForecastEtas(EtaRuntimes::kPredicted));
  if (table != nullptr) {
    views_.SetEtas(table);
  }
  return table;
}

}  // namespace tessera
