// Controller: what the ETA module (modules/eta_module.h) needs of the core, and the
// facade of its forecasts. The core's part is the copy of its state under the core
// lock (the cluster state, the records of the jobs in it, fair-share usage, the gated
// jobs' reasons, and the core predictor's estimates when its policy trains one); the
// module estimates runtimes, runs the forecast without the lock and publishes the table
// to the job views, which API reads take without the core lock.
#include <memory>
#include <string>
#include <utility>

#include "sched/runtime_predictor.h"
#include "server/controller.h"

namespace tessera {

EtaModule Controller::MakeEtaModule() {
  EtaModule::Options o;
  o.interval = options_.eta_interval;
  o.seed = options_.seed;
  o.horizon = options_.eta_horizon;
  o.max_cycles = options_.eta_max_cycles;
  o.overdue_floor = options_.eta_overdue_floor;
  o.overdue_factor = options_.eta_overdue_factor;
  o.stop_grace = options_.stop_grace;
  return EtaModule(o, EtaModule::Core{
                          [this](EtaSnapshot& snap) { return SnapshotForEtas(snap); },
                          [this](std::shared_ptr<const EtaTable> table) {
                            views_.SetEtas(std::move(table));
                          },
                          [this] { return counters_.cycles.load(); }});
}

bool Controller::SnapshotForEtas(EtaSnapshot& snap) {
  MutexLock lock(mu_);
  if (core_.rebuild_pending() || core_.state() == nullptr || core_.scheduler() == nullptr) {
    return false;
  }
  ForecastInput& in = snap.in;
  in.now = clock_->NowMicros();
  in.tree = core_.shared_tree();
  in.state = *core_.state();
  in.policy = core_.policy();
  in.placement = options_.placement;
  if (const FragmentationModel* typical = core_.learner().model()) {
    in.typical = typical->workload();  // a copy: the learner may remake its model
  }
  in.usage = core_.scheduler()->usage().Save();
  // The core's predictor is read under its lock; the module's own, without it.
  const RuntimePredictor* predictor =
      core_.policy().uses_predictor ? &core_.predictor() : nullptr;
  in.jobs.reserve(core_.scheduler()->pending() + 64);
  snap.ids.reserve(core_.scheduler()->pending() + 64);
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
      snap.gated.emplace(id.value(), why.empty() ? "waiting for the next scheduling cycle" : why);
      continue;
    }
    if (rec.id == reserved && reserved.valid()) {
      in.reserved = static_cast<int64_t>(in.jobs.size());
    }
    in.jobs.push_back(ForecastJob{rec, 0});
    if (predictor != nullptr) {
      snap.core_predicted.push_back(predictor->Predict(FeaturesOf(rec, core_.tree())));
    }
    snap.ids.push_back(id);
  }
  return true;
}

StatusOr<std::shared_ptr<const EtaTable>> Controller::ForecastEtas(EtaRuntimes runtimes) {
  return eta_.ForecastEtas(runtimes);
}

StatusOr<std::shared_ptr<const EtaTable>> Controller::RefreshEtas() { return eta_.RefreshEtas(); }

}  // namespace tessera
