// `tessera validate`: the admin's validation runs (the controller's /v1/admin/validations):
//   validate add NAME --command CMD [--every 24h] [--nodes all|n1,n2|label=value]
//                [--threshold 10%] [--metric-direction higher|lower] [--timeout 10m]
//                [--max-wait 2h] [--parallel N] [--queue Q]
//   validate list | run NAME [--node N] | results [NAME] [--node N] | remove NAME
// Each prints a short table or line, or the server's JSON with -o json.
// Thread safety: one command per call.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>

#include "cli/api_client.h"

namespace tessera {

struct ValidateOptions {
  std::string action;  // add, list, run, results, remove
  std::string name;
  std::string command;
  std::string every = "24h";
  std::string nodes = "all";
  std::string threshold = "10%";
  std::string direction = "higher";
  std::string timeout = "10m";
  std::string max_wait = "2h";
  int64_t parallel = 0;  // 0: a tenth of the selected nodes
  std::string queue;
  std::string node;
  int64_t limit = 20;  // results: runs shown
  std::string output;  // "" or "json"
};

// Exit codes as the other commands (api_client.h ExitCodeFor).
int RunValidate(const ClientConfig& config, const ValidateOptions& options, std::ostream& out,
                std::ostream& err);

// Registers `validate` and its subcommands on `app`; they set `exit_code` when they run.
void AddValidateCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
