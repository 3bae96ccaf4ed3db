// InMemoryStore: see store.h.
#include <algorithm>
#include <tuple>

#include "base/mutex.h"
#include "store/store.h"

namespace tessera {
namespace {

Status ClosedError() { return FailedPreconditionError("store is closed"); }

bool Overlaps(const UsageRow& row, int64_t since_us, int64_t until_us) {
  return row.start_us < until_us && (row.end_us == 0 || row.end_us > since_us);
}

}  // namespace

Status InMemoryStore::Commit(WriteBatch batch) {
  TESSERA_RETURN_IF_ERROR(ValidateBatch(batch));
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  if (!inject_.ok()) {
    return inject_;
  }
  // Jobs are upserted in order, as the SQLite store does; the undo log restores the rows
  // touched so far when one of them breaks idempotency-key uniqueness.
  std::vector<std::pair<uint64_t, std::optional<JobRow>>> undo;
  auto put = [this](uint64_t id, std::optional<JobRow> row) REQUIRES(mu_) {
    auto found = jobs_.find(id);
    if (found != jobs_.end()) {
      if (!found->second.idempotency_key.empty()) {
        idempotency_.erase({found->second.tenant, found->second.idempotency_key});
      }
      jobs_.erase(found);
    }
    if (row.has_value()) {
      if (!row->idempotency_key.empty()) {
        idempotency_[{row->tenant, row->idempotency_key}] = id;
      }
      jobs_.emplace(id, std::move(*row));
    }
  };
  for (JobRow& job : batch.jobs) {
    if (!job.idempotency_key.empty()) {
      auto owner = idempotency_.find({job.tenant, job.idempotency_key});
      if (owner != idempotency_.end() && owner->second != job.id) {
        while (!undo.empty()) {  // newest first
          put(undo.back().first, std::move(undo.back().second));
          undo.pop_back();
        }
        return AlreadyExistsError("job " + std::to_string(job.id) + ": tenant '" + job.tenant +
                                  "' already has job " + std::to_string(owner->second) +
                                  " with idempotency key '" + job.idempotency_key + "'");
      }
    }
    auto found = jobs_.find(job.id);
    undo.emplace_back(job.id,
                      found == jobs_.end() ? std::nullopt : std::optional<JobRow>(found->second));
    uint64_t id = job.id;
    put(id, std::move(job));
  }
  for (UsageRow& usage : batch.usage) {
    usage_.push_back(std::move(usage));
  }
  for (TokenRow& token : batch.tokens) {
    std::string hash = token.hash;
    tokens_.insert_or_assign(std::move(hash), std::move(token));
  }
  for (auto& [key, value] : batch.kv) {
    kv_.insert_or_assign(std::move(key), std::move(value));
  }
  ++commits_;
  return Status::Ok();
}

StatusOr<std::optional<JobRow>> InMemoryStore::LoadJob(uint64_t id) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return std::optional<JobRow>();
  }
  return std::optional<JobRow>(it->second);
}

StatusOr<std::vector<JobRow>> InMemoryStore::LoadJobs() {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<JobRow> out;
  out.reserve(jobs_.size());
  for (const auto& [id, row] : jobs_) {
    out.push_back(row);
  }
  return out;
}

StatusOr<std::vector<UsageRow>> InMemoryStore::LoadUsage(int64_t since_us, int64_t until_us) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<UsageRow> out;
  for (const UsageRow& row : usage_) {
    if (Overlaps(row, since_us, until_us)) {
      out.push_back(row);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const UsageRow& a, const UsageRow& b) { return a.start_us < b.start_us; });
  return out;
}

StatusOr<std::vector<JobRow>> InMemoryStore::LoadJobsPage(uint64_t after_id,
                                                          int64_t submit_since_us,
                                                          int64_t submit_until_us, size_t limit) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<JobRow> out;
  for (auto it = jobs_.upper_bound(after_id); it != jobs_.end(); ++it) {
    if (limit > 0 && out.size() == limit) {
      break;
    }
    if (it->second.submit_us >= submit_since_us && it->second.submit_us < submit_until_us) {
      out.push_back(it->second);
    }
  }
  return out;
}

StatusOr<std::vector<UsageRow>> InMemoryStore::LoadUsageOfJobs(uint64_t first_job,
                                                               uint64_t last_job) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<UsageRow> out;
  for (const UsageRow& row : usage_) {
    if (row.job >= first_job && row.job <= last_job) {
      out.push_back(row);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const UsageRow& a, const UsageRow& b) {
    return std::tie(a.job, a.start_us) < std::tie(b.job, b.start_us);
  });
  return out;
}

StatusOr<std::vector<TokenRow>> InMemoryStore::LoadTokens() {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<TokenRow> out;
  out.reserve(tokens_.size());
  for (const auto& [hash, row] : tokens_) {
    out.push_back(row);
  }
  return out;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> InMemoryStore::ListKv(
    std::string_view prefix) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = kv_.lower_bound(prefix); it != kv_.end() && it->first.starts_with(prefix); ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

StatusOr<std::optional<std::string>> InMemoryStore::GetKv(std::string_view key) {
  MutexLock lock(mu_);
  if (closed_) {
    return ClosedError();
  }
  auto found = kv_.find(key);
  if (found == kv_.end()) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(found->second);
}

Status InMemoryStore::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  return Status::Ok();
}

void InMemoryStore::InjectCommitError(Status error) {
  MutexLock lock(mu_);
  inject_ = std::move(error);
}

uint64_t InMemoryStore::commits() const {
  MutexLock lock(mu_);
  return commits_;
}

}  // namespace tessera
