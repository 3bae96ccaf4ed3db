#include "cli/daemon_commands.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/nvml_backend.h"
#include "api/units.h"
#include "base/file_util.h"
#include "base/strings.h"
#include "model/gpu_catalog.h"
#include "server/server.h"

namespace tessera {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop = true; }

void WaitForStopSignal() {
  g_stop = false;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

int Fail(const Status& s, const char* what) {
  std::cerr << "tessera " << what << ": " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

// "127.0.0.1:7450", ":7450", "7450".
Status ParseListen(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  std::string p = colon == std::string::npos ? text : text.substr(colon + 1);
  if (colon != std::string::npos && colon > 0) {
    *host = text.substr(0, colon);
  }
  try {
    size_t used = 0;
    const int v = std::stoi(p, &used);
    if (used != p.size() || v < 0 || v > 65535) {
      throw std::out_of_range("port");
    }
    *port = v;
  } catch (const std::exception&) {
    return InvalidArgumentError("--listen: expected HOST:PORT, got '" + text + "'");
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::optional<std::string> text = ReadTextFile(path);
  if (!text) {
    return InvalidArgumentError(std::string(what) + ": cannot read " + path);
  }
  return *text;
}

struct ServerFlags {
  std::string data_dir = "tessera-data";
  std::string listen = "127.0.0.1:7450";
  std::string tls_cert, tls_key;
  std::string queues_file;
  std::string policy = "tessera";
  std::string node_timeout = "10s";
  std::string stop_grace = "30s";
  std::string checkpoint_root;
  bool no_fsync = false;
  double rate = 200;
  int gpu_temp_limit = 90;
};

void AddServerFlags(CLI::App* cmd, ServerFlags* f) {
  cmd->add_option("--data", f->data_dir, "Data directory: state.db, tokens, logs, checkpoints")
      ->capture_default_str();
  cmd->add_option("--listen", f->listen, "Address of the HTTP API (HOST:PORT; port 0: any free)")
      ->capture_default_str();
  cmd->add_option("--tls-cert", f->tls_cert, "TLS certificate (PEM); with --tls-key serves HTTPS");
  cmd->add_option("--tls-key", f->tls_key, "TLS private key (PEM)");
  cmd->add_option("--queues", f->queues_file,
                  "Queue configuration (YAML) used when the store holds none; default: embedded");
  cmd->add_option("--policy", f->policy, "Scheduling policy (see `tessera sim jobs --help`)")
      ->capture_default_str();
  cmd->add_option("--node-timeout", f->node_timeout, "A node silent this long is down")
      ->capture_default_str();
  cmd->add_option("--stop-grace", f->stop_grace, "Grace period of cancelled jobs' tasks")
      ->capture_default_str();
  cmd->add_option("--checkpoint-root", f->checkpoint_root,
                  "Where jobs' checkpoint directories are made (shared by all nodes); default DATA/checkpoints");
  cmd->add_flag("--no-fsync", f->no_fsync,
                "Commit without fsync (durable against a crash of the process, not of the machine)");
  cmd->add_option("--rate", f->rate, "Requests per second per token")->capture_default_str();
  cmd->add_option("--gpu-temp-limit", f->gpu_temp_limit,
                  "A GPU this hot (C) is drained until it cools 5 C below")
      ->capture_default_str();
}

StatusOr<ServerOptions> ToServerOptions(const ServerFlags& f) {
  ServerOptions o;
  o.data_dir = f.data_dir;
  TESSERA_RETURN_IF_ERROR(ParseListen(f.listen, &o.host, &o.port));
  o.tls_cert = f.tls_cert;
  o.tls_key = f.tls_key;
  if (!f.queues_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.queues_yaml, ReadFile(f.queues_file, "--queues"));
  }
  o.fsync = !f.no_fsync;
  o.rate_per_second = f.rate;
  o.rate_burst = 2 * f.rate;
  o.controller.policy = f.policy;
  o.controller.checkpoint_root = f.checkpoint_root;
  TESSERA_ASSIGN_OR_RETURN(o.controller.node_timeout, ParseDurationMicros(f.node_timeout));
  TESSERA_ASSIGN_OR_RETURN(o.controller.stop_grace, ParseDurationMicros(f.stop_grace));
  if (o.controller.node_timeout <= 0) {
    return InvalidArgumentError("--node-timeout must be positive");
  }
  if (f.gpu_temp_limit < 30 || f.gpu_temp_limit > 150) {
    return InvalidArgumentError("--gpu-temp-limit must be between 30 and 150 C, got " +
                                std::to_string(f.gpu_temp_limit));
  }
  o.controller.health.temperature_limit_c = f.gpu_temp_limit;
  o.controller.health.temperature_resume_c = f.gpu_temp_limit - 5;
  return o;
}

struct AgentFlags {
  std::string server = "http://127.0.0.1:7450";
  std::string token, token_file;
  std::string node;
  std::string data_dir = "tessera-agent";
  std::string fake_gpus;
  std::string cpu, memory;
  std::string heartbeat;
  std::string telemetry;
  std::string ca_cert;
  bool insecure = false;
  bool no_cgroups = false;
};

void AddAgentFlags(CLI::App* cmd, AgentFlags* f, bool standalone) {
  if (standalone) {
    cmd->add_option("--server", f->server, "The controller's URL")->capture_default_str();
    cmd->add_option("--token", f->token, "The controller's join token");
    cmd->add_option("--token-file", f->token_file, "File holding the join token");
    cmd->add_option("--node", f->node, "Node name (default: the host name)");
    cmd->add_option("--data", f->data_dir, "Agent data directory (task logs)")->capture_default_str();
    cmd->add_option("--ca-cert", f->ca_cert, "CA certificate for an https:// controller");
    cmd->add_flag("--insecure", f->insecure, "Do not verify the controller's certificate");
    cmd->add_option("--heartbeat", f->heartbeat, "Heartbeat interval (default: the controller's)");
  }
  cmd->add_option("--fake-gpus", f->fake_gpus,
                  "Fake GPU inventory, e.g. 8xH100-80GB or 2x4xA100-80GB,mig (default: NVML)");
  cmd->add_option("--telemetry-interval", f->telemetry,
                  "Least time between GPU telemetry samples sent in heartbeats, e.g. 5s; 0: "
                  "none (default: 1s)");
  cmd->add_option("--cpu", f->cpu, "CPUs offered (default: the machine's)");
  cmd->add_option("--memory", f->memory, "Memory offered, e.g. 64GiB (default: the machine's)");
  cmd->add_flag("--no-cgroups", f->no_cgroups, "Do not apply cgroup v2 CPU and memory limits");
}

StatusOr<AgentOptions> ToAgentOptions(const AgentFlags& f) {
  AgentOptions o;
  o.server_url = f.server;
  o.token = f.token;
  if (o.token.empty() && !f.token_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string t, ReadFile(f.token_file, "--token-file"));
    o.token = std::string(Trim(t));
  }
  if (o.token.empty()) {
    if (const char* env = std::getenv("TESSERA_JOIN_TOKEN")) {
      o.token = env;
    }
  }
  o.node_name = f.node;
  o.data_dir = f.data_dir;
  o.fake_gpus = f.fake_gpus;
  o.ca_cert = f.ca_cert;
  o.insecure = f.insecure;
  o.use_cgroups = !f.no_cgroups;
  if (!f.cpu.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.cpu_milli, ParseCpuMilli(f.cpu));
  }
  if (!f.memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.memory_mib, ParseMemoryMiB(f.memory));
  }
  if (!f.heartbeat.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.heartbeat_interval, ParseDurationMicros(f.heartbeat));
  }
  if (!f.telemetry.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.telemetry_interval, ParseDurationMicros(f.telemetry));
  }
  return o;
}

