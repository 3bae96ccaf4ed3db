// Controller: what the ETA module (modules/eta_module.h) needs of the core, and the
// facade of its forecasts. The core's part is the copy of its state under the core
// lock (CoreSession::CopyForForecast, CopyForecastJobs) with the gated jobs' reasons,
// which are the gates'; the module estimates runtimes, runs the forecast without the
// lock and publishes the table to the job views, which API reads take without it.
#include <memory>
#include <string>
#include <utility>

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
  if (!core_.CopyForForecast(clock_->NowMicros(), snap.in)) {
    return false;
  }
  core_.CopyForecastJobs(
      jobs_, [this](const LiveJob& job) REQUIRES(mu_) { return GateReason(job); }, snap);
  return true;
}

StatusOr<std::shared_ptr<const EtaTable>> Controller::ForecastEtas(EtaRuntimes runtimes) {
  return eta_.ForecastEtas(runtimes);
}

StatusOr<std::shared_ptr<const EtaTable>> Controller::RefreshEtas() { return eta_.RefreshEtas(); }

}  // namespace tessera
