// `tesserad`: the daemons (`server`, `agent`, `up`). They live in their own binary so that
// the user commands of `tessera` do not load the agent channel's libraries (gRPC and its
// dependencies add about 12 ms to every process start); `tessera server|agent|up` runs
// this binary (cli/daemon_exec.h).
#include <CLI/CLI.hpp>

#include "cli/daemon_commands.h"

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): std::bad_alloc ends it
  CLI::App app{"Tessera's daemons: the controller and the node agent", "tessera"};
  app.set_version_flag("--version", "tessera 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  tessera::AddDaemonCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