int RunServer(const ServerFlags& flags) {
  StatusOr<ServerOptions> options = ToServerOptions(flags);
  if (!options.ok()) {
    return Fail(options.status(), "server");
  }
  StatusOr<std::unique_ptr<Server>> server = Server::Create(options.value(), GpuCatalog::Default());
  if (!server.ok()) {
    return Fail(server.status(), "server");
  }
  Status s = (*server)->Start();
  if (!s.ok()) {
    return Fail(s, "server");
  }
  std::cout << "tessera server: listening on " << (*server)->url() << "\n"
            << "  admin token: " << flags.data_dir << "/admin.token\n"
            << "  join token:  " << flags.data_dir << "/join.token\n"
            << "  metrics:     " << (*server)->url() << "/metrics and /metrics/gpus (token: "
            << flags.data_dir << "/metrics.token)\n"
            << "  dashboard:   " << (*server)->url() << "/\n"
            << std::flush;
  WaitForStopSignal();
  std::cout << "tessera server: stopping\n";
  (*server)->Stop();
  return 0;
}

int RunAgent(const AgentFlags& flags) {
  StatusOr<AgentOptions> options = ToAgentOptions(flags);
  if (!options.ok()) {
    return Fail(options.status(), "agent");
  }
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(options.value(), GpuCatalog::Default());
  if (!agent.ok()) {
    return Fail(agent.status(), "agent");
  }
  std::cout << "tessera agent: node " << (*agent)->inventory().spec.name << ", "
            << (*agent)->inventory().spec.gpus.size() << " GPUs (" << (*agent)->describe_gpus()
            << "), controller " << flags.server << "\n"
            << std::flush;
  (*agent)->Start();
  WaitForStopSignal();
  std::cout << "tessera agent: stopping (its tasks are killed)\n";
  (*agent)->Stop();
  return 0;
}

