#include "server/core_session.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <utility>

#include "api/queue_config.h"
#include "plugins/registry.h"
#include "server/job_rows.h"
#include "server/job_table.h"
#include "server/modules/eta_module.h"
#include "server/pending_reasons.h"
#include "server/views/metrics_views.h"
#include "sim/start_forecast.h"

namespace tessera {

CoreSession::CoreSession(const GpuCatalog& catalog, uint64_t seed, std::string placement)
    : catalog_(&catalog), placement_(std::move(placement)), rng_(seed) {}

Status CoreSession::ChoosePolicy(const std::optional<SchedulerPolicy>& given,
                                 const std::string& name, Micros min_run_before_reclaim,
                                 Micros victim_hold) {
  if (given) {
    policy_ = *given;
  } else {
    TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy named, ParseSchedulerPolicy(name));
    policy_ = WithServerBounds(std::move(named), min_run_before_reclaim, victim_hold);
  }
  const SchedulerOptions& so = policy_.options;
  if (so.runtime_source == RuntimeSource::kOracle || so.preempt_srtf || so.lossless_preemption) {
    return FailedPreconditionError(
        "policy '" + policy_.name +
        "' is an oracle reference: it needs jobs' true runtimes or preemptions that lose no "
        "work, which only the simulator has; choose another policy for a live cluster");
  }
  return Status::Ok();
}

Status CoreSession::ApplyQueueYaml(const std::string& yaml) {
  TESSERA_ASSIGN_OR_RETURN(QueueTreeSpec spec, ParseQueueTreeText(yaml, *catalog_));
  TESSERA_ASSIGN_OR_RETURN(QueueTree tree, QueueTree::Create(std::move(spec), *catalog_));
  tree_ = std::make_shared<QueueTree>(std::move(tree));
  queues_yaml_ = yaml;
  rebuild_ = true;
  return Status::Ok();
}

Status CoreSession::LoadQueues(Store& store, const std::string& initial) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> stored, store.GetKv(job_rows::kQueuesKey));
  TESSERA_RETURN_IF_ERROR(ApplyQueueYaml(stored ? *stored : initial));
  if (stored) {
    return Status::Ok();
  }
  WriteBatch b;
  b.kv.emplace_back(job_rows::kQueuesKey, initial);
  return store.Commit(std::move(b));
}

void CoreSession::HoldRestarts(const std::vector<std::pair<JobRecord*, Micros>>& backoffs) {
  for (const auto& [rec, until] : backoffs) {
    lifecycle_->HoldUntil(*rec, until);
  }
}

void CoreSession::MakeLifecycle(std::vector<JobRecord>* records, LifecycleListener* listener) {
  lifecycle_ = std::make_unique<JobLifecycle>(
      records, tree_.get(), &predictor_,
      JobLifecycle::Options{policy_.uses_predictor, /*lossless_preemption=*/false});
  lifecycle_->set_listener(listener);
}

Status CoreSession::BuildState(std::vector<NodeSpec> nodes) {
  TESSERA_ASSIGN_OR_RETURN(ClusterState state, ClusterState::Create(std::move(nodes), *catalog_));
  state_ = std::make_unique<ClusterState>(std::move(state));
  return Status::Ok();
}

Status CoreSession::BuildScheduler(Micros now) {
  quota_ = std::make_unique<QuotaLedger>(*tree_);
  nodes_changed_ = false;  // the scheduler is built on the nodes as they are
  reservation_.reset();  // made for the old node set
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                           MakeJobOrder(policy_.job_order, policy_.options));
  std::unique_ptr<QueueOrderPlugin> queue_order;
  if (!policy_.queue_order.empty()) {
    TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy_.queue_order));
  }
  TESSERA_ASSIGN_OR_RETURN(Profile profile, MakePlacement());
  CarryUsage(now);  // fair share outlives the scheduler
  scheduler_ = std::make_unique<JobScheduler>(*tree_, *state_, policy_.options,
                                              std::move(job_order), std::move(queue_order),
                                              std::move(profile), policy_.fairshare_half_life);
  if (carried_usage_) {
    scheduler_->RestoreUsage(*carried_usage_);
  }
  lifecycle_->set_tree(tree_.get());
  lifecycle_->Bind(state_.get(), quota_.get(), scheduler_.get());
  return Status::Ok();
}

