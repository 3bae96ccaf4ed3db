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
  size_t scans = finished_order_.size();
  while (finished_order_.size() > options_.finished_in_memory && scans-- > 0) {
    const uint64_t id = finished_order_.front();
    finished_order_.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      continue;
    }
    Job& job = it->second;
    const JobRecord& rec = Rec(job);
    if (rec.phase != JobPhase::kFinished || rec.victims_in_flight > 0) {
      finished_order_.push_back(id);  // a victim still reports to it: later
      continue;
    }
    if (!job.row.idempotency_key.empty()) {
      archived_keys_.emplace_back(now, job.row.tenant + '\x1f' + job.row.idempotency_key);
    }
    FreeSlot(job.slot);
    views_.Erase(id);
    jobs_.erase(it);
  }
  while (!archived_keys_.empty() && now - archived_keys_.front().first > kIdempotencyRetention) {
    auto key = idempotency_.find(archived_keys_.front().second);
    if (key != idempotency_.end() && jobs_.find(key->second) == jobs_.end()) {
      idempotency_.erase(key);
    }
    archived_keys_.pop_front();
  }
}

const Controller::Job* Controller::FindOrLoad(uint64_t id, std::optional<Job>* archived,
                                              std::unique_lock<std::mutex>& lock) {
  if (Job* job = FindJob(id)) {
    return job;
  }
  if (id == 0 || id >= next_id_) {
    return nullptr;
  }
  // An archived job never changes: read it without holding up the others.
  lock.unlock();
  StatusOr<std::optional<JobRow>> row = store_->LoadJob(id);
  lock.lock();
  if (!row.ok() || !row->has_value()) {
    return nullptr;
  }
  Job& job = archived->emplace();
  job.row = std::move(**row);
  job.state = ParseJobState(job.row.state).value_or(JobState::kFailed);
  job.durable = true;
  job.slot = kArchived;
  nlohmann::json spec = nlohmann::json::parse(job.row.spec_json, nullptr, false);
  if (!spec.is_discarded()) {
    if (StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, *catalog_); sub.ok()) {
      job.submission = std::move(sub).value();
    }
  }
  return &job;
}

}  // namespace tessera
