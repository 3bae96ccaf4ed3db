// GroupCommit: see group_commit.h.
#include "base/mutex.h"
#include "store/group_commit.h"

#include <algorithm>
#include <utility>

namespace tessera {

struct GroupCommit::Pending {
  Write write;
  bool done = false;  // guarded by GroupCommit::mu_
  CondVar cv;
};

GroupCommit::GroupCommit(WriteGroupFn write_group, Options options)
    : write_group_(std::move(write_group)), max_group_(std::max<size_t>(options.max_group, 1)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

GroupCommit::~GroupCommit() { Stop(); }

Status GroupCommit::Commit(const WriteBatch& batch) {
  Pending pending;
  pending.write.batch = &batch;
  MutexLock lock(mu_);
  if (stopping_) {
    return FailedPreconditionError("store is closed");
  }
  if (batch.empty()) {
    return Status::Ok();
  }
  queue_.push_back(&pending);
  work_cv_.NotifyOne();
  pending.cv.Wait(mu_, [&pending] { return pending.done; });
  return std::move(pending.write.status);
}

void GroupCommit::Stop() {
  MutexLock stop_lock(stop_mu_);
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  if (writer_.joinable()) {
    writer_.join();
  }
}

size_t GroupCommit::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void GroupCommit::WriterLoop() {
  for (;;) {
    const std::vector<Pending*> group = NextGroup();
    if (group.empty()) {
      return;  // stopping, and everything queued is written
    }
    WriteAndHandBack(group);
  }
}

std::vector<GroupCommit::Pending*> GroupCommit::NextGroup() {
  std::vector<Pending*> group;
  MutexLock lock(mu_);
  work_cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
  while (!queue_.empty() && group.size() < max_group_) {
    group.push_back(queue_.front());
    queue_.pop_front();
  }
  return group;
}

void GroupCommit::WriteAndHandBack(const std::vector<Pending*>& group) {
  std::vector<Write*> writes;
  writes.reserve(group.size());
  for (Pending* pending : group) {
    writes.push_back(&pending->write);
  }
  // The store's write, without the lock: callers keep queueing the next group meanwhile.
  const Status failed = write_group_(writes);
  if (!failed.ok()) {
    for (Write* write : writes) {
      if (write->status.ok()) {
        write->status = failed;
      }
    }
  }
  MutexLock lock(mu_);
  for (Pending* pending : group) {
    pending->done = true;
    pending->cv.NotifyOne();
  }
}

}  // namespace tessera
