// TaskRecords: the agent's durable memory of the tasks it launched, so that an agent
// restart (graceful, a crash, an upgrade) neither loses a task's exit nor forgets a
// task that still runs.
//
// Layout: one state file per task attempt, `<data_dir>/tasks/<launcher id>.task` (mode
// 0600, root's; agent/launch/task_state_file.h), which is also the launcher's state file:
//   line 1        the launch as the controller sent it, the log path, the GPU ledger
//                 entries and the MIG instances the agent made for it (JSON); the file
//                 is made with it atomically (fsynced) before the task is started
//   launcher and shim lines (task_launcher.h)
//   failed ...    a launch that could not start, with the reason (reported as
//                 failed_to_start)
//   lost ...      the agent itself killed the task (it stopped, or fenced its tasks),
//                 with the reason: the exit is reported as "lost", so the controller
//                 requeues the job instead of counting a failure
// The file is removed only once the controller has durably recorded the task's end (the
// answer to the heartbeat or registration that reported it). Removed files are kept,
// up to 64, in `<data_dir>/tasks/.spare/` and reused, emptied, as the next records (as
// databases recycle their log segments): on a file system that does not soon reuse a
// freed inode (ext4 without a journal), each inode a task freed slowed every later
// creation of a file, a task's log and record included.
//
// Earlier versions kept a directory per attempt, `<data_dir>/tasks/<launcher id>/`, with
// record.json, the markers and the launcher's files in it. Such records are still
// listed, loaded, marked, adopted and removed, so that an upgrade keeps its tasks.
//
// Thread safety: stateless functions; callers serialise per record.
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
// The record of `id`: `<data_dir>/tasks/<id>.task`, or the directory of an earlier
// version where that exists.
std::string TaskRecordPath(const std::string& data_dir, const std::string& id);

// Makes the record file with its first line, atomically and durably (written aside in a
// spare file or a new one, fsynced, renamed, the directory fsynced); replaces an earlier
// one.
Status SaveTaskRecord(const std::string& path, const TaskRecord& record);
// NotFound without a record; InvalidArgument when it does not parse.
StatusOr<TaskRecord> LoadTaskRecord(const std::string& path);

// The ids of the records under `<data_dir>/tasks`, sorted. Removes what a save cut off
// by a crash left behind (such a task never started).
std::vector<std::string> ListTaskRecords(const std::string& data_dir);

// Markers "failed" and "lost" with a one-line reason, durable before it returns.
Status WriteTaskMarker(const std::string& path, const std::string& name, const std::string& reason);
// The reason, or nullopt when there is no such marker.
std::optional<std::string> ReadTaskMarker(const std::string& path, const std::string& name);

// Removes the record (keeps the file as a spare when there is room); missing is fine.
void RemoveTaskRecord(const std::string& path);

}  // namespace tessera
