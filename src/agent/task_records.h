// TaskRecords: the agent's durable memory of the tasks it launched, so that an agent
// restart (graceful, a crash, an upgrade) neither loses a task's exit nor forgets a
// task that still runs.
//
// Layout: one directory per task attempt, `<data_dir>/tasks/<launcher id>/` (mode 0700,
// root's), which is also the launcher's state directory (its shim and exit files):
//   record.json   the launch as the controller sent it, the log path, the GPU ledger
//                 entries and the MIG instances the agent made for it; written
//                 atomically before the task is started
//   failed        a launch that could not start, with the reason (reported as
//                 failed_to_start)
//   lost          the agent itself killed the task (it stopped, or fenced its tasks),
//                 with the reason: the exit is reported as "lost", so the controller
//                 requeues the job instead of counting a failure
// The directory is removed only once the controller has durably recorded the task's
// end (the answer to the heartbeat or registration that reported it).
//
// Thread safety: stateless functions; callers serialise per directory.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "base/status.h"

namespace tessera {

struct TaskRecord {
  TaskLaunch launch;
  std::string log_path;
  std::vector<std::pair<int, int64_t>> gpu_use;  // ledger entries: GPU index, milli
  std::vector<std::pair<int, std::string>> mig;  // MIG instances made: GPU index, UUID
};

// The name of a task attempt's record (and its launcher id): "job.task.attempt".
std::string TaskRecordId(const TaskKey& key);

// `<data_dir>/tasks`.
std::string TaskRecordsRoot(const std::string& data_dir);
// `<data_dir>/tasks/<id>`.
std::string TaskRecordDir(const std::string& data_dir, const std::string& id);

// Creates the directory (0700) and writes record.json atomically (fsynced).
Status SaveTaskRecord(const std::string& dir, const TaskRecord& record);
// NotFound without record.json; InvalidArgument when it does not parse.
StatusOr<TaskRecord> LoadTaskRecord(const std::string& dir);

// The ids (directory names) of the records under `<data_dir>/tasks`, sorted.
std::vector<std::string> ListTaskRecords(const std::string& data_dir);

// Marker files: "failed" and "lost" with a one-line reason.
Status WriteTaskMarker(const std::string& dir, const std::string& name, const std::string& reason);
// The reason, or nullopt when there is no such marker.
std::optional<std::string> ReadTaskMarker(const std::string& dir, const std::string& name);

// Removes the directory and everything in it; missing is fine.
void RemoveTaskRecord(const std::string& dir);

}  // namespace tessera
