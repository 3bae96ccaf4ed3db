// `tessera top`: a live terminal view of the cluster in the spirit of nvtop and gpustat.
//
// RenderTop turns the answers of GET /v1/nodes and GET /v1/jobs into a frame: a header
// with cluster totals, then per node one line (state, CPU, memory, GPUs allocated) and
// per GPU one line (model, sharing mode, utilisation and memory bars, temperature,
// power, who holds it); shared and MIG GPUs get one sub-line per slice (tenant, job,
// share or MIG profile, memory). Drained GPUs read "DRAINED: <reason>", lost ones
// "LOST", values without telemetry "-". A footer lists the first pending jobs with the
// reason they wait. Fields the controller does not send read as absent. Tenants get a
// stable ANSI colour (a hash of the name) unless colour is off. Every line is cut to
// `width` columns (escape sequences do not count), never wrapped.
//
// RunTop fetches and draws: one frame (`once`), or in place every `interval` on the
// terminal's alternate screen, cursor hidden, until `wait` says stop (q, Ctrl-C,
// SIGTERM at the command line), restoring the screen before it returns. In live mode a
// failed fetch the controller may recover from (unreachable, 5xx, 429) is shown in the
// frame above the last good data and retried; a refused token or a bad request ends it
// with the usual exit code (api_client.h).
// Thread safety: RenderTop and the helpers are pure. RunTop calls its hooks on the
// calling thread; the command line's terminal hooks install signal handlers, so one
// `top` runs per process at a time.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "cli/api_client.h"

namespace tessera {

// Columns and rows of a terminal; 0: unknown (no limit).
struct TerminalSize {
  size_t columns = 0;
  size_t rows = 0;
};

struct TopOptions {
  // What a frame shows.
  std::vector<std::string> nodes;  // only these nodes (names); empty: all
  bool color = false;              // ANSI colours and bold; off: no escape sequence at all
  size_t width = 0;                // cut lines to this many columns; 0: no limit
  size_t bar_width = 10;           // cells inside a bar's ends, 1..100
  size_t max_pending = 5;          // pending jobs listed in the footer
  std::string title;               // a first line (RunTop: server and time); "": none

  // How RunTop runs.
  bool once = false;              // one frame, no terminal control
  Micros interval = 2'000'000;    // between live frames, > 0
  int64_t max_frames = 0;         // live mode stops after this many frames; 0: no limit
  // Live mode: the terminal's size before each frame (width and rows). Null: `width`
  // and no row limit.
  std::function<TerminalSize()> terminal_size;
  // Live mode: waits up to `micros` between frames (returning early on a key or a
  // resize); false when the user asked to quit. Null: sleeps the thread.
  std::function<bool(Micros micros)> wait;
};

// The frame for `nodes` (the body of GET /v1/nodes, or its "nodes" array) and `jobs`
// (the body of GET /v1/jobs, or its "jobs" array; pending and running jobs), one line
// per '\n'-terminated line.
std::string RenderTop(const nlohmann::json& nodes, const nlohmann::json& jobs,
                      const TopOptions& options);
// As above with `queues` (the body of GET /v1/queues): the header counts every
// tenant's running and pending jobs from the queues' counts, since a tenant's GET
// /v1/jobs lists only its own jobs, and the footer says how many pending jobs of
// the listing does not hold (a count only). Without queues: counts of `jobs`.
std::string RenderTop(const nlohmann::json& nodes, const nlohmann::json& jobs,
                      const nlohmann::json& queues, const TopOptions& options);

// A bar of `width` cells between "▕" and "▏": permille/1000 of them full ("█"), the
// rest blank, rounded to the nearest cell, but a value under 1000 leaves at least one
// blank and a non-zero value shows at least one full cell (that wins when width is 1).
// Out-of-range values clamp.
std::string UsageBar(int64_t permille, size_t width);

// The SGR colour code ("32", "94", ...) of a tenant: a fixed palette indexed by a hash
// of the name (FNV-1a), so a tenant keeps its colour across frames and runs.
std::string TenantColor(std::string_view tenant);

// `line` cut to `width` columns (code points; ANSI escape sequences count zero): a cut
// line ends in "…" at column `width` and, when it held escape sequences, a reset
// ("\x1b[0m"). width 0: `line` unchanged.
std::string FitLine(std::string_view line, size_t width);

// `tessera top`: see the top of this file. Returns the exit code: 0, or the code of the
// error that ended it (api_client.h).
int RunTop(const ClientConfig& config, const TopOptions& options, const Clock& clock,
           std::ostream& out, std::ostream& err);

// Registers `top` on `app` (--interval, --once, --node, --width, --no-color and the
// connection flags); the run sets `exit_code`.
void AddTopCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
