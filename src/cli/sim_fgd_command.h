// `tessera sim fgd`: the FGD paper's fragmentation experiment on the Alibaba
// GPU-sharing trace, for a grid of pod lists, policies and seeds.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera {

// Registers the subcommand under `sim`; it sets `exit_code` when it runs.
void AddSimFgdCommand(CLI::App& sim, int* exit_code);

}  // namespace tessera
