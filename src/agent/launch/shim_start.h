// How TaskLauncher starts a task's shim (agent/launch/task_shim.h), and the bits of shim
// bookkeeping the launcher shares with it. Internal to the launcher.
//
// Two ways, with the same shim code and the same reports:
//   SpawnShim: posix_spawn of tessera-shim, the shim as its own small program, given
//     the plan through agent/launch/shim_plan_codec.h. posix_spawn does not copy the agent's
//     address space (CLONE_VM | CLONE_VFORK), so a start costs about the exec of a
//     small static binary whatever the agent's size; and the shim, which lives as long
//     as its task, holds none of the agent's memory. Callable from any thread.
//   ForkShim: fork of the agent, whose child runs RunShim. Only from a thread that
//     blocks every signal (TaskLauncher's Spawner), as the child inherits its mask. The
//     fallback where tessera-shim is not installed.
//
// Thread safety: reentrant (ForkShim's caller must keep to the rule above).
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace tessera {

struct LaunchSpec;
struct ShimPlan;

struct Spawned {
  pid_t shim = 0;
  pid_t leader = 0;
};

StatusOr<Spawned> SpawnShim(const LaunchSpec& spec, const ShimPlan& plan,
                            const std::string& program);
StatusOr<Spawned> ForkShim(const LaunchSpec& spec, const ShimPlan& plan);

// tessera-shim beside the running executable, when it is there and executable; "" if not.
std::string ShimProgramBesideThisExecutable();

// Waits for the child `pid` (the caller's) to end and collects it.
void ReapChild(pid_t pid);

// Appends "clear" to a task's state file: what the launcher and the shim wrote before
// no longer holds (agent/launch/task_state_file.h).
Status ClearStateFile(const std::string& state_file);

}  // namespace tessera
