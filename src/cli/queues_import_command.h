// `tessera queues import kueue.yaml [--out FILE | --apply] [--lenient]`: Kueue objects
// to Tessera's queue configuration (api/kueue_import.h). Without --out or --apply the
// configuration goes to `out`; --out writes it to a file; --apply sends it to the
// controller (PUT /v1/queues, admin). Warnings (--lenient, rounded memory) go to `err`
// as "tessera: warning: ...". Exit codes as in cluster_commands.h; a Kueue feature
// without an equivalent is bad input (2).
// Thread safety: functions, no shared state.
#pragma once

#include <ostream>
#include <string>

#include "cli/api_client.h"

namespace tessera {

struct QueuesImportOptions {
  std::string file;      // Kueue YAML, several documents ("-": stdin)
  std::string out_file;  // "" : none
  bool apply = false;
  bool lenient = false;
};

// `config` is used only with `apply` (may be null otherwise).
int RunQueuesImport(const ClientConfig* config, const QueuesImportOptions& options,
                    std::ostream& out, std::ostream& err);

}  // namespace tessera
