// GroupCommit: the queue of pending writes that one writer thread commits together, shared
// by the SQLite and etcd stores (each passes in how to write one group durably).
//
// Commit queues the caller's batch and waits. The writer thread takes every batch waiting
// (up to max_group, in the order they were queued), calls the store's WriteGroupFn once
// with that group, and only when it has returned hands each caller its own result: nothing
// is acknowledged before the store says the group is durable. Writes queued while a group
// is being written wait for the next group. The WriteGroupFn sets each write's status (a
// batch that fails alone, e.g. on a constraint, gets its own error); when it returns an
// error, the group's commit failed, and every write of the group that has no error of its
// own gets that one: a failed commit fails every write of its group.
// Stop refuses later Commits (FailedPrecondition "store is closed"), writes everything
// already queued, and joins the writer thread.
// Thread safety: Commit, Stop and queued are thread-safe; the WriteGroupFn runs on the
// writer thread only, one group at a time, without the queue's lock.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <span>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "store/store.h"

namespace tessera {

class GroupCommit {
 public:
  // One queued write, as the WriteGroupFn sees it: the caller's batch (valid until the
  // caller's Commit returns) and the result the caller gets (OK unless set).
  struct Write {
    const WriteBatch* batch = nullptr;
    Status status;
  };
  // Writes `group` (queue order) durably and sets each write's status; an error return
  // fails every write of the group whose status is still OK.
  using WriteGroupFn = std::function<Status(std::span<Write* const> group)>;

  struct Options {
    // Writes per group at most (at least 1). Default: every write waiting.
    size_t max_group = std::numeric_limits<size_t>::max();
  };

  // Starts the writer thread.
  GroupCommit(WriteGroupFn write_group, Options options);
  ~GroupCommit();  // Stop()
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // The batch's result once its group is written; OK at once for an empty batch;
  // FailedPrecondition("store is closed") after Stop.
  Status Commit(const WriteBatch& batch);
  // Refuses later Commits, writes what is queued, joins the writer thread. Idempotent.
  void Stop();
  // Writes queued and not yet taken into a group (for tests).
  size_t queued() const;

 private:
  struct Pending;

  void WriterLoop();
  // Waits for work; the next group (empty: stopping, and the queue is drained).
  std::vector<Pending*> NextGroup();
  void WriteAndHandBack(const std::vector<Pending*>& group);

  const WriteGroupFn write_group_;
  const size_t max_group_;

  mutable Mutex mu_;  // and each Pending's `done`
  CondVar work_cv_;
  std::deque<Pending*> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  Mutex stop_mu_;  // serialises Stop (the join)
  std::thread writer_;
};

}  // namespace tessera
