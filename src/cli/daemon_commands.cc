#include "cli/daemon_commands.h"

#include <absl/synchronization/mutex.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu/nvml_backend.h"
#include "agent/task_sandbox.h"
#include "api/node_labels.h"
#include "api/units.h"
#include "base/file_util.h"
#include "base/strings.h"
#include "cli/agent_flags.h"
#include "cli/gpu_probe_command.h"
#include "cli/ha_server_command.h"
#include "cli/man_pages.h"
#include "cli/store_command.h"
#include "model/gpu_catalog.h"
#include "plugins/registry.h"
#include "server/http/server.h"
#include "store/store_url.h"

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

// --data as an absolute path: tasks, checkpoints and the printed token paths must not
// depend on the directory the daemon happened to be started in.
Status MakeAbsolute(std::string* dir, const char* what) {
  if (dir->empty()) {
    return InvalidArgumentError(std::string(what) + ": a data directory is required");
  }
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(*dir, ec);
  if (ec) {
    return InvalidArgumentError(std::string(what) + ": cannot resolve " + *dir + ": " +
                                ec.message());
  }
  *dir = abs.lexically_normal().string();
  if (dir->size() > 1 && dir->back() == '/') {
    dir->pop_back();
  }
  return Status::Ok();
}

// The controller's data directory, made before the server opens its store. Tasks run
// as other users: they may pass through it to their own checkpoint directories (DATA/
// checkpoints/...) but not list it; the tokens in it are 0600. An existing directory
// is only tightened when it is evidently ours (empty or holding a store or tokens), so
// a --data of a shared directory never changes that directory's mode.
Status PrepareServerDataDir(const std::string& dir, bool init) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    return UnavailableError("cannot create data directory " + dir + ": " + ec.message());
  }
  std::vector<std::string> tokens;
  for (const char* file : {"admin.token", "join.token", "metrics.token"}) {
    if (fs::exists(dir + "/" + file, ec)) {
      tokens.push_back(file);
    }
  }
  std::vector<std::string> tenant_tokens;
  for (const fs::directory_entry& e : fs::directory_iterator(dir + "/tokens", ec)) {
    if (e.path().extension() == ".token") {
      tenant_tokens.push_back(e.path().string());
    }
  }
  if (!tenant_tokens.empty()) {
    tokens.push_back("tokens/");
  }
  const bool have_store = fs::exists(dir + "/state.db", ec);
  // Tokens without their store: the store was deleted or moved, a mount did not come
  // up, or --data names the wrong copy. Starting would silently make a new cluster with
  // every job gone and the tokens that agents and users hold rewritten.
  if (!have_store && !tokens.empty()) {
    if (!init) {
      return FailedPreconditionError(
          dir + " holds tokens (" + Join(tokens, ", ") +
          ") but no state.db: the store is missing. Put it back, or start afresh with "
          "--init: every job is forgotten and new admin, join and metrics tokens (and "
          "tenant tokens under tessera up) are made; agents then need the new join token");
    }
    // The new store does not know the old tenant tokens: `tessera up` would keep the
    // files and hand out tokens that no longer work.
    for (const std::string& path : tenant_tokens) {
      fs::remove(path, ec);
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return UnavailableError("cannot read data directory " + dir);
  }
  const bool ours = !existed || fs::is_empty(dir, ec) || have_store || !tokens.empty();
  if (ours && (st.st_mode & 07777) != 0711 && (st.st_mode & S_ISVTX) == 0 &&
      st.st_uid == ::geteuid() && ::chmod(dir.c_str(), 0711) != 0) {
    return UnavailableError("cannot set the mode of data directory " + dir + " to 0711");
  }
  return Status::Ok();
}

// A secret file readable by its owner only from its first byte on (no window in which
// the umask's mode lets others open it).
Status WriteSecretFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return UnavailableError("cannot write " + path);
  }
  ::fchmod(fd, 0600);
  const std::string line = text + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return written ? Status::Ok() : UnavailableError("cannot write " + path);
}

struct ServerFlags {
  std::string data_dir = "tessera-data";
  std::string listen = "127.0.0.1:7450";
  std::string tls_cert, tls_key;
  std::string queues_file;
  std::string policy = "tessera";
  std::string placement = ControllerOptions{}.placement;
  std::string node_timeout = "30s";
  std::string eta_interval = "5s";  // pending jobs' ETA refresh; 0: off
  int64_t finished_in_memory = 10'000;
  std::string stop_grace = "30s";
  std::string checkpoint_root;
  bool no_fsync = false;
  bool init = false;
  double rate = ServerOptions{}.rate_per_second;
  std::string refusal_pause = std::to_string(ServerOptions{}.refusal_pause_ms) + "ms";
  int gpu_temp_limit = 90;
  std::string uid_pool = "200000-299999";
  std::vector<std::string> run_as;  // TENANT=UID[:GID]
  int agent_port = 0;
  int64_t max_heartbeat_rate = ControllerOptions{}.max_heartbeats_per_second;
  HaServerFlags ha;  // --store etcd://...: one of several controllers
};

