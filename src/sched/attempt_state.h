// What a job's current attempt has come to: its tasks' exits, how it is to end once they
// are all gone, and the restarts its policy has counted. Part of the job's JobRecord
// (JobRecord::attempt), kept by the AttemptMachine (attempt_machine.h) and by no one else:
// drivers read it, and change it only through the machine's events.
// Thread safety: values.
#pragma once

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "model/restart_policy.h"

namespace tessera {

enum class JobEnd : uint8_t { kSucceeded, kFailed, kCancelled };

// Why an attempt ended early. kGpuFault: a GPU it held failed (XID 48/79/94/95, an
// uncorrectable ECC error, lost); kFailure: a task failed and the job's restart policy
// restarts it; kRequested: its user asked (a requeue command); kIdle: its queue's idle
// policy requeued it (GPU utilisation stayed under the policy's floor). Values are kept
// stable (new ones last).
enum class RequeueCause : uint8_t {
  kPreempted,
  kNodeLost,
  kTaskLost,
  kGpuFault,
  kFailure,
  kRequested,
  kIdle,
};

// How a stopping attempt ends once all its tasks are gone; kNone: by its tasks' exits
// (all 0: succeeded, else failed).
enum class AttemptEnd : uint8_t { kNone, kRequeue, kCancel, kFail };

struct TaskOutcome {
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
  bool failed() const { return exit_code != 0 || signal != 0; }
};

struct AttemptState {
  RestartPolicy policy = DefaultRestartPolicy();  // set by the driver at submission
  int restarts = 0;                               // counted by `policy`, over all attempts
  // The current attempt, while the job runs or stops.
  std::vector<TaskOutcome> tasks;
  AttemptEnd after = AttemptEnd::kNone;
  RequeueCause cause = RequeueCause::kPreempted;  // with after == kRequeue
  // The end is kFail because its restart policy refused a requeue for `cause`: the grace
  // rule still applies to it (a job that finished in its grace succeeded).
  bool refused = false;
  bool checkpointed = false;  // a task reported a checkpoint since the attempt was asked to stop
  Micros checkpoint_progress = 0;
};

}  // namespace tessera
