// How `tessera` hands its daemon commands to `tesserad`, the binary beside it.
// Thread safety: call from main before any thread starts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// Whether `name` is a command `tesserad` runs (server, agent, up, gpu-probe, store).
bool IsDaemonCommand(std::string_view name);

// Replaces this process with `tesserad` from this executable's directory, with the
// same arguments; returns (with a message on stderr) only when that fails: 127.
int ExecDaemon(int argc, char** argv);

// Runs `tesserad ARGS...` from this executable's directory and waits for it: its exit
// code, or 127 (with a message on stderr) when it cannot be run.
int RunDaemon(const std::vector<std::string>& args);

// Where this executable is ("" when unknown).
std::string ThisExecutable();

}  // namespace tessera
