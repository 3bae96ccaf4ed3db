// How a ShimPlan reaches a shim that is its own program (tessera-shim) rather than a fork
// of the agent: the agent encodes the plan's values into a memfd; the shim decodes them
// and rebuilds the argv and envp arrays. Descriptors do not travel in the encoding: they
// sit at fixed numbers in the shim (kShim*Fd), put there by posix_spawn's file actions.
//
// The encoding is private to one build (the agent and the shim it runs come from the same
// build): fields in a fixed order, numbers as 8-byte little-endian, strings and lists
// prefixed by their length. Decoding checks every length against what is left.
//
// Thread safety: reentrant.
#pragma once

#include <string>

#include "agent/launch/task_shim.h"
#include "base/status.h"

namespace tessera {

// Where tessera-shim finds what the agent hands it.
inline constexpr int kShimPlanFd = 3;    // the encoded plan (read to its end)
inline constexpr int kShimReportFd = 4;  // the report pipe's write end
inline constexpr int kShimLogFd = 5;     // the task's log (appended)
inline constexpr int kShimNullFd = 6;    // /dev/null
inline constexpr int kShimCgroupFd = 7;  // <cgroup>/cgroup.procs, when the plan has one
// The task's pseudo-terminal, when the plan has one (agent/launch/pty_relay.h).
inline constexpr int kShimPtyMasterFd = 8;
inline constexpr int kShimPtySlaveFd = 9;
inline constexpr int kShimPtyListenFd = 10;

// Every field of `plan` but its descriptors and the argv/envp pointer arrays; and whether
// it has a cgroup descriptor and a pseudo-terminal.
std::string EncodeShimPlan(const ShimPlan& plan);

// The inverse: fills `plan` (argv and envp point into its own storage, null-terminated);
// its descriptors are left unset. InvalidArgument when `bytes` is not an encoding.
Status DecodeShimPlan(const std::string& bytes, ShimPlan* plan, bool* has_cgroup_fd,
                      bool* has_pty = nullptr);

}  // namespace tessera
