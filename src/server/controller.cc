// Controller: construction, Open (every service's stored state loaded) and the loop.
#include "server/controller.h"

#include <iostream>
#include <limits>

#include "server/modules/core_modules.h"

namespace tessera {

// ---- construction and recovery ------------------------------------------------

Controller::Controller(ControllerOptions options, Store* store, const GpuCatalog& catalog,
                       const Clock& clock)
    : options_(std::move(options)),
      store_(store),
      catalog_(&catalog),
      clock_(&clock),
      logs_(options_.data_dir + "/logs"),
      views_(catalog),
      core_(catalog, options_.seed, options_.placement),
      identities_(options_.identities) {
  // Accounting first, then the attached modules (the validation runs), then the others.
  host_ = CoreModules(options_.health, *catalog_, eta_, gates_);
}

Status Controller::Attach(ControllerModule& module, std::function<void()> after_cycle) {
  MutexLock lock(mu_);  // before Start: the store is read with it held, as Open does
  TESSERA_RETURN_IF_ERROR(module.Load(*store_));
  host_.Attach(module, std::move(after_cycle));
  fits_.MarkStale();  // its holds count for the fit verdicts
  return Status::Ok();
}

Controller::~Controller() { Stop(); }

StatusOr<std::unique_ptr<Controller>> Controller::Open(ControllerOptions options, Store* store,
                                                       const GpuCatalog& catalog,
                                                       const Clock& clock,
                                                       const std::string& queues_yaml) {
  std::unique_ptr<Controller> c(new Controller(std::move(options), store, catalog, clock));
  {
    // Nothing else runs yet: held so that Load may touch what mu_ guards (it reads the
    // store with it held, which later steps never do).
    MutexLock lock(c->mu_);
    TESSERA_RETURN_IF_ERROR(c->Load(queues_yaml));
  }
  return c;
}

Status Controller::Load(const std::string& queues_yaml) {
  TESSERA_RETURN_IF_ERROR(core_.ChoosePolicy(options_.scheduler_policy, options_.policy,
                                             options_.min_run_before_reclaim,
                                             options_.victim_hold));
  TESSERA_RETURN_IF_ERROR(core_.LoadQueues(*store_, queues_yaml));
  // Always: the modules hear its events (the ETAs' runtime predictor learns from them).
  core_.MakeLifecycle(jobs_.records(), this);
  eta_.UseCorePredictor(core_.policy().uses_predictor);

  const Micros now = clock_->NowMicros();
  TESSERA_ASSIGN_OR_RETURN(auto stored_nodes, store_->ListKv(NodeRegistry::InventoryKeyPrefix()));
  TESSERA_RETURN_IF_ERROR(nodes_.RestoreInventories(stored_nodes, *catalog_, now));
  TESSERA_ASSIGN_OR_RETURN(auto drains, store_->ListKv(NodeRegistry::DrainsKeyPrefix()));
  TESSERA_RETURN_IF_ERROR(nodes_.RestoreDrains(drains, now));
  TESSERA_RETURN_IF_ERROR(identities_.Load(*store_));
  memory_.Load(*store_, core_, now);
  TESSERA_RETURN_IF_ERROR(host_.Load(*store_));
  {
    // Read once for every module that counts them (the table grows with the cluster's life).
    TESSERA_ASSIGN_OR_RETURN(const std::vector<UsageRow> usage,
                             store_->LoadUsage(0, std::numeric_limits<int64_t>::max()));
    host_.OnStoredUsage(usage);
  }
  TESSERA_RETURN_IF_ERROR(LoadJobRows(now));
  views_.set_clock(clock_);  // a restart's time left
  core_.HoldRestarts(jobs_.RestoreRestarts());  // released by the first cycle once passed
  for (const auto& [id, job] : jobs_.all()) {
    PublishView(job);
  }
  PublishWaitContext();
  return Status::Ok();
}

Status Controller::LoadJobRows(Micros now) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows, store_->LoadJobs());
  // A job's node: one nobody has heard of since the restart.
  quarantined_ =
      jobs_.RestoreAll(std::move(rows), *catalog_, core_.tree(),
                       [&](const std::string& n) REQUIRES(mu_) { nodes_.AwaitAgent(n, now); });
  // Holds, dependencies and throttles found again (their jobs are all in memory now).
  for (auto& [id, job] : jobs_.all()) {
    if (!Terminal(jobs_.StateOf(job))) {
      host_.OnJobAccepted(FactsOf(job), *HookStep(now, nullptr));
      host_.OnAttemptRunning(FactsOf(job));  // a running attempt's limit: from its stored start
    }
  }
  Archive(now);  // the oldest finished jobs stay in the store only
  return Status::Ok();
}

void Controller::Start() {
  const bool started = loop_.Start(
      [this] {
        if (Status s = RunCycle(); !s.ok()) {
          std::cerr << "tessera server: scheduling cycle: " << s.ToString() << "\n";
        }
        host_.AfterCycle();  // the attached modules' passes (the validation runs'), without mu_
      },
      options_.cycle_interval);
  if (started) {
    host_.Start();  // the modules' threads (the ETA refresh) after the loop
  }
}

void Controller::Stop() {
  host_.Stop();  // the modules' threads, started last, stopped first
  loop_.Stop();
}

void Controller::OnJobEvent(const JobRecord& job, const LifecycleEvent& event) {
  mu_.AssertHeld();
  host_.OnJobEvent(job, event, core_.tree());
  if (options_.lifecycle_listener != nullptr) {
    options_.lifecycle_listener->OnJobEvent(job, jobs_.WithJobIds(event));
  }
}

}  // namespace tessera
