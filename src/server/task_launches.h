// Task launches: what one task of a started job is told to run (TaskLaunch,
// api/agent_protocol.h), built from plain inputs: the job, its submission, every task's
// node and allocation, the spec of the task's node, and what the controller knows
// besides (the master node's address, the tenant's Unix identity, the pty secret, the
// checkpoint directory, the job's array).
//
// The launch carries the submission's command and env, the task's CPUs, memory, GPUs
// (whole cards and shares by index, MIG grants as MigRequests by profile name) and NUMA
// nodes, and env on top of the submission's: the gang's rendezvous as torchrun sets it
// (MASTER_ADDR, RANK, LOCAL_RANK, NODE_RANK, ...), SLURM_* (so that batch scripts written
// for Slurm run), TESSERA_*, and for a software share the MPS and CUDA limiter limits
// (or the time-slicing marker).
//
// Pure: no controller state, clock or lock, so that the same inputs give the same launch
// and it is tested on its own. What the job itself holds is read by LaunchInputsOf; the
// controller adds what its other services know, under its core lock
// (Controller::MakeLaunch), for a start and for a resent launch; other launchers (Slurm
// steps) are to build theirs the same way.
// Thread safety: values. LaunchInputs holds views (submission, allocations, node, task
// names) into the caller's state, which must outlive the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "api/job_codec.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "state/node_ledger.h"

namespace tessera {

struct LiveJob;    // server/job_table.h
struct JobRecord;  // sched/job_record.h

// The job array a job is an element of, for SLURM_ARRAY_*.
struct LaunchArray {
  uint64_t id = 0;     // the array's job id; 0: not an element (no SLURM_ARRAY_* at all)
  int64_t index = -1;  // this element's index (JobSubmission::array_index)
  // The array's indices: how many, the first and the last; count 0: not known (then
  // SLURM_ARRAY_TASK_COUNT, _MIN and _MAX are left out).
  size_t count = 0;
  int64_t min = 0;
  int64_t max = 0;
};

struct LaunchInputs {
  uint64_t job_id = 0;
  std::string job_name;
  int32_t attempt = 0;  // the attempt being launched (JobRow::attempts)
  std::string tenant;
  std::string queue;
  const JobSubmission* submission = nullptr;  // required
  int task = 0;                               // index into task_nodes and allocations
  // Every task of the attempt in task order: its node's name and its allocation (the
  // same length; the world size is allocations.size()).
  std::vector<std::string_view> task_nodes;
  std::span<const Allocation> allocations;
  const NodeSpec* node = nullptr;  // required: the spec of task `task`'s node
  std::string master_address;      // task 0's node's address; "": 127.0.0.1
  std::optional<std::pair<int64_t, int64_t>> identity;  // uid, gid; none: the agent's own
  std::string pty_secret;                               // "": no terminal
  std::string checkpoint_dir;                           // CheckpointDirOf
  bool checkpoint_managed = false;  // the controller chose checkpoint_dir (TaskLaunch)
  LaunchArray array;
};

// The launch of inputs.task. The GPU grants' indices must be in inputs.node's GPUs and
// their MIG profiles in their models' tables (`catalog`), as the core's allocations are.
TaskLaunch BuildTaskLaunch(const LaunchInputs& inputs, const GpuCatalog& catalog);

// The inputs of task `task`'s launch that the job holds itself, of its current attempt
// (`rec`: its record in the core, with one allocation per task of job.tasks): ids, names,
// tenant, queue, submission, every task's node and allocation, the checkpoint directory
// (CheckpointDirOf), and, when the job is an element of array `array_id` (0: it is not)
// whose indices are `array_indices` (ascending; empty: not known), its numbering. Left
// for the caller, who knows them: node, master_address, identity and pty_secret. The
// result views `job` and `rec`.
LaunchInputs LaunchInputsOf(const LiveJob& job, const JobRecord& rec, int task,
                            const std::string& checkpoint_root, const std::string& data_dir,
                            uint64_t array_id, std::span<const int64_t> array_indices);

// The job's checkpoint directory: the one its submission names, else
// <checkpoint_root>/<job id>, with checkpoint_root "" meaning <data_dir>/checkpoints.
// The same for every attempt, so that a requeued job resumes from its checkpoint.
std::string CheckpointDirOf(const JobSubmission& submission, uint64_t job_id,
                            const std::string& checkpoint_root, const std::string& data_dir);

}  // namespace tessera
