#include "cli/registry_command.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "base/strings.h"
#include "cli/account_commands.h"
#include "cli/cluster_commands.h"
#include "cli/json_read.h"

namespace tessera {

int RunRegistry(const ClientConfig& config, const RegistryOptions& o,
                const std::function<std::optional<std::string>()>& read_secret, std::ostream& out,
                std::ostream& err) {
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  const std::string query = o.tenant.empty() ? "" : "?tenant=" + PercentEncode(o.tenant);
  if (o.action == "list") {
    StatusOr<nlohmann::json> list =
        (*client)->GetJson("/v1/registry-credentials",
                           o.tenant.empty() ? QueryParams{} : QueryParams{{"tenant", o.tenant}});
    if (!list.ok()) {
      return ReportError(list.status(), err);
    }
    for (const nlohmann::json& r : json_read::Array(*list, "registries")) {
      out << (r.is_string() ? r.get<std::string>() : "") << "\n";
    }
    return 0;
  }
  const std::string path = "/v1/registry-credentials/" + o.registry + query;
  if (o.action == "logout") {
    StatusOr<ApiResponse> r = (*client)->Delete(path);
    if (!r.ok()) {
      return ReportError(r.status(), err);
    }
    err << "tessera: the credential for " << o.registry << " is removed\n";
    return 0;
  }
  std::optional<std::string> password;
  if (!o.password_file.empty()) {
    std::ifstream in(o.password_file);
    std::string line;
    if (in && std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') {
        line.pop_back();  // a file written on Windows
      }
      password = line;
    }
  } else {
    password = read_secret();
  }
  if (!password.has_value() || password->empty()) {
    return ReportError(InvalidArgumentError("no password was given"), err);
  }
  const nlohmann::json body = {{"username", o.username}, {"password", *password}};
  StatusOr<ApiResponse> r = (*client)->Put(path, body.dump(), "application/json");
  if (!r.ok()) {
    return ReportError(r.status(), err);
  }
  err << "tessera: jobs of this tenant pull from " << o.registry << " as " << o.username << "\n";
  return 0;
}

void AddRegistryCommands(CLI::App& app, int* exit_code) {
  CLI::App* registry = app.add_subcommand(
      "registry", "Credentials for image registries, with which your jobs' images are pulled");
  registry->require_subcommand(1);
  for (const char* action : {"login", "logout", "list"}) {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<RegistryOptions>();
    o->action = action;
    CLI::App* cmd = registry->add_subcommand(
        action, o->action == "login"    ? "Set your tenant's credential for a registry"
                : o->action == "logout" ? "Remove your tenant's credential for a registry"
                                        : "The registries your tenant has a credential for");
    if (o->action != "list") {
      cmd->add_option("registry", o->registry, "the registry, HOST[:PORT] (e.g. nvcr.io)")
          ->required();
    }
    if (o->action == "login") {
      cmd->add_option("-u,--username", o->username, "the user name")->required();
      cmd->add_option("--password-file", o->password_file,
                      "a file whose first line is the password (default: a prompt on a "
                      "terminal, else a line of stdin)");
    }
    cmd->add_option("--tenant", o->tenant, "the tenant (an admin's token only)");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code] {
      StatusOr<ClientConfig> config = ResolveClientConfig(*flags, ProcessEnvironment());
      if (!config.ok()) {
        *exit_code = ReportError(config.status(), std::cerr);
        return;
      }
      *exit_code = RunRegistry(
          *config, *o, [] { return ReadSecretFromStdin(std::cin, std::cerr); }, std::cout,
          std::cerr);
    });
  }
}

}  // namespace tessera