void AddServerFlags(CLI::App* cmd, ServerFlags* f) {
  cmd->add_option("--data", f->data_dir, "Data directory: state.db, tokens, logs, checkpoints")
      ->capture_default_str();
  cmd->add_option("--listen", f->listen, "Address of the HTTP API (HOST:PORT; port 0: any free)")
      ->capture_default_str();
  cmd->add_option("--agent-port", f->agent_port,
                  "Port of the agent channel (gRPC, on the --listen host; agents learn it when "
                  "they register). 0: any free port; -1: none, agents heartbeat over HTTP")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--tls-cert", f->tls_cert, "TLS certificate (PEM); with --tls-key serves HTTPS");
  cmd->add_option("--tls-key", f->tls_key, "TLS private key (PEM)");
  cmd->add_option("--queues", f->queues_file,
                  "Queue configuration (YAML) used when the store holds none; default: embedded");
  cmd->add_option("--policy", f->policy, "Scheduling policy (see `tessera sim jobs --help`)")
      ->capture_default_str();
  cmd->add_option("--placement", f->placement,
                  "Task placement: " + Join(PolicyNames(), ", ") +
                      " (tessera and fgd learn the workload's typical tasks from submissions)")
      ->check(CLI::IsMember(PolicyNames()))
      ->capture_default_str();
  cmd->add_option("--eta-interval", f->eta_interval,
                  "How often (at most, after a cycle) pending jobs' ETAs are forecast again; "
                  "0: never")
      ->capture_default_str();
  cmd->add_option("--node-timeout", f->node_timeout,
                  "A node silent this long is lost and its jobs run again; its agent fences "
                  "its tasks a little before (tasks also end when the controller is down "
                  "this long)")
      ->capture_default_str();
  cmd->add_option("--max-heartbeat-rate", f->max_heartbeat_rate,
                  "Heartbeats a second the whole fleet sends at most: the interval told to "
                  "agents grows with the number of nodes, up to a quarter of --node-timeout "
                  "(launches and exits never wait for a heartbeat). 0: never stretched")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}))
      ->capture_default_str();
  cmd->add_option("--finished-in-memory", f->finished_in_memory,
                  "Finished jobs kept in memory (newest); older ones are read from the store "
                  "and no longer listed")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}))
      ->capture_default_str();
  cmd->add_option("--uid-pool", f->uid_pool,
                  "Unix uids given to tenants for their tasks, one each (FIRST-LAST)")
      ->capture_default_str();
  cmd->add_option("--run-as", f->run_as,
                  "A tenant's tasks run as this identity instead of one from the pool "
                  "(TENANT=UID[:GID]; repeatable)");
  cmd->add_option("--stop-grace", f->stop_grace, "Grace period of cancelled jobs' tasks")
      ->capture_default_str();
  cmd->add_option("--checkpoint-root", f->checkpoint_root,
                  "Where jobs' checkpoint directories are made (shared by all nodes); default DATA/checkpoints");
  cmd->add_flag("--init", f->init,
                "Start afresh in a data directory whose state.db is missing but whose tokens are "
                "not: every job is forgotten and new tokens are made");
  cmd->add_flag("--no-fsync", f->no_fsync,
                "Commit without fsync (durable against a crash of the process, not of the machine)");
  cmd->add_option("--rate", f->rate, "Requests per second per token (burst: 4 s of it)")
      ->capture_default_str();
  cmd->add_option("--refusal-pause", f->refusal_pause,
                  "A 429 (rate, pending bound) is answered this late, so a client that retries "
                  "at once cannot take the CPU others need; 0: at once")
      ->capture_default_str();
  cmd->add_option("--gpu-temp-limit", f->gpu_temp_limit,
                  "A GPU this hot (C) is drained until it cools 5 C below")
      ->capture_default_str();
}

