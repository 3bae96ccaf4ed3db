#include "cli/account_commands.h"

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "base/strings.h"
#include "base/time_format.h"
#include "cli/client_config_file.h"
#include "cli/cluster_commands.h"
#include "cli/json_read.h"
#include "cli/table.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using json_read::Str;

constexpr int kMaxHistoryPages = 1000;  // a bound on one listing's requests

std::string Pretty(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError("cannot read the token file '" + path + "'");
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token(Trim(text.str()));
  if (token.empty()) {
    return InvalidArgumentError("the token file '" + path + "' is empty");
  }
  return token;
}

// "alice of tenant team-a", "tenant team-a", "admin".
std::string WhoText(const json& me) {
  const std::string role = Str(me, "role");
  if (role != "tenant") {
    return role;
  }
  const std::string user = Str(me, "user");
  return user.empty() ? "tenant " + Str(me, "tenant")
                      : "user " + user + " of tenant " + Str(me, "tenant");
}

std::string Time(const json& j, const char* key) {
  const std::string t = Str(j, key);
  return t.empty() ? "-" : t;
}

}  // namespace

std::optional<std::string> ReadSecretFromStdin(std::istream& in, std::ostream& prompt) {
  std::string line;
  if (::isatty(STDIN_FILENO) != 1) {
    if (!std::getline(in, line)) {
      return std::nullopt;
    }
    return std::string(Trim(line));
  }
  prompt << "Token: " << std::flush;
  termios old{};
  const bool quiet = ::tcgetattr(STDIN_FILENO, &old) == 0;
  if (quiet) {
    termios silent = old;
    silent.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent);
  }
  const bool got = static_cast<bool>(std::getline(in, line));
  if (quiet) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
  }
  prompt << "\n";
  return got ? std::optional<std::string>(std::string(Trim(line))) : std::nullopt;
}

int RunLogin(const ClientConfig& config, const LoginOptions& o,
             const std::function<std::optional<std::string>()>& read_secret, std::ostream& out,
             std::ostream& err) {
  if (o.config_path.empty()) {
    return ReportError(InvalidArgumentError("no place for the login: set HOME or XDG_CONFIG_HOME"),
                       err);
  }
  std::string token;
  if (!o.token_file.empty()) {
    StatusOr<std::string> t = ReadTokenFile(o.token_file);
    if (!t.ok()) {
      return ReportError(t.status(), err);
    }
    token = *t;
  } else {
    std::optional<std::string> t = read_secret();
    if (!t.has_value() || t->empty()) {
      return ReportError(InvalidArgumentError("no token given (--token-file, or on stdin)"), err);
    }
    token = *t;
  }
  ClientConfig checked = config;
  checked.token = token;
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(checked);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  StatusOr<json> me = (*client)->GetJson("/v1/whoami");
  if (!me.ok()) {
    return ReportError(me.status(), err);  // nothing is saved for a token that does not work
  }
  if (Status st = WriteSavedLogin(o.config_path, SavedLogin{config.server, token}); !st.ok()) {
    return ReportError(st, err);
  }
  out << "Logged in to " << config.server << " as " << WhoText(*me) << " (saved in "
      << o.config_path << ")\n";
  return 0;
}

int RunLogout(const std::string& path, std::ostream& out, std::ostream& err) {
  if (path.empty()) {
    out << "Not logged in\n";
    return 0;
  }
  StatusOr<std::optional<SavedLogin>> saved = ReadSavedLogin(path);
  if (!saved.ok()) {
    return ReportError(saved.status(), err);
  }
  if (!saved->has_value() || (*saved)->token.empty()) {
    out << "Not logged in\n";
    return 0;
  }
  if (Status st = WriteSavedLogin(path, SavedLogin{(*saved)->server, ""}); !st.ok()) {
    return ReportError(st, err);
  }
  out << "Logged out of " << (*saved)->server << "\n";
  return 0;
}