int RunUp(const ServerFlags& sflags, AgentFlags aflags) {
  StatusOr<ServerOptions> options = ToServerOptions(sflags);
  if (!options.ok()) {
    return Fail(options.status(), "up");
  }
  // Agents heartbeat fast on one machine: a task starts within a fraction of a second.
  options->controller.heartbeat_interval = 200'000;
  StatusOr<std::unique_ptr<Server>> server = Server::Create(options.value(), GpuCatalog::Default());
  if (!server.ok()) {
    return Fail(server.status(), "up");
  }
  Server& srv = **server;
  Status s = srv.Start();
  if (!s.ok()) {
    return Fail(s, "up");
  }
  // One token per tenant of the queue configuration, made once.
  const std::string token_dir = sflags.data_dir + "/tokens";
  std::filesystem::create_directories(token_dir);
  for (const std::string& tenant : srv.controller().Tenants()) {
    const std::string path = token_dir + "/" + tenant + ".token";
    if (std::filesystem::exists(path)) {
      continue;
    }
    StatusOr<std::string> token = srv.CreateTenantToken(tenant, tenant);
    if (!token.ok()) {
      return Fail(token.status(), "up");
    }
    std::ofstream(path) << token.value() << "\n";
    ::chmod(path.c_str(), 0600);
  }

  aflags.server = srv.url();
  aflags.token = srv.join_token();
  aflags.data_dir = sflags.data_dir + "/agent";
  if (aflags.fake_gpus.empty() && !LoadNvmlBackend(GpuCatalog::Default()).ok()) {
    aflags.fake_gpus = kDefaultFakeGpus;
  }
  if (!aflags.fake_gpus.empty()) {
    // Fake GPUs come with a fake server's CPUs and memory, so that the examples fit;
    // the tasks still run on this machine's real CPUs.
    if (aflags.cpu.empty()) {
      aflags.cpu = "64";
    }
    if (aflags.memory.empty()) {
      aflags.memory = "512GiB";
    }
  }
  StatusOr<AgentOptions> agent_options = ToAgentOptions(aflags);
  if (!agent_options.ok()) {
    return Fail(agent_options.status(), "up");
  }
  agent_options->insecure = true;  // our own certificate, on loopback
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(agent_options.value(), GpuCatalog::Default());
  if (!agent.ok()) {
    return Fail(agent.status(), "up");
  }
  (*agent)->Start();
  std::cout << "Tessera is up: a one-machine cluster.\n"
            << "  API:           " << srv.url() << "\n"
            << "  dashboard:     " << srv.url() << "/ (sign in with a token below)\n"
            << "  metrics:       " << srv.url() << "/metrics and /metrics/gpus (token: "
            << sflags.data_dir << "/metrics.token)\n"
            << "  admin token:   " << sflags.data_dir << "/admin.token\n"
            << "  tenant tokens: " << token_dir << "/<tenant>.token\n"
            << "  node:          " << (*agent)->inventory().spec.name << ", "
            << (*agent)->inventory().spec.gpus.size() << " GPUs (" << (*agent)->describe_gpus()
            << ")\n"
            << "  try:           export TESSERA_SERVER=" << srv.url()
            << " TESSERA_TOKEN=$(cat " << token_dir << "/team-a.token); tessera submit -f "
            << "examples/train-gang.yaml; tessera top\n"
            << "Stop with Ctrl-C.\n"
            << std::flush;
  WaitForStopSignal();
  std::cout << "tessera up: stopping\n" << std::flush;
  (*agent)->Stop();
  srv.Stop();
  std::cout << "tessera up: stopped\n";
  return 0;
}

}  // namespace

void AddDaemonCommands(CLI::App& app, int* exit_code) {
  auto server_flags = std::make_shared<ServerFlags>();
  CLI::App* server = app.add_subcommand("server", "Run the controller");
  AddServerFlags(server, server_flags.get());
  server->callback([server_flags, exit_code] { *exit_code = RunServer(*server_flags); });

  auto agent_flags = std::make_shared<AgentFlags>();
  CLI::App* agent = app.add_subcommand("agent", "Run a node agent");
  AddAgentFlags(agent, agent_flags.get(), true);
  agent->callback([agent_flags, exit_code] { *exit_code = RunAgent(*agent_flags); });

  auto up_server = std::make_shared<ServerFlags>();
  auto up_agent = std::make_shared<AgentFlags>();
  CLI::App* up = app.add_subcommand(
      "up", "Run a one-machine cluster: the controller and one agent (fake GPUs without NVML)");
  AddServerFlags(up, up_server.get());
  AddAgentFlags(up, up_agent.get(), false);
  up->callback([up_server, up_agent, exit_code] { *exit_code = RunUp(*up_server, *up_agent); });
}

}  // namespace tessera
