#include "server/job_table.h"

#include "server/job_rows.h"

namespace tessera {

using job_rows::QueueKey;

LiveJob* JobTable::Find(JobNumber id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() || !it->second.durable ? nullptr : &it->second;
}

JobState JobTable::StateOf(const LiveJob& job) const {
  if (job.slot == kArchived) {
    return ParseJobState(job.row.state).value_or(JobState::kFailed);
  }
  const JobRecord& rec = records_[job.slot];
  switch (rec.phase) {
    case JobPhase::kPending:
      return JobState::kPending;
    case JobPhase::kRunning:
      return JobState::kRunning;
    case JobPhase::kStopping:
      return JobState::kStopping;
    case JobPhase::kFinished:
      break;
  }
  if (!job.durable) {
    return JobState::kPending;  // its record is filled in at its acknowledgement
  }
  switch (rec.end) {
    case JobEnd::kSucceeded:
      return JobState::kSucceeded;
    case JobEnd::kFailed:
      return JobState::kFailed;
    case JobEnd::kCancelled:
      return JobState::kCancelled;
  }
  return JobState::kFailed;
}

LiveJob& JobTable::Add(JobNumber id) {
  LiveJob& job = jobs_[id];
  job.slot = AllocSlot(id);
  return job;
}

void JobTable::Remove(JobNumber id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return;
  }
  const LiveJob& job = it->second;
  if (!job.row.idempotency_key.empty()) {
    auto key = idempotency_.find(QueueKey(job.row.tenant, job.row.idempotency_key));
    if (key != idempotency_.end() && key->second == id) {  // else it names another job
      idempotency_.erase(key);
    }
  }
  FreeSlot(job.slot);
  jobs_.erase(it);
}

std::optional<JobNumber> JobTable::FindKey(const std::string& tenant,
                                           const std::string& key) const {
  auto it = idempotency_.find(QueueKey(tenant, key));
  if (it == idempotency_.end()) {
    return std::nullopt;
  }
  return it->second;
}

void JobTable::AddKey(const std::string& tenant, const std::string& key, JobNumber id) {
  idempotency_[QueueKey(tenant, key)] = id;
}

uint32_t JobTable::AllocSlot(JobNumber id) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
    slot_job_.emplace_back();
  }
  records_[slot] = JobRecord{};
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = id;
  return slot;
}

void JobTable::FreeSlot(uint32_t slot) {
  records_[slot] = JobRecord{};  // frees the spec and what it held
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = JobNumber();
  free_slots_.push_back(slot);
}

std::vector<JobNumber> JobTable::Archive(Micros now, size_t keep) {
  std::vector<JobNumber> archived;
  size_t scans = finished_order_.size();
  while (finished_order_.size() > keep && scans-- > 0) {
    const JobNumber id = finished_order_.front();
    finished_order_.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      continue;
    }
    LiveJob& job = it->second;
    const JobRecord& rec = Rec(job);
    if (rec.phase != JobPhase::kFinished || rec.victims_in_flight > 0) {
      finished_order_.push_back(id);  // a victim still reports to it: later
      continue;
    }
    if (!job.row.idempotency_key.empty()) {
      archived_keys_.emplace_back(now, QueueKey(job.row.tenant, job.row.idempotency_key));
    }
    FreeSlot(job.slot);
    archived.push_back(id);
    jobs_.erase(it);
  }
  while (!archived_keys_.empty() && now - archived_keys_.front().first > kIdempotencyRetention) {
    auto key = idempotency_.find(archived_keys_.front().second);
    if (key != idempotency_.end() && jobs_.find(key->second) == jobs_.end()) {
      idempotency_.erase(key);
    }
    archived_keys_.pop_front();
  }
  return archived;
}

}  // namespace tessera
