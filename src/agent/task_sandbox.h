// TaskSandbox: what a task may see of the node besides its own processes: its own
// directories, owned by the Unix identity it runs as, and only its own GPUs' device
// nodes.
//
// - Each job gets `<data_dir>/jobs/<job>/` (mode 0700, owned by the task's uid), with
//   `home/` and `tmp/` inside (HOME and TMPDIR). `<data_dir>` and `<data_dir>/jobs` are
//   0711: a task can reach its own job directory but cannot list anyone's, and the
//   rest of the agent's data (logs, task records, its credential) is root's, 0700/0600.
// - The checkpoint directory is made for the task's uid when the agent creates it;
//   one that exists keeps its owner (a path the tenant named is never chowned), and
//   its `.tessera/` protocol subdirectory is made afresh (never followed as a link).
// - GPU device nodes: `<device_dir>/nvidia<index>` per GPU. Every GPU node of this
//   machine that the task was not given is hidden from it (TaskLauncher's
//   hidden_devices: an unreadable file is mounted over it in the task's own mount
//   namespace), so CUDA_VISIBLE_DEVICES is not the only fence.
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

struct JobSandbox {
  std::string dir;   // <data_dir>/jobs/<job>: the default working directory
  std::string home;  // HOME
  std::string tmp;   // TMPDIR
};

// Makes (or reuses) the job's directories, owned by uid:gid when uid >= 0.
StatusOr<JobSandbox> PrepareJobSandbox(const std::string& data_dir, uint64_t job, int64_t uid,
                                       int64_t gid);
// Removes the job's directories (when no task of the job is left on the node).
void RemoveJobSandbox(const std::string& data_dir, uint64_t job);

// Makes the checkpoint directory for uid:gid (see above) and a fresh `.tessera/`.
Status PrepareCheckpointDir(const std::string& dir, int64_t uid, int64_t gid);

// The device nodes of the GPUs in `all` that are not in `granted`, that exist.
std::vector<std::string> HiddenGpuDevices(const std::string& device_dir, int gpu_count,
                                          const std::set<int>& granted);

// Whether uid:gid can search every directory down to `dir` and `dir` itself (mode
// bits only; ACLs are not read). True for uid < 0 (the agent's own identity).
bool Reachable(const std::string& dir, int64_t uid, int64_t gid);

// Makes `dir` and its missing parents with `mode`; the ones it creates get `mode`.
Status MakeDirs(const std::string& dir, unsigned mode);

}  // namespace tessera
