// The `tessera` command: the user commands, the simulators and tools. The daemons
// (server, agent, up) are in `tesserad`, which it runs for them (cli/daemon_exec.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/account_commands.h"
#include "cli/cluster_commands.h"
#include "cli/daemon_exec.h"
#include "cli/man_pages.h"
#include "cli/registry_command.h"
#include "cli/run_command.h"
#include "cli/sim_fgd_command.h"
#include "cli/sim_jobs_command.h"
#include "cli/top_command.h"
#include "cli/validate_command.h"
#include "cli/whatif_command.h"

namespace {

// The root page's sections beyond the options: what the commands read and how they end.
constexpr const char* kRootManSections = R"(.SH ENVIRONMENT
.TP
.B TESSERA_SERVER
The controller's URL, or several controllers' URLs joined by \fB,\fR (default: the saved
login's server, else http://127.0.0.1:7450).
.TP
.B TESSERA_TOKEN\fR, \fBTESSERA_TOKEN_FILE
The API token, or a file holding it (after \fB\-\-token\fR, before the saved login).
.TP
.B TESSERA_CA_CERT
A PEM file of CA certificates for an https:// controller (after \fB\-\-ca\-cert\fR).
.TP
.B TESSERA_FAILOVER_TIMEOUT
Seconds a command goes round unanswering controllers before it gives up (default 60).
.TP
.B XDG_CONFIG_HOME
Where \fBtessera login\fR saves the server and token: \fI$XDG_CONFIG_HOME/tessera/config.json\fR
(default \fI~/.config/tessera/config.json\fR).
.TP
.B TESSERA_JOIN_TOKEN
The join token of \fBtessera agent\fR, when no \fB\-\-token\-file\fR is given.
.SH FILES
.TP
.I /etc/tessera/server.env\fR, \fI/etc/tessera/agent.env
The options of the \fBtessera\-server\fR and \fBtessera\-agent\fR systemd units (Debian package).
.TP
.I /var/lib/tessera
The controller's data directory under the package's unit: \fIstate.db\fR and the tokens
(\fIadmin.token\fR, \fIjoin.token\fR, \fImetrics.token\fR, \fItokens/\fR).
.TP
.I /var/lib/tessera\-agent
The agent's data directory under the package's unit: task logs and \fInode.credential\fR.
.SH EXIT STATUS
0 ok, 1 server error, 2 bad input, 3 not found, 4 not authenticated or not allowed,
5 controller unreachable or unavailable, 6 conflict or rate limited, 124 \fBtessera wait\fR timed out.
)";

// After `tessera man` wrote the pages of this tree: tesserad's, for the daemon commands.
int WriteDaemonManPages(const std::string& dir) {
  return tessera::RunDaemon({"man", "--out", dir});
}

}  // namespace

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): std::bad_alloc ends it
  if (argc > 1 && tessera::IsDaemonCommand(argv[1])) {
    return tessera::ExecDaemon(argc, argv);
  }
  CLI::App app{"Tessera: a multi-tenant GPU cluster scheduler", "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
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
  tessera::AddRegistryCommands(app, &exit_code);
  // Listed for --help only: main hands them to tesserad before parsing.
  app.add_subcommand("server", "Run the controller");
  app.add_subcommand("agent", "Run a node agent");
  app.add_subcommand(
      "up", "Run a one-machine cluster: the controller and one agent (fake GPUs without NVML)");
  app.add_subcommand("store", "The controller's state store: `store migrate` into etcd");
  app.add_subcommand("gpu-probe",
                     "What the agent sees on this machine: GPUs, telemetry, a MIG create/destroy check");
  // Hidden: the build writes the manual pages with it (cmake/Packaging.cmake).
  tessera::ManPageOptions man;
  man.version = "tessera " TESSERA_VERSION;
  man.skip = tessera::IsDaemonCommand;  // tesserad writes those pages
  man.root_extra = kRootManSections;
  tessera::AddManCommand(app, man, WriteDaemonManPages, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, like bad input.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
