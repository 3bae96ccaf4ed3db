#include "store/commit_watch.h"

#include <algorithm>

namespace tessera {

Micros CommitWatch::OldestCommitWait() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_.empty() ? 0 : std::max<Micros>(0, clock_->NowMicros() - *started_.begin());
}

Status CommitWatch::Commit(WriteBatch batch) {
  std::multiset<Micros>::iterator mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine = started_.insert(clock_->NowMicros());
  }
  Status s = ForwardingStore::Commit(std::move(batch));
  std::lock_guard<std::mutex> lock(mu_);
  started_.erase(mine);
  return s;
}

}  // namespace tessera