void CoreSession::FinishRebuild() {
  rebuild_ = false;
  ++rebuilds_;
}

void CoreSession::DropScheduler(Micros now) {
  CarryUsage(now);
  lifecycle_->Bind(nullptr, nullptr, nullptr);
  lifecycle_->set_tree(tree_.get());
  scheduler_.reset();
  quota_.reset();
  rebuild_ = true;
}

CoreSession::Queues CoreSession::TakeQueues() { return Queues{std::move(tree_), queues_yaml_}; }

void CoreSession::RestoreQueues(Queues old) {
  tree_ = std::move(old.tree);
  queues_yaml_ = std::move(old.yaml);
  rebuild_ = true;
}

Status CoreSession::ReplaceQueues(const std::string& yaml, const JobTable& jobs, Store& store,
                                  const Clock& clock) {
  Queues old = TakeQueues();
  Status s = ApplyQueueYaml(yaml);
  if (s.ok()) {
    for (const auto& [id, job] : jobs.all()) {
      if (job.durable && jobs.Rec(job).phase != JobPhase::kFinished &&
          !tree_->FindQueue(job.row.queue).ok()) {
        s = FailedPreconditionError("queue '" + job.row.queue + "' has unfinished jobs (job " +
                                    ToString(id) + ")");
        break;
      }
    }
  }
  if (s.ok()) {
    WriteBatch b;
    b.kv.emplace_back(job_rows::kQueuesKey, yaml);
    s = store.Commit(std::move(b));
  }
  if (!s.ok()) {
    RestoreQueues(std::move(old));
    return s;
  }
  DropScheduler(clock.NowMicros());
  return Status::Ok();
}

StatusOr<Profile> CoreSession::MakePlacement() const {
  return MakeLearnedProfile(placement_, ScaleOf(*state_), learner_.model());
}

