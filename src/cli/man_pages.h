// Manual pages (roff, section 1) written from a CLI11 command tree: one page per
// command, named after its path (`tessera.1`, `tessera-submit.1`, `tessera-sim-jobs.1`),
// with NAME, SYNOPSIS, DESCRIPTION, COMMANDS, ARGUMENTS, OPTIONS (from the options'
// own descriptions) and SEE ALSO. `tessera man --out DIR` writes them at build time, so
// the pages say what `--help` says. Thread safety: none needed (a one-shot command).
#pragma once

#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace tessera {

struct ManPageOptions {
  std::string version;     // page footer, e.g. "tessera 0.1.0"
  bool write_root = true;  // write the page of `app` itself
  // Top-level commands whose pages another tree writes (tesserad's daemons).
  bool (*skip)(std::string_view name) = nullptr;
  std::string root_extra;  // roff appended to the root page (ENVIRONMENT, ...)
};

// Writes the pages of `app` and of each visible (not hidden, not disabled) command
// below it into `dir` (made if missing). Returns "" or what went wrong.
std::string WriteManPages(const CLI::App& app, const ManPageOptions& options,
                          const std::string& dir);

// Adds the hidden command `man --out DIR` to `app`, which calls WriteManPages and then
// `after(dir)` (its exit code); `*exit_code` receives the result.
void AddManCommand(CLI::App& app, ManPageOptions options, int (*after)(const std::string& dir),
                   int* exit_code);

// Roff text for `text`: backslashes, leading dots and non-ASCII characters escaped,
// `code` spans in bold. Exposed for tests.
std::string RoffText(const std::string& text);

}  // namespace tessera
