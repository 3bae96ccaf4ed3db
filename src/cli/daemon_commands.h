// The daemons: `tessera server` (the controller), `tessera agent` (a node agent) and
// `tessera up` (both in one process: a one-machine cluster, fake GPUs when the
// machine has none). They run until SIGINT or SIGTERM and then stop cleanly: the
// HTTP server, the scheduling loop, the agent (killing its tasks), the store.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera {

void AddDaemonCommands(CLI::App& app, int* exit_code);

// The fake inventory of `tessera up` on a machine without GPUs: room for every
// example in examples/ (a 2x8-GPU gang, a MIG notebook, a 0.25-GPU share).
inline constexpr const char* kDefaultFakeGpus = "2x8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared";

}  // namespace tessera
