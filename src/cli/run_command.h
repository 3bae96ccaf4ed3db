// `tessera run [job flags] [--task N | --all-tasks] [--pty] -- COMMAND ARGS...`: a job
// in the foreground, as Slurm's srun. It submits the job (with an idempotency key, so a
// resend never makes a second one), says on stderr why it waits while it is pending
// ("tessera: job 12 pending: <reason>", once and on each change), streams task 0's
// output (or task N's, or every task's with "N: " before each line) to stdout as the
// controller receives it, and exits as the job did.
//
// --pty: the task runs on a pseudo-terminal of its own (agent/launch/pty_relay.h): the user's
// terminal goes raw (restored on every way out), keystrokes go to the task (Ctrl-C
// included: it interrupts the task's foreground program), its output comes back, the
// window size follows the terminal's. The job carries TESSERA_PTY=1 and the user's TERM.
// The stream goes straight to the node: the CLI must reach the node's address, and the
// stream is not encrypted.
//
// Exit code: the task's (task 0's, or --task N's; with --all-tasks the job's), 128 +
// the signal that ended it; 130 or 143 when this command's SIGINT or SIGTERM cancelled
// the job (a second one exits at once, leaving the cancel under way); 143 for a job
// cancelled by someone else; 1 for a job that failed without an exit code of its own
// (the reason is printed); the CLI's own codes (api_client.h) when the job could not be
// submitted or the controller stays unreachable for reconnect_ms (the job goes on:
// `tessera logs -f` follows it).
// Thread safety: RunJobInForeground installs signal handlers: one at a time.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>

#include "cli/api_client.h"
#include "cli/cluster_commands.h"

namespace tessera {

struct RunOptions {
  SubmitOptions job;  // flags and command, as `tessera submit` takes them
  int64_t task = 0;
  bool all_tasks = false;
  bool pty = false;
  int64_t poll_interval_ms = 200;
  // How long the controller may be unreachable (each time) before the CLI gives up.
  int64_t reconnect_ms = 60'000;
  // How long to wait for the job to end after a cancel or the terminal's end.
  int64_t end_wait_ms = 60'000;
  int in_fd = 0;   // --pty: keystrokes
  int out_fd = 1;  // --pty: the terminal's output
};

int RunJobInForeground(const ClientConfig& config, const RunOptions& options, std::ostream& out,
                       std::ostream& err);

// Registers `tessera run`; sets `exit_code`.
void AddRunCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
