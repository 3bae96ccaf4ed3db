// RunTool: runs a helper program (podman) to its end and collects its output, with a
// deadline. For the agent's container runtime, which drives Podman's command line.
//
// The program gets exactly `env` as its environment (nothing of the agent's), stdin from
// /dev/null, stdout and stderr on one pipe, no descriptor of the agent beyond those, and
// its own process group, which is SIGKILLed when the deadline passes. `on_line` (may be
// empty) sees each line of output as it comes (pull progress); at most kMaxToolOutput
// bytes are kept, the last ones.
// Thread safety: reentrant; waits for its own child by pid only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

inline constexpr size_t kMaxToolOutput = 64 << 10;

struct ToolResult {
  int exit_code = -1;  // -1 when it was killed by a signal (the deadline's, or another)
  int signal = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr together, the last kMaxToolOutput bytes
};

// Internal when the program cannot be started (not found, not executable).
StatusOr<ToolResult> RunTool(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env,
                             std::chrono::milliseconds deadline,
                             const std::function<void(std::string_view line)>& on_line = {});

// The last non-empty line of a tool's output, without Podman's "Error: " prefix: what
// to tell a user about a failure.
std::string LastToolLine(std::string_view output);

}  // namespace tessera
