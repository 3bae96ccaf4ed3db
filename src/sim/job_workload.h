// Turns a job trace into simulator jobs for a cluster preset.
//
// A job of G GPUs on nodes of N GPUs is one task when G <= N, else ceil(G/N) tasks
// sharing the GPUs as evenly as possible (soft "same rack" topology), or with
// `gpus_anywhere` G tasks of one GPU with no topology (any free GPUs will do). Each GPU
// comes with the preset's CPU and memory. Tenants become queues of the same name
// ("" becomes "default"). Users' runtime limits are drawn to overestimate as users
// do: a fifth ask for the site maximum, the rest for 1.2x to 5x the true runtime,
// rounded up to a round number (15 min, 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, 1 d,
// 2 d, 3 d, 7 d, 14 d, 30 d), never below the true runtime.
// Thread safety: functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "model/gpu_catalog.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"

namespace tessera {

struct WorkloadOptions {
  int gpus_per_node = 8;
  Micros checkpoint_interval = 1800LL * 1'000'000;  // 0: jobs never checkpoint
  bool checkpoint_on_signal = false;
  uint64_t seed = 42;  // for users' runtime limits
  // A job's GPUs may lie on any nodes, as the Tiresias simulator counts free GPUs
  // cluster-wide without placing them (its DLAS ignores the placement scheme).
  bool gpus_anywhere = false;
};

Micros UserRuntimeLimit(Micros duration, Rng& rng);

std::vector<SimJob> JobsFromTrace(const JobTrace& trace, const WorkloadOptions& options);

// The trace's tenants, in order of first appearance ("" as "default").
std::vector<std::string> TraceTenants(const JobTrace& trace);

}  // namespace tessera