// --uid-pool FIRST-LAST and --run-as TENANT=UID[:GID]. Tasks never run as root, so uid
// 0 (and gid 0) is refused; so are system uids below 1000, which belong to the machine.
Status ParseIdentities(const ServerFlags& f, ControllerOptions* o) {
  auto number = [](std::string_view text, const std::string& what) -> StatusOr<int64_t> {
    StatusOr<int64_t> v = ParseInt64(text);
    if (!v.ok() || *v < 1000 || *v > 4'294'967'294) {
      return InvalidArgumentError(what + ": expected a uid or gid from 1000 to 4294967294, got '" +
                                  std::string(text) + "'");
    }
    return *v;
  };
  const size_t dash = f.uid_pool.find('-');
  if (dash == std::string::npos) {
    return InvalidArgumentError("--uid-pool: expected FIRST-LAST, e.g. 200000-299999, got '" +
                                f.uid_pool + "'");
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t first,
                           number(std::string_view(f.uid_pool).substr(0, dash), "--uid-pool"));
  TESSERA_ASSIGN_OR_RETURN(int64_t last,
                           number(std::string_view(f.uid_pool).substr(dash + 1), "--uid-pool"));
  if (last < first) {
    return InvalidArgumentError("--uid-pool: LAST is below FIRST in '" + f.uid_pool + "'");
  }
  o->identities.pool_start = first;
  o->identities.pool_size = last - first + 1;
  for (const std::string& item : f.run_as) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--run-as: expected TENANT=UID[:GID], got '" + item + "'");
    }
    std::string_view id = std::string_view(item).substr(eq + 1);
    const size_t colon = id.find(':');
    TESSERA_ASSIGN_OR_RETURN(int64_t uid, number(id.substr(0, colon), "--run-as " + item));
    int64_t gid = uid;
    if (colon != std::string_view::npos) {
      TESSERA_ASSIGN_OR_RETURN(gid, number(id.substr(colon + 1), "--run-as " + item));
    }
    o->identities.run_as[item.substr(0, eq)] = {uid, gid};
  }
  return Status::Ok();
}

StatusOr<ServerOptions> ToServerOptions(const ServerFlags& f) {
  ServerOptions o;
  o.data_dir = f.data_dir;
  TESSERA_RETURN_IF_ERROR(ParseListen(f.listen, &o.host, &o.port));
  o.agent_port = f.agent_port;
  o.tls_cert = f.tls_cert;
  o.tls_key = f.tls_key;
  if (!f.queues_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.queues_yaml, ReadFile(f.queues_file, "--queues"));
  }
  o.fsync = !f.no_fsync;
  if (f.ha.store.empty()) {
    // The state store, opened as every driver opens one (store/store_url.h): SQLite in
    // --data. (With --store, each term of the lead opens its own: RunHaServer.)
    OpenStoreOptions store;
    store.sqlite.fsync = o.fsync;
    o.open_store = [url = "sqlite:" + o.data_dir + "/state.db", store] {
      return OpenStore(url, store);
    };
  }
  o.rate_per_second = f.rate;
  // The default's ratio of burst to rate (4 s of it: a burst of thousands of jobs).
  o.rate_burst = f.rate * (ServerOptions{}.rate_burst / ServerOptions{}.rate_per_second);
  TESSERA_ASSIGN_OR_RETURN(const Micros pause, ParseDurationMicros(f.refusal_pause));
  if (pause < 0 || pause > 10'000'000) {
    return InvalidArgumentError("--refusal-pause: must be between 0 and 10s, got " +
                                f.refusal_pause);
  }
  o.refusal_pause_ms = static_cast<int>(pause / 1000);
  o.controller.policy = f.policy;
  o.controller.placement = f.placement;
  o.controller.checkpoint_root = f.checkpoint_root;
  TESSERA_ASSIGN_OR_RETURN(o.controller.node_timeout, ParseDurationMicros(f.node_timeout));
  TESSERA_ASSIGN_OR_RETURN(o.controller.eta.interval, ParseDurationMicros(f.eta_interval));
  o.controller.finished_in_memory = static_cast<size_t>(f.finished_in_memory);
  o.controller.max_heartbeats_per_second = f.max_heartbeat_rate;
  TESSERA_ASSIGN_OR_RETURN(o.controller.stop_grace, ParseDurationMicros(f.stop_grace));
  TESSERA_RETURN_IF_ERROR(ParseIdentities(f, &o.controller));
  if (o.controller.node_timeout < 2'000'000) {
    return InvalidArgumentError("--node-timeout must be at least 2s (agents fence their tasks "
                                "1s before it), got " + f.node_timeout);
  }
  if (f.gpu_temp_limit < 30 || f.gpu_temp_limit > 150) {
    return InvalidArgumentError("--gpu-temp-limit must be between 30 and 150 C, got " +
                                std::to_string(f.gpu_temp_limit));
  }
  o.controller.health.temperature_limit_c = f.gpu_temp_limit;
  o.controller.health.temperature_resume_c = f.gpu_temp_limit - 5;
  return o;
}

