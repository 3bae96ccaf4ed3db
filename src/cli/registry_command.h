// `tessera registry login|logout|list`: a tenant's credentials for image registries
// (GET/PUT/DELETE /v1/registry-credentials), with which the nodes pull its jobs' private
// images. The password is read from a file or stdin (a prompt without echo on a
// terminal), never from the command line; nothing shows it again.
// Thread safety: functions; one command per process.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "cli/api_client.h"

namespace tessera {

struct RegistryOptions {
  std::string action;    // login, logout or list
  std::string registry;  // host[:port]
  std::string username;
  std::string password_file;  // "": read_secret
  std::string tenant;         // an admin's: the tenant it acts for
};

int RunRegistry(const ClientConfig& config, const RegistryOptions& options,
                const std::function<std::optional<std::string>()>& read_secret, std::ostream& out,
                std::ostream& err);

void AddRegistryCommands(CLI::App& app, int* exit_code);

}  // namespace tessera
