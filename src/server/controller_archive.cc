// Archiving finished jobs: the controller keeps every unfinished job and the newest
// ControllerOptions::finished_in_memory finished ones in memory; older finished jobs
// live only in the store, where GET /v1/jobs/{id}, logs and idempotent retries find
// them (FindOrLoad). A job is archived once its terminal row is durable and no victim
// still stops for it; its slot in the core is then reused.
#include <string>
#include <utility>

#include "server/controller.h"

namespace tessera {

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
  LiveJob& job = archived->emplace();
  job.row = std::move(**row);
  job.durable = true;
  job.slot = JobTable::kArchived;
  nlohmann::json spec = nlohmann::json::parse(job.row.spec_json.str(), nullptr, false);
  if (!spec.is_discarded()) {
    if (StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, *catalog_); sub.ok()) {
      job.submission = std::move(sub).value();
    }
  }
  return &job;
}

}  // namespace tessera
