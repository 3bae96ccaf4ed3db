// Who is who: `tessera login` / `logout` (the saved login, cli/client_config_file.h),
// `tessera token create|list` (admin: tenant and user tokens) and `tessera history`
// (finished jobs, sacct-like, from GET /v1/history).
// Thread safety: functions; one command per process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <string>

#include "base/clock.h"
#include "cli/api_client.h"

namespace tessera {

struct LoginOptions {
  std::string token_file;   // --token-file; "": a prompt on a terminal, else a line of stdin
  std::string config_path;  // where the login is saved (ClientConfigPath)
};
// Reads the token, checks it with GET /v1/whoami on `config.server` and saves both.
// `read_secret` reads the token when there is no file: from a prompt without echo on a
// terminal, else a line of stdin (the command line gives ReadSecretFromStdin).
int RunLogin(const ClientConfig& config, const LoginOptions& options,
             const std::function<std::optional<std::string>()>& read_secret, std::ostream& out,
             std::ostream& err);
// Removes the saved token (the server stays); 0 also when none was saved.
int RunLogout(const std::string& config_path, std::ostream& out, std::ostream& err);
// The token from stdin: a prompt without echo on a terminal, else its first line.
std::optional<std::string> ReadSecretFromStdin(std::istream& in, std::ostream& prompt);

struct TokenOptions {
  std::string action;  // create or list
  std::string tenant, user, name;
  std::string output;  // "" or json
};
int RunToken(const ClientConfig& config, const TokenOptions& options, std::ostream& out,
             std::ostream& err);

struct HistoryOptions {
  std::string user, tenant, state;
  std::string since = "1d";  // ParseTimeArgument (table.h)
  std::string until = "now";
  int64_t limit = 1000;  // jobs shown at most
  std::string output;    // "", wide or json
};
int RunHistory(const ClientConfig& config, const HistoryOptions& options, const Clock& clock,
               std::ostream& out, std::ostream& err);

void AddAccountCommands(CLI::App& app, int* exit_code);

}  // namespace tessera
