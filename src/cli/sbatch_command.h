// `tessera sbatch [OPTIONS] SCRIPT [ARGS...]` and `tessera submit SCRIPT [ARGS...]`: a
// Slurm batch script (cli/slurm_script.h) submitted as one job, POST /v1/jobs. An array
// (--array) is one submission too: the controller expands it.
//
// sbatch prints "Submitted batch job N" (--parsable: "N"), submit the id alone as it
// always does. Translation warnings go to `err` as "tessera: warning: ...". -A/--account
// is checked against the token's tenant (GET /v1/whoami) before anything is submitted.
// Exit codes as in cluster_commands.h. Thread safety: no shared state.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "cli/api_client.h"
#include "cli/cluster_commands.h"
#include "cli/slurm_script.h"

namespace tessera {

struct BatchSubmitOptions {
  SlurmJobInput input;
  std::string idempotency_key;  // "": a new one
  bool sbatch_style = true;     // "Submitted batch job N"; false: the id alone
  bool parsable = false;        // the id alone
  std::string output;           // "" or json (the controller's answer)
  // submit's own job flags, which override the script's (BuildJobSpec's fields but the
  // command); null: none.
  nlohmann::json overrides;
};
int RunBatchSubmit(const ClientConfig& config, const BatchSubmitOptions& options,
                   std::ostream& out, std::ostream& err);

// Whether `path` names a readable batch script (LooksLikeBatchScript on its text).
bool IsBatchScriptFile(const std::string& path);

// The job flags of `options` given on submit's command line, as a document to lay over
// a script's (the command and an empty env left out); InvalidArgument on bad values.
StatusOr<nlohmann::json> SubmitFlagOverrides(const SubmitOptions& options);

// `tessera submit SCRIPT ARGS...` (options.command): the script's directives with
// submit's job flags over them; the id printed alone (or -o json).
int RunSubmitScript(const ClientConfig& config, const SubmitOptions& options, bool lenient,
                    std::ostream& out, std::ostream& err);

// Registers `tessera sbatch` on `app`; it sets `exit_code`.
void AddSbatchCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