int RunServer(ServerFlags flags) {
  // What the daemon writes (store, logs, records) is its own unless it says otherwise;
  // tasks run as other users and get umask 022 back.
  ::umask(077);
  Status dir = MakeAbsolute(&flags.data_dir, "--data");
  // On etcd the data directory holds no store, only logs and the first leader's tokens.
  if (dir.ok() && flags.ha.store.empty()) {
    dir = PrepareServerDataDir(flags.data_dir, flags.init);
  }
  if (!dir.ok()) {
    return Fail(dir, "server");
  }
  StatusOr<ServerOptions> options = ToServerOptions(flags);
  if (!options.ok()) {
    return Fail(options.status(), "server");
  }
  if (!flags.ha.store.empty()) {
    return RunHaServer(flags.ha, std::move(options).value(), WaitForStopSignal);
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
            << "  agents:      port " << (*server)->agent_port()
            << ((*server)->agent_port() > 0 ? " (agent channel)" : " (none: HTTP heartbeats)")
            << "\n"
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

int RunAgent(AgentFlags flags) {
  // What the daemon writes (store, logs, records) is its own unless it says otherwise;
  // tasks run as other users and get umask 022 back.
  ::umask(077);
  if (!flags.token.empty()) {
    std::cerr << "tessera agent: warning: --token puts the join token on the command line, "
                 "where every user of this machine can read it (ps, /proc/PID/cmdline); use "
                 "--token-file FILE (mode 0600) or the TESSERA_JOIN_TOKEN variable\n";
  }
  if (Status dir = MakeAbsolute(&flags.data_dir, "--data"); !dir.ok()) {
    return Fail(dir, "agent");
  }
  StatusOr<AgentOptions> options = ToAgentOptions(flags, /*standalone=*/true);
  if (!options.ok()) {
    return Fail(options.status(), "agent");
  }
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(options.value(), GpuCatalog::Default());
  if (!agent.ok()) {
    return Fail(agent.status(), "agent");
  }
  const NodeSpec node = (*agent)->inventory().spec;  // a copy, taken once
  std::cout << "tessera agent: node " << node.name << ", " << node.gpus.size() << " GPUs ("
            << (*agent)->describe_gpus()
            << "), controller " << flags.server << "\n"
            << std::flush;
  (*agent)->Start();
  WaitForStopSignal();
  std::cout << (flags.stop_kills_tasks
                    ? "tessera agent: stopping (its tasks are killed)\n"
                    : "tessera agent: stopping (its tasks keep running, for the next agent on "
                      "this data directory)\n");
  (*agent)->Stop();
  return 0;
}

// `text` as one word of a POSIX shell: as it is when that is safe, else in single quotes.
std::string ShellWord(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("/._-+:,=@%").find(c) != std::string_view::npos;
  });
  if (plain) {
    return text;
  }
  std::string quoted = "'";
  for (const char c : text) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

// How a shell here runs `tessera`: plain `tessera` when PATH finds the one beside this
// tesserad, else that one's absolute path (run from build/, `tessera` is not on PATH,
// or is another installation).
std::string TesseraCommand() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return "tessera";
  }
  const fs::path beside = self.parent_path() / "tessera";
  // The daemons change their environment only before their threads start.
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe)
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty() || dir[0] != '/') {
      continue;  // relative entries depend on where the command is typed
    }
    const fs::path candidate = fs::path(dir) / "tessera";
    if (::access(candidate.c_str(), X_OK) == 0) {
      return fs::equivalent(candidate, beside, ec) ? "tessera" : ShellWord(beside.string());
    }
  }
  return ShellWord(beside.string());
}

// The banner's "try:" line, with commands that work as printed from where `tessera up`
// was started: the tessera it can be run by, a tenant of the queue configuration, and
// an example job file that is there (examples/ of a checkout, or the installed copy).
std::string TryCommands(const std::string& url, const std::string& token_dir,
                        const std::vector<std::string>& tenants) {
  namespace fs = std::filesystem;
  const std::string tessera = TesseraCommand();
  std::string tenant = tenants.empty() ? "team-a" : tenants.front();
  if (std::find(tenants.begin(), tenants.end(), "team-a") != tenants.end()) {
    tenant = "team-a";
  }
  std::error_code ec;
  std::string job = "--gpus 1 -- sh -c 'echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES'";
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path installed =
      ec ? fs::path()
         : self.parent_path().parent_path() / "share/doc/tessera/examples/train-gang.yaml";
  if (fs::exists("examples/train-gang.yaml", ec)) {
    job = "-f examples/train-gang.yaml";
  } else if (!installed.empty() && fs::exists(installed, ec)) {
    job = "-f " + ShellWord(installed.lexically_normal().string());
  }
  return "export TESSERA_SERVER=" + ShellWord(url) + " TESSERA_TOKEN=$(cat " +
         ShellWord(token_dir + "/" + tenant + ".token") + "); " + tessera + " submit " + job +
         "; " + tessera + " top";
}

