// CommitWatch: a Store that passes every call to another and knows how long the oldest
// commit still unanswered has waited, so that a server whose disk or store has frozen
// says so (/healthz "degraded") instead of "ok" while every write stalls.
//
// Thread safety: as the wrapped store (thread-safe); its own bookkeeping has a mutex.
// Close closes the wrapped store.
#pragma once

#include <memory>
#include <mutex>
#include <set>

#include "base/mutex.h"
#include "base/clock.h"
#include "store/store.h"

namespace tessera {

class CommitWatch final : public ForwardingStore {
 public:
  CommitWatch(std::unique_ptr<Store> inner, const Clock& clock)
      : ForwardingStore(std::move(inner)), clock_(&clock) {}

  // How long the oldest Commit under way has waited (by the clock); 0 when none is.
  Micros OldestCommitWait() const;

  Status Commit(WriteBatch batch) override;

 private:
  const Clock* clock_;
  mutable Mutex mu_;
  std::multiset<Micros> started_ GUARDED_BY(mu_);  // each Commit under way: when it began
};

}  // namespace tessera
