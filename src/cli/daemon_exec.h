// How `tessera` hands its daemon commands to `tesserad`, the binary beside it.
// Thread safety: call from main before any thread starts.
#pragma once

#include <string_view>

namespace tessera {

// Whether `name` is a command `tesserad` runs (server, agent, up, gpu-probe, store).
bool IsDaemonCommand(std::string_view name);

// Replaces this process with `tesserad` from this executable's directory, with the
// same arguments; returns (with a message on stderr) only when that fails: 127.
int ExecDaemon(int argc, char** argv);

}  // namespace tessera
