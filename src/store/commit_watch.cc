#include "base/mutex.h"
#include "store/commit_watch.h"

#include <algorithm>

namespace tessera {

Micros CommitWatch::OldestCommitWait() const {
  MutexLock lock(mu_);
  return started_.empty() ? 0 : std::max<Micros>(0, clock_->NowMicros() - *started_.begin());
}

Status CommitWatch::Commit(WriteBatch batch) {
  std::multiset<Micros>::iterator mine;
  {
    MutexLock lock(mu_);
    mine = started_.insert(clock_->NowMicros());
  }
  Status s = ForwardingStore::Commit(std::move(batch));
  MutexLock lock(mu_);
  started_.erase(mine);
  return s;
}

}  // namespace tessera
