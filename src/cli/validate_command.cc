#include "cli/validate_command.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "cli/table.h"

namespace tessera {
namespace {

using json = nlohmann::json;

std::string Pretty(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

std::string Text(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::string Number(const json& v) {
  if (!v.is_number()) {
    return "-";
  }
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.4g", v.get<double>());
  return buf.data();
}

int Add(ApiClient& client, const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  json body = {
      {"name", o.name},       {"command", o.command},     {"every", o.every},
      {"nodes", o.nodes},     {"threshold", o.threshold}, {"metric_direction", o.direction},
      {"timeout", o.timeout}, {"max_wait", o.max_wait},   {"parallel", o.parallel}};
  if (!o.queue.empty()) {
    body["queue"] = o.queue;
  }
  StatusOr<ApiResponse> r = client.Post("/v1/admin/validations", body.dump(), "application/json");
  if (!r.ok()) {
    return ReportError(r.status(), err);
  }
  StatusOr<json> check = ParseJsonBody(r->body, "POST /v1/admin/validations");
  if (!check.ok()) {
    return ReportError(check.status(), err);
  }
  if (o.output == "json") {
    out << Pretty(*check) << "\n";
    return 0;
  }
  out << "validation " << o.name << " added: every " << Text(*check, "every") << " on "
      << (o.nodes == "all" ? std::string("all nodes") : "nodes " + o.nodes)
      << "; each run waits for its node's jobs to end and takes the whole node\n";
  return 0;
}

int List(ApiClient& client, const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  StatusOr<json> list = client.GetJson("/v1/admin/validations");
  if (!list.ok()) {
    return ReportError(list.status(), err);
  }
  if (o.output == "json") {
    out << Pretty(*list) << "\n";
    return 0;
  }
  Table t({"NAME", "EVERY", "NODES", "THRESHOLD", "BETTER", "TIMEOUT", "NOW", "COMMAND"});
  t.SetMaxWidth(7, 60);
  for (const json& c : (*list)["checks"]) {
    std::map<std::string, int> states;
    for (const json& n : c.value("node_states", json::array())) {
      ++states[Text(n, "state")];
    }
    std::string now;
    for (const auto& [state, count] : states) {
      now += (now.empty() ? "" : ", ") + std::to_string(count) + " " + state;
    }
    t.AddRow({Text(c, "name"), Text(c, "every"), Text(c, "nodes"), Text(c, "threshold"),
              Text(c, "metric_direction"), Text(c, "timeout"), now.empty() ? "no nodes" : now,
              Text(c, "command")});
  }
  out << t.Render();
  return 0;
}

int Run(ApiClient& client, const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  json body = json::object();
  if (!o.node.empty()) {
    body["node"] = o.node;
  }
  const std::string path = "/v1/admin/validations/" + PercentEncode(o.name) + "/run";
  StatusOr<ApiResponse> r = client.Post(path, body.dump(), "application/json");
  if (!r.ok()) {
    return ReportError(r.status(), err);
  }
  StatusOr<json> answer = ParseJsonBody(r->body, "POST " + path);
  if (!answer.ok()) {
    return ReportError(answer.status(), err);
  }
  if (o.output == "json") {
    out << Pretty(*answer) << "\n";
    return 0;
  }
  std::string nodes;
  for (const json& n : (*answer)["nodes"]) {
    nodes += (nodes.empty() ? "" : ", ") + n.get<std::string>();
  }
  out << "validation " << o.name << " due now on "
      << (nodes.empty() ? std::string("no node") : nodes)
      << ": each node runs it once its jobs end (see `tessera validate results`)\n";
  return 0;
}

int Results(ApiClient& client, const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  QueryParams q = {{"limit", std::to_string(o.limit)}};
  if (!o.name.empty()) {
    q.emplace_back("check", o.name);
  }
  if (!o.node.empty()) {
    q.emplace_back("node", o.node);
  }
  StatusOr<json> runs = client.GetJson("/v1/admin/validations/results", q);
  if (!runs.ok()) {
    return ReportError(runs.status(), err);
  }
  if (o.output == "json") {
    out << Pretty(*runs) << "\n";
    return 0;
  }
  Table t(
      {"TIME", "CHECK", "NODE", "JOB", "OUTCOME", "GPU", "METRIC", "VALUE", "BASELINE", "CHANGE"});
  for (size_t c : {5, 7, 8, 9}) {
    t.SetRightAligned(c);
  }
  std::vector<std::string> reasons;
  for (const json& run : (*runs)["runs"]) {
    const std::string job = run.value("job", uint64_t{0}) != 0
                                ? std::to_string(run["job"].get<uint64_t>())
                                : std::string("-");
    std::vector<std::string> head = {Text(run, "time"), Text(run, "check"), Text(run, "node"), job,
                                     Text(run, "outcome")};
    const json results = run.value("results", json::array());
    if (results.empty()) {
      t.AddRow(head);
    }
    for (const json& r : results) {
      std::vector<std::string> row = head;
      std::array<char, 32> change{'-'};
      if (r.value("baseline", json()).is_number()) {
        std::snprintf(change.data(), change.size(), "%+.1f%%", r.value("change_percent", 0.0));
      }
      row.insert(row.end(),
                 {std::to_string(r.value("gpu", -1)) + (r.value("regressed", false) ? "!" : ""),
                  Text(r, "metric"), Number(r["value"]), Number(r.value("baseline", json())),
                  change.data()});
      t.AddRow(row);
    }
    if (!Text(run, "reason").empty()) {
      reasons.push_back(Text(run, "time") + " " + Text(run, "node") + ": " + Text(run, "reason"));
    }
  }
  out << t.Render();
  for (const std::string& r : reasons) {
    out << r << "\n";
  }
  return 0;
}

}  // namespace

int RunValidate(const ClientConfig& config, const ValidateOptions& o, std::ostream& out,
                std::ostream& err) {
  if (!o.output.empty() && o.output != "json") {
    return ReportError(InvalidArgumentError("-o: only json, got '" + o.output + "'"), err);
  }
  if (o.action == "add" && o.command.empty()) {
    return ReportError(InvalidArgumentError("--command: the check to run is required"), err);
  }
  if (o.limit < 1 || o.limit > 10'000) {
    return ReportError(InvalidArgumentError("--limit: 1 to 10000"), err);
  }
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  if (!client.ok()) {
    return ReportError(client.status(), err);
  }
  ApiClient& c = **client;
  if (o.action == "add") {
    return Add(c, o, out, err);
  }
  if (o.action == "list") {
    return List(c, o, out, err);
  }
  if (o.action == "run") {
    return Run(c, o, out, err);
  }
  if (o.action == "results") {
    return Results(c, o, out, err);
  }
  if (o.action == "remove") {
    const std::string path = "/v1/admin/validations/" + PercentEncode(o.name);
    StatusOr<ApiResponse> r = c.Delete(path);
    if (!r.ok()) {
      return ReportError(r.status(), err);
    }
    out << "validation " << o.name << " removed, with its results\n";
    return 0;
  }
  return ReportError(InvalidArgumentError("unknown action '" + o.action + "'"), err);
}

void AddValidateCommand(CLI::App& app, int* exit_code) {
  CLI::App* validate = app.add_subcommand(
      "validate", "Validation runs: per-node checks that drain GPUs whose results regress (admin)");
  validate->require_subcommand(1);
  struct Action {
    const char* name;
    const char* help;
  };
  const std::array<Action, 5> actions = {{
      {"add", "Add a check, run on each node it selects every --every"},
      {"list", "The checks and where each node stands"},
      {"run", "Run a check now (on every node it selects, or --node)"},
      {"results", "Results per node, GPU and metric, newest first"},
      {"remove", "Remove a check and its results (a run under way is cancelled)"},
  }};
  for (const Action& a : actions) {
    auto flags = std::make_shared<ConnectionFlags>();
    auto o = std::make_shared<ValidateOptions>();
    o->action = a.name;
    const std::string name = a.name;
    CLI::App* cmd = validate->add_subcommand(name, a.help);
    if (name == "results") {
      cmd->add_option("name", o->name, "only this check");
    } else if (name != "list") {
      cmd->add_option("name", o->name, "the check's name")->required();
    }
    if (name == "add") {
      cmd->add_option("--command", o->command,
                      "run with /bin/sh -c; prints {\"gpu\":0,\"metric\":\"...\",\"value\":N} "
                      "lines; a non-zero exit fails the check")
          ->required();
      cmd->add_option("--every", o->every, "how often per node")->capture_default_str();
      cmd->add_option("--nodes", o->nodes, "all, n1,n2 or label=value")->capture_default_str();
      cmd->add_option("--threshold", o->threshold, "worse than the baseline by more: drained")
          ->capture_default_str();
      cmd->add_option("--metric-direction", o->direction, "higher or lower is better")
          ->capture_default_str();
      cmd->add_option("--timeout", o->timeout, "a longer run fails (drains the node)")
          ->capture_default_str();
      cmd->add_option("--max-wait", o->max_wait,
                      "how long a due node waits for its jobs before the run is skipped")
          ->capture_default_str();
      cmd->add_option("--parallel", o->parallel,
                      "nodes held for this check at once (0: a tenth of them)")
          ->capture_default_str();
      cmd->add_option("--queue", o->queue, "the queue charged (default: the first queue)");
    }
    if (name == "run" || name == "results") {
      cmd->add_option("--node", o->node, "only this node");
    }
    if (name == "results") {
      cmd->add_option("--limit", o->limit, "runs shown")->capture_default_str();
    }
    cmd->add_option("-o,--output", o->output, "json");
    cmd->add_option("--server", flags->server, kServerFlagHelp);
    cmd->add_option("--token", flags->token,
                    "admin API token (env TESSERA_TOKEN, or a file named by TESSERA_TOKEN_FILE)");
    cmd->add_option("--ca-cert", flags->ca_cert,
                    "PEM file of CA certificates for https:// (env TESSERA_CA_CERT)");
    cmd->add_flag("--insecure", flags->insecure, "skip TLS certificate verification");
    cmd->callback([flags, o, exit_code] {
      StatusOr<ClientConfig> config = ResolveClientConfig(*flags, ProcessEnvironment());
      if (!config.ok()) {
        *exit_code = ReportError(config.status(), std::cerr);
        return;
      }
      *exit_code = RunValidate(*config, *o, std::cout, std::cerr);
    });
  }
}

}  // namespace tessera
