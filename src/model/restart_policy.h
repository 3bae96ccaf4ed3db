// A job's restart policy as the core applies it (sched/attempt_machine.h): which ends of
// an attempt start another, how many, and after what backoff. The job file's `restart`
// block that sets it is read by the API (api/restart_policy.h, api/job_codec.cc).
//
// `on` names the ends of an attempt that start a new one, each counting against `max`
// (0..100 restarts over the job's life): `failure` (a task exited non-zero or was killed
// by a signal), `node-lost` (a node of the job stopped answering), `gpu-fault` (a GPU the
// job held failed: XID 48/79/94/95, an uncorrectable ECC error, lost). An end it does not
// name, or one past `max`, fails the job. A failure's restart waits `backoff` (a fixed
// delay, 0..1h, default 30s); node-lost and gpu-fault restarts requeue at once (the
// fault was the machine's, and the drain or the node's absence keeps the job away).
// Preemption and lost tasks (an agent's restart) never count. Without a block a job
// gets DefaultRestartPolicy(): up to 3 restarts on node-lost and gpu-fault, none on
// failure.
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace tessera {

enum class RestartOn : uint8_t { kFailure = 1, kNodeLost = 2, kGpuFault = 4 };

inline constexpr int kMaxRestarts = 100;
inline constexpr Micros kDefaultRestartBackoff = 30'000'000;
inline constexpr Micros kMaxRestartBackoff = 3'600'000'000;

struct RestartPolicy {
  int max = 3;
  uint8_t on = 1 | 2 | 4;  // RestartOn bits
  Micros backoff = kDefaultRestartBackoff;

  bool Restarts(RestartOn cause) const { return (on & static_cast<uint8_t>(cause)) != 0; }
  bool operator==(const RestartPolicy&) const = default;
};

// What a job without a `restart` block gets.
inline RestartPolicy DefaultRestartPolicy() {
  return RestartPolicy{3, static_cast<uint8_t>(2 | 4), 0};
}

std::string_view RestartOnName(RestartOn cause);  // "failure", "node-lost", "gpu-fault"
// "failure, gpu-fault" (in that fixed order).
std::string RestartOnNames(uint8_t on);

}  // namespace tessera