int RunUp(ServerFlags sflags, AgentFlags aflags) {
  // What the daemon writes (store, logs, records) is its own unless it says otherwise;
  // tasks run as other users and get umask 022 back.
  ::umask(077);
  Status dir = MakeAbsolute(&sflags.data_dir, "--data");
  if (dir.ok()) {
    // Checked before anything is made: run as root, the tasks run as other uids, and a
    // data directory under a private home would fail every one of them.
    dir = DataDirReachableByTasks(sflags.data_dir);
  }
  if (dir.ok()) {
    dir = PrepareServerDataDir(sflags.data_dir, sflags.init);
  }
  if (!dir.ok()) {
    return Fail(dir, "up");
  }
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
  // Tasks run as other users and must not find them.
  const std::string token_dir = sflags.data_dir + "/tokens";
  std::error_code ec;
  std::filesystem::create_directories(token_dir, ec);
  if (ec || ::chmod(token_dir.c_str(), 0700) != 0) {
    return Fail(UnavailableError("cannot make " + token_dir + " (mode 0700)"), "up");
  }
  const std::vector<std::string> tenants = srv.views().Tenants();
  for (const std::string& tenant : tenants) {
    const std::string path = token_dir + "/" + tenant + ".token";
    if (std::filesystem::exists(path)) {
      ::chmod(path.c_str(), 0600);
      continue;
    }
    StatusOr<std::string> token = srv.CreateTenantToken(tenant, tenant);
    if (!token.ok()) {
      return Fail(token.status(), "up");
    }
    if (Status w = WriteSecretFile(path, token.value()); !w.ok()) {
      return Fail(w, "up");
    }
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
  StatusOr<AgentOptions> agent_options = ToAgentOptions(aflags, /*standalone=*/false);
  if (!agent_options.ok()) {
    return Fail(agent_options.status(), "up");
  }
  agent_options->insecure = true;  // our own certificate, on loopback
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(agent_options.value(), GpuCatalog::Default());
  if (!agent.ok()) {
    return Fail(agent.status(), "up");
  }
  (*agent)->Start();
  const NodeSpec node = (*agent)->inventory().spec;  // a copy, taken once
  std::cout << "Tessera is up: a one-machine cluster.\n"
            << "  API:           " << srv.url() << "\n"
            << "  agent channel: port " << srv.agent_port() << "\n"
            << "  dashboard:     " << srv.url() << "/ (sign in with a token below)\n"
            << "  metrics:       " << srv.url() << "/metrics and /metrics/gpus (token: "
            << sflags.data_dir << "/metrics.token)\n"
            << "  admin token:   " << sflags.data_dir << "/admin.token\n"
            << "  tenant tokens: " << token_dir << "/<tenant>.token\n"
            << "  node:          " << node.name << ", " << node.gpus.size() << " GPUs ("
            << (*agent)->describe_gpus() << ")\n"
            << "  try:           " << TryCommands(srv.url(), token_dir, tenants) << "\n"
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
  AddHaServerFlags(server, &server_flags->ha);
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

  AddGpuProbeCommand(app, exit_code);
  AddStoreCommand(app, exit_code);
}

}  // namespace tessera

// `tesserad`: the daemons in their own binary, so that the user commands of `tessera` do
// not load the agent channel's libraries (gRPC and its dependencies add about 12 ms to
// every process start); `tessera server|agent|up` runs it (cli/daemon_exec.h). Here
// rather than in a file of its own: CLI11 is most of a compile.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): std::bad_alloc ends it
  // Debian's abseil checks every gRPC mutex for lock-order cycles (its debug-mode
  // deadlock detector): 7-18 % of the controller's CPU with 10,000 agents connected.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"Tessera's daemons: the controller and the node agent", "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  tessera::AddDaemonCommands(app, &exit_code);
  // Hidden: the daemon commands' manual pages, which `tessera man` asks for.
  tessera::ManPageOptions man;
  man.version = "tessera " TESSERA_VERSION;
  man.write_root = false;  // tessera.1 is the user commands' page
  tessera::AddManCommand(app, man, nullptr, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
