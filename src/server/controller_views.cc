// What the API reads of the controller: a job's JSON and its published view
// (views/job_json.h) with the pending jobs' wait context, archived jobs read back from
// the store, the pending jobs' ETAs (modules/eta_module.h) and the queue configuration.
#include "server/controller.h"
#include "server/known_nodes.h"
#include "server/pending_reasons.h"
#include "server/task_launches.h"
#include "server/views/job_json.h"

namespace tessera {

nlohmann::json Controller::JobJson(const LiveJob& job, bool whole) const {
  auto reason = [&]() REQUIRES(mu_) {
    JobView view;
    FillReason(job, view);
    return views_.ReasonOf(view);
  };
  return ::tessera::JobJson(JobJsonInputs{
      job, job.slot == JobTable::kArchived ? nullptr : &jobs_.Rec(job), jobs_.StateOf(job),
      nodes_.all(), *catalog_,
      CheckpointDirOf(job.submission, job.row.id, options_.checkpoint_root, options_.data_dir),
      identities_.Known(job.row.tenant),
      [&](nlohmann::json& out) REQUIRES(mu_) { host_.DescribeJob(FactsOf(job), out); },
      whole ? std::function<std::string()>(reason) : nullptr, /*with_spec=*/whole});
}

void Controller::FillReason(const LiveJob& job, JobView& view) const {
  auto gate = [&]() REQUIRES(mu_) { return gates_.Reason(job.id()); };
  auto note = [&]() REQUIRES(mu_) { return host_.JobNote(job.id(), job.row.attempts); };
  FillJobReason(job, jobs_, *core_.lifecycle(), *catalog_, gate, view, note);
}

void Controller::PublishView(const LiveJob& job) {
  if (!job.durable || job.slot == JobTable::kArchived) {
    return;
  }
  auto view = std::make_shared<JobView>(JobViewOf(job, jobs_.StateOf(job), JobJson(job, false)));
  FillReason(job, *view);
  views_.Put(std::move(view));
}

void Controller::PublishWaitContext() {
  core_.ApplyNodeChanges();  // the node set it publishes
  fits_.Publish(nodes_, views_,
                std::make_shared<WaitContext>(core_.WaitContextOf(jobs_, clock_->NowMicros())));
}

// Finished jobs beyond ControllerOptions::finished_in_memory live only in the store
// (JobTable::Archive), where GET /v1/jobs/{id}, logs and idempotent retries find them.
void Controller::Archive(Micros now) {
  for (JobNumber id : jobs_.Archive(now, options_.finished_in_memory)) {
    views_.Erase(id);
  }
}

const LiveJob* Controller::FindOrLoad(JobNumber id, std::optional<LiveJob>* archived) {
  if (LiveJob* job = jobs_.Find(id)) {
    return job;
  }
  if (!jobs_.MayExist(id)) {
    return nullptr;
  }
  // An archived job never changes: read it without holding up the others.
  mu_.Unlock();
  StatusOr<std::optional<JobRow>> row = store_->LoadJob(id.value());
  mu_.Lock();
  if (!row.ok() || !row->has_value()) {
    return nullptr;
  }
  return &archived->emplace(JobTable::FromArchive(std::move(**row), *catalog_));
}

// The ETA module's core: the forecast's input copied under mu_ (CoreSession::
// CopyForForecast, CopyForecastJobs) with the gated jobs' reasons, which are the gates',
// and the job views its table goes to.
EtaModule Controller::MakeEtaModule() {
  EtaModule::Options o = options_.eta;
  o.seed = options_.seed;
  o.stop_grace = options_.stop_grace;
  auto snapshot = [this](EtaSnapshot& snap) {
    MutexLock lock(mu_);
    if (!core_.CopyForForecast(clock_->NowMicros(), snap.in)) {
      return false;  // the core is not built yet
    }
    core_.CopyForecastJobs(
        jobs_, [this](const LiveJob& job) REQUIRES(mu_) { return gates_.Reason(job.id()); }, snap);
    return true;
  };
  auto publish = [this](std::shared_ptr<const EtaTable> t) { views_.SetEtas(std::move(t)); };
  auto cycles = [this] { return counters_.cycles.load(); };
  return EtaModule(o, EtaModule::Core{snapshot, publish, cycles});
}

Status Controller::SetQueues(const std::string& yaml) {
  MutexLock lock(mu_);
  TESSERA_RETURN_IF_ERROR(core_.ReplaceQueues(yaml, jobs_, *store_, *clock_));
  PublishWaitContext();  // reasons say so until the next cycle
  return Status::Ok();
}

}  // namespace tessera
