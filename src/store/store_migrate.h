// MigrateStore: copies every row of one Store into another, e.g. a one-machine SQLite
// store into etcd when a cluster outgrows it (`tessera store migrate`).
//
// What moves: every job (LoadJobs), every usage interval in its order (LoadUsage over
// all time), every token, every kv row (queue configuration, cluster metadata, ...).
// Rows go in batches of at most `batch_rows` (etcd bounds the operations of one
// transaction), tokens and kv first so that a migration stopped half-way is visibly
// incomplete (no jobs) rather than subtly so. The destination must be empty: a second
// run into a populated store is refused (FailedPrecondition) rather than appending
// usage twice. Afterwards the destination is read back and compared row by row;
// any difference is an error (Internal).
// Thread safety: the stores' own; nothing may write either store meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "store/store.h"

namespace tessera {

struct MigrateCounts {
  uint64_t jobs = 0, usage = 0, tokens = 0, kv = 0;
};

struct MigrateOptions {
  size_t batch_rows = 100;
  // Called after each committed batch with what has been copied so far.
  std::function<void(const MigrateCounts&)> progress;
};

StatusOr<MigrateCounts> MigrateStore(Store& from, Store& to, const MigrateOptions& options = {});

}  // namespace tessera
