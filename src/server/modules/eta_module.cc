#include "server/modules/eta_module.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <utility>

namespace tessera {

void EtaModule::Start() {
  // After a cycle, at most every interval: the refresh runs on its own thread.
  if (options_.interval > 0) {
    refresher_.Start([this] { RefreshIfCycled(); }, options_.interval);
  }
}

void EtaModule::RefreshIfCycled() {
  const uint64_t cycles = core_.cycles();
  if (cycles == cycles_seen_.load()) {
    return;  // nothing changed the core since the last refresh
  }
  cycles_seen_.store(cycles);
  if (auto refreshed = RefreshEtas(); !refreshed.ok()) {
    std::cerr << "tessera server: ETA refresh: " << refreshed.status().ToString() << "\n";
  }
}

void EtaModule::OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                           const QueueTree& tree) {
  // The core's lifecycle teaches its own predictor when the policy uses it.
  if (core_predicts_ || event.kind != LifecycleEvent::Kind::kFinished ||
      event.end != JobEnd::kSucceeded || event.ran <= 0) {
    return;
  }
  // Its whole runtime: the progress its last attempt resumed from, and that attempt's
  // run less its start-up.
  const RuntimeFeatures features = FeaturesOf(job, tree);
  MutexLock lock(predictor_mu_);
  predictor_.Observe(features, job.resumed_from + std::max<Micros>(0, event.ran - job.startup));
}

void EtaModule::EstimateRuntimes(EtaSnapshot& snap, EtaRuntimes runtimes) {
  const bool limits = runtimes == EtaRuntimes::kUserLimit;
  const Micros now = snap.in.now;
  MutexLock lock(predictor_mu_);
  for (size_t i = 0; i < snap.in.jobs.size(); ++i) {
    ForecastJob& job = snap.in.jobs[i];
    const JobRecord& rec = job.record;
    // The whole job's runtime: the user's limit, or the predictor's estimate now (it
    // learned since the job was submitted), within the limit.
    Micros estimate = rec.spec.runtime_limit;
    if (!limits || estimate <= 0) {
      const Micros predicted = snap.core_predicted.empty()
                                   ? predictor_.Predict(FeaturesOf(rec, *snap.in.tree))
                                   : snap.core_predicted[i];
      estimate = rec.spec.runtime_limit > 0 ? std::min(predicted, rec.spec.runtime_limit)
                                            : predicted;
    }
    Micros runtime = estimate;
    if (rec.phase == JobPhase::kRunning) {
      runtime = ForecastRemaining(estimate, rec, now, options_.overdue_floor,
                                  options_.overdue_factor);
    } else if (rec.phase == JobPhase::kStopping) {
      // A preemption victim is evicted when the forecast says (its checkpoint or grace),
      // unless its work is done first; a job stopped for another reason (cancelled, a
      // failed task) ends within its grace.
      runtime = ForecastRemaining(estimate, rec, now, 1'000'000);
      if (!rec.preemptor.valid()) {
        runtime = std::min(runtime, std::max<Micros>(options_.stop_grace, 1'000'000));
      }
    }
    job.runtime = runtime;
    if (limits) {
      // The scheduler's own estimates (backfill, reservations) trust the limits too.
      job.record.predicted_runtime = estimate;
    }
  }
}

StatusOr<std::shared_ptr<const EtaTable>> EtaModule::ForecastEtas(EtaRuntimes runtimes) {
  MutexLock one_at_a_time(forecast_mu_);
  EtaSnapshot snap;
  // Wall time, not the injected clock: this measures the controller itself.
  const auto t0 = std::chrono::steady_clock::now();
  if (!core_.snapshot(snap)) {
    return std::shared_ptr<const EtaTable>();
  }
  const auto t1 = std::chrono::steady_clock::now();
  EstimateRuntimes(snap, runtimes);
  ForecastOptions options;
  options.seed = options_.seed;
  options.horizon = options_.horizon;
  options.max_cycles = options_.max_cycles;
  StatusOr<Forecast> forecast = RunStartForecast(std::move(snap.in), options);
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
  table->gated = std::move(snap.gated);
  table->jobs.reserve(forecast->pending.size());
  const std::vector<JobNumber>& ids = snap.ids;
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

StatusOr<std::shared_ptr<const EtaTable>> EtaModule::RefreshEtas() {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const EtaTable> table,
                           ForecastEtas(EtaRuntimes::kPredicted));
  if (table != nullptr) {
    core_.publish(table);
  }
  return table;
}

}  // namespace tessera