void CoreSession::RefreshPlacement() {
  if (!PlacementNeedsWorkload(placement_) || !learner_.Refresh() || rebuild_ ||
      scheduler_ == nullptr) {
    return;  // a rebuild makes its placement from the model as it is then
  }
  StatusOr<Profile> profile = MakePlacement();
  if (!profile.ok()) {
    std::cerr << "tessera server: placement from the learned workload: "
              << profile.status().ToString() << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  scheduler_->SetPlacement(std::move(profile).value());
}

void CoreSession::ApplyNodeChanges() {
  if (!nodes_changed_ || rebuild_ || scheduler_ == nullptr) {
    return;
  }
  nodes_changed_ = false;
  reservation_.reset();  // made for the old node set
  StatusOr<Profile> profile = MakePlacement();
  if (!profile.ok()) {
    std::cerr << "tessera server: placement after a node change: " << profile.status().ToString()
              << "; rebuilding the scheduler's cluster\n";
    rebuild_ = true;
    return;
  }
  scheduler_->NodesChanged(*state_, std::move(profile).value());
}

std::vector<std::string> CoreSession::CheckInvariants() const {
  return rebuild_ ? std::vector<std::string>{} : lifecycle_->CheckInvariants();
}

std::vector<JobId> CoreSession::ReleaseDue(Micros now) {
  return lifecycle_ != nullptr ? lifecycle_->ReleaseDue(now) : std::vector<JobId>{};
}

std::optional<CycleResult> CoreSession::RunCycle(Micros now) {
  if (state_->present_count() == 0 || scheduler_->pending() == 0) {
    return std::nullopt;
  }
  ApplyNodeChanges();
  RefreshPlacement();
  CycleResult result = lifecycle_->RunCycle(now, rng_);
  reservation_ = result.reservation;
  return result;
}

bool CoreSession::CycleKeptInvariants() const {
  std::vector<std::string> broken = lifecycle_->CheckInvariants();
  if (!broken.empty()) {
    std::cerr << "tessera server: invariant broken after the cycle: " << broken.front() << "\n";
  }
  return broken.empty();
}

void CoreSession::Submit(JobRecord& rec, const std::string& queue, Micros now) {
  rec.phase = JobPhase::kPending;
  rec.queue = tree_->FindQueue(queue).value();
  ObserveSubmission(rec.spec);
  lifecycle_->Submit(rec, now);
}

void CoreSession::CarryUsage(Micros now) {
  if (scheduler_ != nullptr) {
    carried_usage_ = scheduler_->SaveUsage(now);
  }
}

WaitContext CoreSession::WaitContextOf(const JobTable& jobs, Micros now) const {
  WaitContext c;
  c.built = state_ != nullptr && quota_ != nullptr && scheduler_ != nullptr && !rebuild_;
  if (!c.built) {
    return c;
  }
  c.nodes_up = state_->present_count();
  if (reservation_ && reservation_->job.valid() && reservation_->job.value() < jobs.slot_count()) {
    c.reserved_job = jobs.IdAt(reservation_->job);
    c.reserved_start = reservation_->start;
  }
  c.tree = tree_;
  c.quota = std::make_shared<const QuotaLedger>(*quota_);
  c.charge = scheduler_->charge_index();
  // The live copy only matters while jobs wait.
  if (scheduler_->pending() > 0) {
    c.live = std::make_shared<const LiveCache>(*state_);
  }
  c.borrowing = scheduler_->options().borrowing;
  c.reclaim = scheduler_->options().preempt_reclaim;
  c.min_run_before_reclaim = scheduler_->options().min_run_before_reclaim;
  const std::vector<JobRecord>& records = *jobs.records();
  for (const JobRecord& rec : records) {
    if (rec.phase == JobPhase::kRunning && rec.queue.valid() && quota_->IsBorrowing(rec.queue)) {
      c.borrowers.push_back(
          {tree_->spec(rec.queue).name, jobs.IdAt(rec.id), rec.run_start, rec.spec.preemptible});
    }
    if (rec.WaitsForPreemptor(records, now)) {
      c.held_victims[jobs.IdAt(rec.id)] = {jobs.IdAt(rec.evicted_for), rec.evicted_hold_until};
    }
  }
  return c;
}

bool CoreSession::CopyForForecast(Micros now, ForecastInput& in) const {
  if (rebuild_ || state_ == nullptr || scheduler_ == nullptr) {
    return false;
  }
  in.now = now;
  in.tree = tree_;
  in.state = *state_;
  in.policy = policy_;
  in.placement = placement_;
  if (const FragmentationModel* typical = learner_.model()) {
    in.typical = typical->workload();  // a copy: the learner may remake its model
  }
  in.usage = scheduler_->usage().Save();
  return true;
}

void CoreSession::CopyForecastJobs(const JobTable& jobs,
                                   const std::function<std::string(const LiveJob&)>& gate_reason,
                                   EtaSnapshot& snap) const {
  ForecastInput& in = snap.in;
  // Read under the core lock; the ETA module's own predictor is read without it.
  const RuntimePredictor* predictor = policy_.uses_predictor ? &predictor_ : nullptr;
  in.jobs.reserve(scheduler_->pending() + 64);
  snap.ids.reserve(scheduler_->pending() + 64);
  const JobId reserved = reservation_ ? reservation_->job : JobId();
  for (const auto& [id, job] : jobs.all()) {
    const JobRecord& rec = jobs.Rec(job);
    if (!job.durable || rec.phase == JobPhase::kFinished) {
      continue;
    }
    if (rec.phase == JobPhase::kPending && lifecycle_->Gated(rec.id)) {
      const std::string why = gate_reason(job);
      snap.gated.emplace(id.value(), why.empty() ? "waiting for the next scheduling cycle" : why);
      continue;
    }
    if (rec.id == reserved && reserved.valid()) {
      in.reserved = static_cast<int64_t>(in.jobs.size());
    }
    in.jobs.push_back(ForecastJob{rec, 0});
    if (predictor != nullptr) {
      snap.core_predicted.push_back(predictor->Predict(FeaturesOf(rec, *tree_)));
    }
    snap.ids.push_back(id);
  }
}

bool CoreSession::NodeIdle(const std::string& node) const {
  if (state_ == nullptr) {
    return false;
  }
  StatusOr<NodeId> id = state_->FindNode(node);
  if (!id.ok()) {
    return false;
  }
  const NodeLedger& n = state_->node(id.value());
  return n.used_cpu().value() == 0 && n.used_memory().value() == 0 && !n.HasGpuAllocations();
}

SchedulerFigures CoreSession::figures() const {
  return SchedulerFigures{
      rebuilds_, learner_.observed(), learner_.models_made(),
      learner_.model() == nullptr ? 0 : learner_.model()->workload().tasks.size()};
}

}  // namespace tessera
