// `tessera whatif`: what another policy (or queue configuration) would have done to the
// cluster's own recent history. Fetches GET /v1/admin/history page by page (admin
// token), replays it through the job simulator under the policy that ran and under
// --policy / --queues (sim/whatif.h), and prints what happened beside both replays,
// per tenant and queue (--json for machines).
// Thread safety: one command per call.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "base/clock.h"
#include "cli/api_client.h"

namespace tessera {

struct WhatIfCommandOptions {
  std::string policy;       // the other policy; "": the one that ran (with --queues)
  std::string queues_file;  // the other side's queue configuration; "": the cluster's
  std::string since = "7d";  // see ParseTimeArgument (table.h)
  std::string until = "now";
  bool json = false;
  int64_t page_size = 1000;  // jobs per history page
};

// Exit codes as the other commands (api_client.h ExitCodeFor): 2 for bad flags, an
// unknown policy or an empty window.
int RunWhatIfCommand(const ClientConfig& config, const WhatIfCommandOptions& options,
                     const Clock& clock, std::ostream& out, std::ostream& err);

// Registers `whatif` on `app`; it sets `exit_code` when it runs.
void AddWhatIfCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