int RunToken(const ClientConfig& config, const TokenOptions& o, std::ostream& out,
             std::ostream& err) {
  if (!o.output.empty() && o.output != "json") {
    return ReportError(InvalidArgumentError("-o: only json, got '" + o.output + "'"), err);
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  if (o.action == "create") {
    json body = {{"tenant", o.tenant}};
    if (!o.user.empty()) {
      body["user"] = o.user;
    }
    if (!o.name.empty()) {
      body["name"] = o.name;
    }
    StatusOr<ApiResponse> r = (*client)->Post("/v1/tokens", body.dump(), "application/json");
    if (!r.ok()) {
      return ReportError(r.status(), err);
    }
    StatusOr<json> made = ParseJsonBody(r->body, "POST /v1/tokens");
    if (!made.ok()) {
      return ReportError(made.status(), err);
    }
    if (o.output == "json") {
      out << Pretty(*made) << "\n";
      return 0;
    }
    // The token alone on stdout (for a file); what it is on stderr. It is shown once.
    out << Str(*made, "token") << "\n";
    err << "tessera: a token for "
        << (o.user.empty() ? "tenant " + o.tenant : "user " + o.user + " of tenant " + o.tenant)
        << " (" << Str(*made, "name") << "); it is not shown again\n";
    return 0;
  }
  StatusOr<json> list = (*client)->GetJson("/v1/tokens");
  if (!list.ok()) {
    return ReportError(list.status(), err);
  }
  if (o.output == "json") {
    out << Pretty(*list) << "\n";
    return 0;
  }
  Table table({"NAME", "ROLE", "TENANT", "USER", "CREATED"});
  for (const json& t : json_read::Array(*list, "tokens")) {
    table.AddRow(
        {Str(t, "name"), Str(t, "role"), Str(t, "tenant"), Str(t, "user"), Str(t, "created")});
  }
  out << table.Render();
  return 0;
}

int RunHistory(const ClientConfig& config, const HistoryOptions& o, const Clock& clock,
               std::ostream& out, std::ostream& err) {
  if (!o.output.empty() && o.output != "json" && o.output != "wide") {
    return ReportError(InvalidArgumentError("-o: wide or json, got '" + o.output + "'"), err);
  }
  if (o.limit < 1) {
    return ReportError(InvalidArgumentError("--limit: at least 1"), err);
  }
  const Micros now = clock.NowMicros();
  StatusOr<Micros> since = ParseTimeArgument(o.since, now);
  StatusOr<Micros> until = ParseTimeArgument(o.until, now);
  if (!since.ok() || !until.ok()) {
    return ReportError(InvalidArgumentError(!since.ok() ? "--since: " + since.status().message()
                                                        : "--until: " + until.status().message()),
                       err);
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  QueryParams query = {{"since", FormatRfc3339(*since)},
                       {"until", FormatRfc3339(o.until == "now" ? *until + 1 : *until)}};
  for (auto [name, value] :
       {std::pair{"user", &o.user}, std::pair{"tenant", &o.tenant}, std::pair{"state", &o.state}}) {
    if (!value->empty()) {
      query.emplace_back(name, *value);
    }
  }
  json jobs = json::array();
  std::string after;
  for (int page = 0; page < kMaxHistoryPages; ++page) {
    QueryParams q = query;
    const int64_t left = o.limit - static_cast<int64_t>(jobs.size());
    q.emplace_back("limit", std::to_string(std::min<int64_t>(left, 1000)));
    if (!after.empty()) {
      q.emplace_back("after", after);
    }
    StatusOr<json> body = (*client)->GetJson("/v1/history", q);
    if (!body.ok()) {
      return ReportError(body.status(), err);
    }
    for (const json& j : json_read::Array(*body, "jobs")) {
      jobs.push_back(j);
    }
    after = Str(*body, "next");
    if (after.empty() || static_cast<int64_t>(jobs.size()) >= o.limit) {
      break;
    }
  }
  if (o.output == "json") {
    out << Pretty(json{{"jobs", std::move(jobs)}}) << "\n";
    return 0;
  }
  const bool wide = o.output == "wide";
  std::vector<std::string> headers = {"ID",   "NAME", "USER",    "TENANT", "STATE",
                                      "EXIT", "END",  "ELAPSED", "GPUS",   "NODES"};
  if (wide) {
    headers = {"ID",     "NAME",  "USER", "TENANT",  "QUEUE", "STATE", "EXIT",
               "SUBMIT", "START", "END",  "ELAPSED", "GPUS",  "NODES", "ATTEMPTS (NODE:GPUS)"};
  }
  Table table(headers);
  table.SetRightAligned(0);
  for (const json& j : jobs) {
    std::vector<std::string> nodes;
    for (const json& n : json_read::Array(j, "nodes")) {
      nodes.push_back(n.is_string() ? n.get<std::string>() : "");
    }
    const std::optional<int64_t> exit = json_read::OptInt(j, "exit_code");
    const std::string elapsed = FormatAge(
        static_cast<Micros>(json_read::OptNumber(j, "elapsed_seconds").value_or(0) * 1e6));
    std::vector<std::string> row = {std::to_string(json_read::Int(j, "id")), Str(j, "name"),
                                    Str(j, "user"), Str(j, "tenant")};
    if (wide) {
      row.push_back(Str(j, "queue"));
    }
    row.insert(row.end(), {Str(j, "state"), exit ? std::to_string(*exit) : "-"});
    if (wide) {
      row.insert(row.end(), {Time(j, "submit_time"), Time(j, "start_time")});
    }
    row.insert(row.end(), {Time(j, "end_time"), elapsed, std::to_string(json_read::Int(j, "gpus")),
                           nodes.empty() ? "-" : Join(nodes, ",")});
    if (wide) {
      // Per attempt: node:gpu,gpu of each task, tasks joined by '+', attempts by ' '.
      std::vector<std::string> attempts;
      for (const json& a : json_read::Array(j, "attempts")) {
        std::vector<std::string> tasks;
        for (const json& t : json_read::Array(a, "tasks")) {
          std::vector<std::string> gpus;
          for (const json& g : json_read::Array(t, "gpus")) {
            gpus.push_back(g.is_number() ? g.dump() : "?");
          }
          tasks.push_back(Str(t, "node") + ":" + Join(gpus, ","));
        }
        attempts.push_back(Join(tasks, "+"));
      }
      row.push_back(attempts.empty() ? "-" : Join(attempts, " "));
    }
    table.AddRow(std::move(row));
  }
  out << table.Render();
  return 0;
}

void AddAccountCommands(CLI::App& app, int* exit_code) {
  auto resolve = [exit_code](const ConnectionFlags& flags) -> std::optional<ClientConfig> {
    StatusOr<ClientConfig> config = ResolveClientConfig(flags, ProcessEnvironment());
    if (!config.ok()) {
      *exit_code = ReportError(config.status(), std::cerr);
      return std::nullopt;
    }
    return *config;
  };
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<LoginOptions>();
    CLI::App* cmd = app.add_subcommand(
        "login", "Check a token with the controller and save both for later commands");
    cmd->add_option("--server", flags->server, kServerFlagHelp);
    cmd->add_option("--token-file", o->token_file,
                    "a file holding the token (default: a prompt on a terminal, else stdin)");
    cmd->add_option("--ca-cert", flags->ca_cert, "PEM file of CA certificates for https://");
    cmd->add_flag("--insecure", flags->insecure, "skip TLS certificate verification");
    cmd->callback([flags, o, exit_code, resolve] {
      ConnectionFlags f = *flags;
      f.token = "-";  // the saved token is not the one to check
      std::optional<ClientConfig> config = resolve(f);
      if (config.has_value()) {
        o->config_path = ClientConfigPath(ProcessEnvironment());
        *exit_code = RunLogin(
            *config, *o, [] { return ReadSecretFromStdin(std::cin, std::cerr); }, std::cout,
            std::cerr);
      }
    });
  }
  app.add_subcommand("logout", "Forget the saved token (the server stays)")->callback([exit_code] {
    *exit_code = RunLogout(ClientConfigPath(ProcessEnvironment()), std::cout, std::cerr);
  });
  {
    CLI::App* token = app.add_subcommand("token", "Tenant and user tokens (admin)");
    token->require_subcommand(1);
    for (const char* action : {"create", "list"}) {
      auto flags = std::make_shared<ConnectionFlags>();
      auto o = std::make_shared<TokenOptions>();
      o->action = action;
      CLI::App* cmd = token->add_subcommand(
          action, o->action == "create"
                      ? "A new token of a tenant, or of one user inside it (shown once)"
                      : "The tokens: name, role, tenant, user, created");
      if (o->action == "create") {
        cmd->add_option("--tenant", o->tenant, "its tenant")->required();
        cmd->add_option("--user", o->user,
                        "its user: the user of every job it submits (default: none, the "
                        "tenant as a whole)");
        cmd->add_option("--name", o->name, "what to call it (default: USER@TENANT or TENANT)");
      }
      cmd->add_option("-o,--output", o->output, "json");
      AddConnectionFlags(cmd, flags.get());
      cmd->callback([flags, o, exit_code, resolve] {
        if (std::optional<ClientConfig> config = resolve(*flags)) {
          *exit_code = RunToken(*config, *o, std::cout, std::cerr);
        }
      });
    }
  }
  {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<HistoryOptions>();
    CLI::App* cmd = app.add_subcommand(
        "history", "Finished jobs (archived ones too): who, how they ended, where they ran");
    cmd->add_option("--user", o->user, "only this user's jobs");
    cmd->add_option("--tenant", o->tenant, "only this tenant's jobs (admin)");
    cmd->add_option("--state", o->state, "succeeded, failed, cancelled (comma-separated)");
    cmd->add_option("--since", o->since, "submitted since: a date, RFC 3339, or ago: 24h, 7d")
        ->capture_default_str();
    cmd->add_option("--until", o->until, "submitted before: now, a date, RFC 3339, or ago")
        ->capture_default_str();
    cmd->add_option("--limit", o->limit, "at most this many jobs")->capture_default_str();
    cmd->add_option("-o,--output", o->output, "wide (times, queue, GPUs of each attempt) or json");
    AddConnectionFlags(cmd, flags.get());
    cmd->callback([flags, o, exit_code, resolve] {
      if (std::optional<ClientConfig> config = resolve(*flags)) {
        *exit_code = RunHistory(*config, *o, SystemClock(), std::cout, std::cerr);
      }
    });
  }
}

}  // namespace tessera
