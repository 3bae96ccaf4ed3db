// JobLogs: the tasks' output as the controller keeps it, one file per job and task
// (<data_dir>/logs/<job>/<task>.log, every attempt appended in turn). The controller
// decides under its lock which bytes of a report are new (a resent heartbeat repeats
// them); the writes themselves happen here, outside that lock, before the report is
// answered. Reads never take the controller's lock either.
// Thread safety: every method may be called from any thread; appends are serialised.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "server/job_number.h"

namespace tessera {

struct LogAppend {
  JobNumber job;
  int task = 0;
  std::string data;
};

struct LogChunk {
  std::string data;
  int64_t next_offset = 0;
  std::string job_state;
};

class JobLogs {
 public:
  explicit JobLogs(std::string dir) : dir_(std::move(dir)) {}

  std::string Path(JobNumber job, int task) const;
  // Appends each in order; Unavailable naming the file when one cannot be written (the
  // others are still tried).
  Status Append(const std::vector<LogAppend>& appends);
  // Up to `max_bytes` from `offset` (>= 0); an empty chunk at the end or before any
  // output. Fills data and next_offset only.
  StatusOr<LogChunk> Read(JobNumber job, int task, int64_t offset, int64_t max_bytes) const;

 private:
  std::string dir_;
  Mutex append_mu_;
};

}  // namespace tessera
