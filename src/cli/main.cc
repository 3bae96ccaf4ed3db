// The `tessera` command: the user commands, the simulators and tools. The daemons
// (server, agent, up) are in `tesserad`, which it runs for them (cli/daemon_exec.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/account_commands.h"
#include "cli/cluster_commands.h"
#include "cli/daemon_exec.h"
#include "cli/run_command.h"
#include "cli/sim_fgd_command.h"
#include "cli/sim_jobs_command.h"
#include "cli/top_command.h"
#include "cli/validate_command.h"
#include "cli/whatif_command.h"

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): std::bad_alloc ends it
  if (argc > 1 && tessera::IsDaemonCommand(argv[1])) {
    return tessera::ExecDaemon(argc, argv);
  }
  CLI::App app{"Tessera: a multi-tenant GPU cluster scheduler", "tessera"};
  app.set_version_flag("--version", "tessera 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;

  CLI::App* sim = app.add_subcommand("sim", "Trace-driven simulation on the scheduling core");
  sim->require_subcommand(1);
  tessera::AddSimFgdCommand(*sim, &exit_code);
  tessera::AddSimJobsCommand(*sim, &exit_code);
  tessera::AddClusterCommands(app, &exit_code);
  tessera::AddRunCommand(app, &exit_code);
  tessera::AddTopCommand(app, &exit_code);
  tessera::AddWhatIfCommand(app, &exit_code);
  tessera::AddValidateCommand(app, &exit_code);
  tessera::AddAccountCommands(app, &exit_code);
  // Listed for --help only: main hands them to tesserad before parsing.
  app.add_subcommand("server", "Run the controller");
  app.add_subcommand("agent", "Run a node agent");
  app.add_subcommand(
      "up", "Run a one-machine cluster: the controller and one agent (fake GPUs without NVML)");
  app.add_subcommand("store", "The controller's state store: `store migrate` into etcd");
  app.add_subcommand("gpu-probe",
                     "What the agent sees on this machine: GPUs, telemetry, a MIG create/destroy check");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, like bad input.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
