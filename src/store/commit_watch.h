// CommitWatch: a Store that passes every call to another and knows how long the oldest
// commit still unanswered has waited, so that a server whose disk or store has frozen
// says so (/healthz "degraded") instead of "ok" while every write stalls.
//
// Thread safety: as the wrapped store (thread-safe); its own bookkeeping has a mutex.
// The wrapped store must outlive it; Close closes the wrapped store.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "store/store.h"

namespace tessera {

class CommitWatch final : public Store {
 public:
  CommitWatch(std::unique_ptr<Store> inner, const Clock& clock)
      : inner_(std::move(inner)), clock_(&clock) {}

  // How long the oldest Commit under way has waited (by the clock); 0 when none is.
  Micros OldestCommitWait() const;

  Status Commit(WriteBatch batch) override;
  StatusOr<std::vector<JobRow>> LoadJobs() override { return inner_->LoadJobs(); }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override { return inner_->LoadJob(id); }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since_us, int64_t until_us) override {
    return inner_->LoadUsage(since_us, until_us);
  }
  StatusOr<std::vector<JobRow>> LoadJobsPage(uint64_t after_id, int64_t submit_since_us,
                                             int64_t submit_until_us, size_t limit) override {
    return inner_->LoadJobsPage(after_id, submit_since_us, submit_until_us, limit);
  }
  StatusOr<std::vector<UsageRow>> LoadUsageOfJobs(uint64_t first_job, uint64_t last_job) override {
    return inner_->LoadUsageOfJobs(first_job, last_job);
  }
  StatusOr<std::vector<TokenRow>> LoadTokens() override { return inner_->LoadTokens(); }
  StatusOr<std::optional<std::string>> GetKv(std::string_view key) override {
    return inner_->GetKv(key);
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) override {
    return inner_->ListKv(prefix);
  }
  Status Close() override { return inner_->Close(); }

  Store* inner() const { return inner_.get(); }

 private:
  std::unique_ptr<Store> inner_;
  const Clock* clock_;
  mutable std::mutex mu_;
  std::multiset<Micros> started_;  // each Commit under way: when it began
};

}  // namespace tessera
