// EtaModule: pending jobs' ETAs, positions and what blocks them (server/job_eta.h).
//
// Owns: the refresh's thread (a WakeLoop never woken) and the cycle count it last ran after; the
// lock that lets one forecast run at a time; the runtime predictor it trains itself
// when the core's policy trains none (not kept across restarts).
// Hooks: Start / Stop (the refresh's thread), OnJobEvent (a succeeded job's runtime).
// What it needs of the core, given at construction (EtaModule::Core): a copy of the
// forecast's input taken under the core lock (EtaSnapshot), the table published to
// the job views, and how many scheduling cycles have run. Everything else is its own:
// each job's runtime (the user's limit or a prediction), running the forecast
// (sim/start_forecast.h) without the core lock, and the table.
// Invariants: one forecast at a time; the background refresh runs only when a cycle
// ran since its last one; a runtime is learned only from a job that succeeded after
// running, and only when the core's policy does not learn it itself; a job's runtime
// never exceeds its user's limit.
// Thread safety: ForecastEtas, RefreshEtas and RefreshIfCycled from any thread (the
// snapshot takes the core lock); Start and Stop from one thread; OnJobEvent with the
// core lock held. Lock order: the forecast lock before the core lock; the core lock
// before the predictor's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "base/wake_loop.h"
#include "sched/runtime_predictor.h"
#include "server/job_eta.h"
#include "server/modules/controller_module.h"
#include "sim/start_forecast.h"

namespace tessera {

// kPredicted: running jobs end and pending ones run as the predictor says (what the
// views show); kUserLimit: every job runs for its user's limit (Slurm's `--start`).
enum class EtaRuntimes { kPredicted, kUserLimit };

// The forecast's input as the core holds it, copied under the core lock.
struct EtaSnapshot {
  ForecastInput in;             // every job's `runtime` is left for the module
  std::vector<JobNumber> ids;   // the job of each entry of in.jobs
  // Jobs behind a gate, left out of the forecast: why, by JobNumber value.
  std::unordered_map<uint64_t, std::string> gated;
  // The core's prediction of each job's whole runtime (by index into in.jobs) when its
  // policy trains the core's predictor (read under the core lock); empty otherwise.
  std::vector<Micros> core_predicted;
};

class EtaModule final : public ControllerModule {
 public:
  struct Options {  // ControllerOptions::eta (its seed and stop_grace: the controller's)
    // After a cycle, at most this often, a copy of the core is taken under the core lock
    // and run forward on the refresh's own thread (sim/start_forecast.h); 0: no
    // background refresh (RefreshEtas still works).
    Micros interval = 5'000'000;
    uint64_t seed = 1;
    Micros horizon = 7LL * 24 * 3600 * 1'000'000;  // no ETA beyond now + this
    int64_t max_cycles = 20'000;                   // a refresh's budget of cycles
    // A running job past its predicted runtime is expected to end at least this later.
    Micros overdue_floor = 30'000'000;
    // ... and, past its prediction, this fraction of the time it has run (runtimes are
    // heavy-tailed: on a Philly slice 0.5 cut the ETAs' median error from 46 % to 41 %).
    double overdue_factor = 0.5;
    Micros stop_grace = 0;  // a stopping job (not a preemption victim) ends within it
  };
  struct Core {
    // Fills the snapshot, taking the core lock; false: the core is not built yet.
    std::function<bool(EtaSnapshot&)> snapshot;
    std::function<void(std::shared_ptr<const EtaTable>)> publish;  // to the job views
    std::function<uint64_t()> cycles;  // scheduling cycles run so far
  };
  EtaModule(Options options, Core core) : options_(options), core_(std::move(core)) {}

  void Start() override;
  void Stop() override { refresher_.Stop(); }
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                  const QueueTree& tree) override;

  // Set once at Open, before any event: the core's policy trains its own predictor, so
  // the ETAs use its predictions and learn nothing themselves.
  void UseCorePredictor(bool yes) { core_predicts_ = yes; }
  // A forecast now: a copy of the core taken under the core lock, run forward without
  // it; null table: the core is not built yet. kPredicted is what the job views show;
  // kUserLimit is for comparison.
  StatusOr<std::shared_ptr<const EtaTable>> ForecastEtas(EtaRuntimes runtimes)
      EXCLUDES(forecast_mu_);
  // ForecastEtas(kPredicted), published to the job views; returns the table.
  StatusOr<std::shared_ptr<const EtaTable>> RefreshEtas() EXCLUDES(forecast_mu_);
  // What the refresh's thread does each interval: RefreshEtas when a cycle ran since the
  // last time (errors are logged).
  void RefreshIfCycled();

 private:
  // Each job's runtime into `snap.in` (and, for kUserLimit, the scheduler's estimate).
  void EstimateRuntimes(EtaSnapshot& snap, EtaRuntimes runtimes) EXCLUDES(predictor_mu_);

  const Options options_;
  const Core core_;
  bool core_predicts_ = false;
  WakeLoop refresher_;
  std::atomic<uint64_t> cycles_seen_{0};
  Mutex forecast_mu_;  // one forecast at a time
  Mutex predictor_mu_;
  RuntimePredictor predictor_ GUARDED_BY(predictor_mu_);
};

}  // namespace tessera
