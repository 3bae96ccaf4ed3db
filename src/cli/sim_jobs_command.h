// `tessera sim jobs`: replays a job trace (Philly, Tiresias, Pollux) through the
// scheduling cycle under several policies and compares JCT, waiting, utilisation,
// fairness, preemptions and quota violations.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera {

// Registers the subcommand under `sim`; it sets `exit_code` when it runs.
void AddSimJobsCommand(CLI::App& sim, int* exit_code);

}  // namespace tessera
