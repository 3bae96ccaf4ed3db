// AgentFleet: registration, what a simulated agent does with launches and stops, its
// reports and its lease, and the public API (see agent_fleet.h). The streams are in
// agent_fleet_stream.cc.
#include "e2e/agent_fleet.h"

#include <absl/synchronization/mutex.h>
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "agent/gpu/fake_gpus.h"
#include "e2e/agent_fleet_internal.h"

namespace tessera::fleet {

using internal::NowUs;
using internal::SimAgent;
using internal::SimTask;

namespace {

std::string TaskId(const TaskKey& k) {
  return std::to_string(k.job) + "." + std::to_string(k.task) + "." + std::to_string(k.attempt);
}

// "http://127.0.0.1:7450" -> "127.0.0.1".
std::string UrlHost(const std::string& url) {
  const size_t scheme = url.find("://");
  std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 3);
  return rest.substr(0, rest.find_first_of(":/"));
}

// What `tessera agent` sends for its node (Agent::RefreshInventory): the fake GPUs as
// discovered, the CPUs and memory it was given, NUMA nodes from the GPUs'.
StatusOr<NodeInventory> DiscoverInventory(GpuBackend& backend, const std::string& name,
                                          const FleetOptions& o) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<DiscoveredGpu> gpus, backend.Discover());
  NodeInventory inv;
  inv.spec.name = name;
  inv.spec.cpu = MilliCpu(o.cpu_milli);
  inv.spec.memory = MiB(o.memory_mib);
  int numa = 1;
  for (const DiscoveredGpu& g : gpus) {
    GpuSpec gs;
    gs.model = g.model;
    gs.mode = g.mode;
    gs.numa_node = g.numa_node;
    gs.nvlink_domain = g.nvlink_domain;
    numa = std::max(numa, g.numa_node + 1);
    inv.spec.gpus.push_back(gs);
    inv.gpu_uuids.push_back(g.uuid);
    std::vector<NodeMigInstance> mig;
    for (const MigInstanceInfo& m : g.mig_instances) {
      mig.push_back(NodeMigInstance{m.uuid, m.profile, m.start});
    }
    inv.mig_instances.push_back(std::move(mig));
  }
  inv.spec.numa_nodes = numa;
  return inv;
}

}  // namespace

// ---- registration ------------------------------------------------------------

void AgentFleet::Impl::QueueRegistration(SimAgent& a) {
  if (a.registering || stopping) {
    return;
  }
  a.registering = true;
  ++a.epoch;  // what the old stream still says changes nothing
  a.open = false;
  a.outstanding = 0;
  a.in_flight.clear();
  if (a.link != nullptr) {
    a.link->Cancel();
    a.link.reset();
  }
  std::lock_guard<std::mutex> lock(reg_mu);
  reg_queue.push_back(&a);
  reg_cv.notify_one();
}

void AgentFleet::Impl::Registrar(int i) {
  httplib::Client client(options.server_url);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(60, 0);
  client.set_write_timeout(10, 0);
  std::unique_lock<std::mutex> lock(reg_mu);
  reg_clients[static_cast<size_t>(i)] = &client;
  while (!stopping) {
    reg_cv.wait(lock, [this] { return stopping || !reg_queue.empty(); });
    if (stopping) {
      break;
    }
    SimAgent* a = reg_queue.front();
    reg_queue.pop_front();
    lock.unlock();
    RegisterOne(*a, client);
    lock.lock();
  }
  reg_clients[static_cast<size_t>(i)] = nullptr;
}

void AgentFleet::Impl::RegisterOne(SimAgent& a, httplib::Client& client) {
  RegisterRequest req;
  std::string bearer;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    req.agent_id = a.agent_id;
    req.inventory = a.inventory;
    req.tasks = Reports(a);  // every task it holds, ended ones included
    bearer = a.credential.empty() ? options.join_token : a.credential;
  }
  const Micros sent = NowUs();
  httplib::Headers headers = {{"Authorization", "Bearer " + bearer}};
  httplib::Result r = client.Post(
      "/v1/agents/register", headers,
      ToJson(req, *catalog).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "application/json");
  StatusOr<RegisterResponse> resp = UnavailableError("no answer");
  if (!r) {
    resp = UnavailableError("register: " + httplib::to_string(r.error()));
  } else if (r->status != 200) {
    resp = UnavailableError("register: HTTP " + std::to_string(r->status) + ": " + r->body);
  } else {
    nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    resp = j.is_discarded() ? StatusOr<RegisterResponse>(InvalidArgumentError("register: not JSON"))
                            : RegisterResponseFromJson(j);
  }
  std::lock_guard<std::mutex> lock(a.mu);
  if (stopping) {
    return;
  }
  if (!resp.ok()) {
    ++register_errors;
    NoteError(resp.status().ToString());
    RetryRegistration(a);
    return;
  }
  if (!resp->credential.empty()) {
    a.credential = resp->credential;
  }
  a.channel_port = resp->channel_port;
  if (options.heartbeat_interval > 0) {
    a.interval = options.heartbeat_interval;
  } else if (resp->heartbeat_interval_ms > 0) {
    a.interval = resp->heartbeat_interval_ms * 1000;
  }
  const Micros timeout = resp->node_timeout_ms * 1000;
  a.lease = timeout <= 0 ? 0 : timeout - std::max<Micros>(1'000'000, timeout / 10);
  a.last_contact = sent;
  a.registered_at = NowUs();
  a.registering = false;
  a.backoff = 0;
  Acknowledge(a, req.tasks);  // what the registration reported is durable now
  ++registrations;
  if (a.channel_port <= 0) {
    NoteError("the controller offers no agent channel: the fleet heartbeats only on it");
    return;
  }
  Connect(a);
}

// ---- tasks -------------------------------------------------------------------

void AgentFleet::Impl::Apply(SimAgent& a, const HeartbeatResponse& commands) {
  for (const TaskLaunch& l : commands.launch) {
    Launch(a, l);
  }
  for (const TaskStop& s : commands.stop) {
    StopTask(a, s);
  }
}

void AgentFleet::Impl::Launch(SimAgent& a, const TaskLaunch& l) {
  ++launches;
  const std::string id = TaskId(l.key);
  {
    std::lock_guard<std::mutex> lock(counts_mu);
    TaskCount& c = counts[l.key];
    c.key = l.key;
    ++c.received;
  }
  if (!a.seen.insert(id).second) {
    return;  // a resend: the agent ignores keys it has seen
  }
  SimTask t;
  t.key = l.key;
  // The agent's own ledger (Agent::ReserveGpus): never a GPU slice twice.
  const int64_t want = l.gpus.size() > 1 ? 1000 : std::max<int64_t>(l.gpu_milli, 1);
  for (int g : l.gpus) {
    if (g < 0 || static_cast<size_t>(g) >= a.gpu_used.size()) {
      t.message = "GPU index " + std::to_string(g) + " does not exist on this node";
    } else if (a.gpu_used[static_cast<size_t>(g)] + want > 1000) {
      ++double_bookings;
      std::string holders;
      for (const auto& [other, o] : a.tasks) {
        for (const auto& [og, milli] : o.gpu_use) {
          holders += og == g ? " " + other : "";
        }
      }
      t.message = "GPU " + std::to_string(g) + " would be double-booked";
      std::lock_guard<std::mutex> lock(counts_mu);
      clashes.push_back(a.node + " GPU " + std::to_string(g) + ": held by" + holders +
                        ", refused " + id);
    }
  }
  if (!t.message.empty()) {
    t.exited = true;
    t.failed = true;
    t.exit_code = 127;
    a.tasks[id] = std::move(t);
    return;
  }
  std::vector<GpuLoad> load;
  for (int g : l.gpus) {
    a.gpu_used[static_cast<size_t>(g)] += want;
    t.gpu_use.emplace_back(g, want);
    load.push_back({g, "", want, l.gpu_memory_mib});
  }
  a.backend->SetTaskLoad(id, std::move(load));
  a.tasks[id] = std::move(t);
  {
    std::lock_guard<std::mutex> lock(counts_mu);
    TaskCount& c = counts[l.key];
    ++c.started;
    c.node = a.node;
  }
  ++tasks_started;
  ++running;
  Micros run = options.task_run;
  if (auto it = l.env.find("FLEET_RUN_MS"); it != l.env.end()) {
    run = std::strtoll(it->second.c_str(), nullptr, 10) * 1000;
  }
  if (run <= 0) {
    EndTask(a, id, 0, 0, false, "");
    return;
  }
  timers->At(NowUs() + run, [this, &a, id] {
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.tasks.find(id);
    if (it != a.tasks.end() && !it->second.exited && !stopping) {
      EndTask(a, id, 0, 0, false, "");
      ReportSoon(a);
    }
  });
}

void AgentFleet::Impl::StopTask(SimAgent& a, const TaskStop& stop) {
  const std::string id = TaskId(stop.key);
  auto it = a.tasks.find(id);
  if (it == a.tasks.end() || it->second.exited) {
    return;
  }
  const int sig = stop.grace_ms <= 0 ? 9 : (stop.signal > 0 ? stop.signal : 15);
  EndTask(a, id, 0, sig, false, "");
  ReportSoon(a);
}

void AgentFleet::Impl::EndTask(SimAgent& a, const std::string& id, int code, int signal, bool lost,
                               const std::string& message) {
  SimTask& t = a.tasks[id];
  t.exited = true;
  t.exit_code = code;
  t.signal = signal;
  t.lost = lost;
  t.message = message;
  for (const auto& [g, milli] : t.gpu_use) {
    a.gpu_used[static_cast<size_t>(g)] -= milli;
  }
  t.gpu_use.clear();
  a.backend->SetTaskLoad(id, {});
  --running;
}

std::vector<TaskReport> AgentFleet::Impl::Reports(SimAgent& a) {
  std::vector<TaskReport> out;
  out.reserve(a.tasks.size());
  for (const auto& [id, t] : a.tasks) {
    TaskReport r;
    r.key = t.key;
    r.state = t.failed    ? TaskState::kFailedToStart
              : !t.exited ? TaskState::kRunning
              : t.lost    ? TaskState::kLost
                          : TaskState::kExited;
    r.exit_code = t.exit_code;
    r.signal = t.signal;
    r.message = t.message;
    out.push_back(std::move(r));
  }
  return out;
}

void AgentFleet::Impl::Acknowledge(SimAgent& a, const std::vector<TaskReport>& reported) {
  for (const TaskReport& r : reported) {
    if (r.state == TaskState::kRunning) {
      continue;
    }
    auto it = a.tasks.find(TaskId(r.key));
    if (it != a.tasks.end() && it->second.exited) {
      a.tasks.erase(it);
      ++exits_acknowledged;
    }
  }
}

// Every 100 ms: leases that ran out, and answers that did not come.
void AgentFleet::Impl::Sweep() {
  std::unique_lock<std::mutex> wait(sweep_mu);
  while (!stopping) {
    sweep_cv.wait_for(wait, std::chrono::milliseconds(100), [this] { return stopping.load(); });
    for (const auto& ap : agents) {
      SimAgent& a = *ap;
      std::lock_guard<std::mutex> lock(a.mu);
      const Micros now = NowUs();
      if (a.outstanding != 0 && now - a.sent_at > options.answer_timeout && a.link != nullptr) {
        ++answer_timeouts;
        hello_timeouts += a.outstanding == a.hello_seq ? 1 : 0;
        NoteError("no answer within " + std::to_string(options.answer_timeout / 1000) + " ms");
        a.link->Cancel();  // its end reconnects; nothing is sent on it meanwhile
        a.open = false;
        a.outstanding = 0;
      }
      if (a.lease <= 0 || a.last_contact == 0 || now - a.last_contact <= a.lease) {
        continue;
      }
      bool ended = false;
      for (auto& [id, t] : a.tasks) {
        if (!t.exited) {
          EndTask(a, id, 0, 9, true,
                  "killed on the node after it lost the controller for longer than its lease");
          ++fenced;
          ended = true;
        }
      }
      if (ended) {
        ReportSoon(a);
      }
    }
  }
}

void AgentFleet::Impl::NoteError(const std::string& what) {
  std::lock_guard<std::mutex> lock(counts_mu);
  if (errors.size() < 20 && std::find(errors.begin(), errors.end(), what) == errors.end()) {
    errors.push_back(what);
  }
}

// ---- the public API ----------------------------------------------------------

StatusOr<std::unique_ptr<AgentFleet>> AgentFleet::Create(FleetOptions options,
                                                         const GpuCatalog& catalog) {
  if (options.agents <= 0 || options.server_url.empty()) {
    return InvalidArgumentError("a fleet needs agents and a controller URL");
  }
  // As tesserad does for its agent: Debian's abseil checks every gRPC mutex for lock-order
  // cycles, which was 14 % of the machine's CPU with 10,000 simulated agents coming back.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->catalog = &catalog;
  impl->host = UrlHost(impl->options.server_url);
  std::mt19937_64 rng(std::random_device{}());
  const std::string run = std::to_string(rng() % 1'000'000'000);
  for (int i = 0; i < impl->options.agents; ++i) {
    auto a = std::make_unique<SimAgent>();
    a->index = i;
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05d", impl->options.name_prefix.c_str(), i);
    a->node = name;
    a->agent_id = "fleet-" + run + "-" + std::to_string(i);
    TESSERA_ASSIGN_OR_RETURN(a->backend, MakeFakeGpuBackend(impl->options.gpus, catalog, a->node));
    TESSERA_ASSIGN_OR_RETURN(a->inventory, DiscoverInventory(*a->backend, a->node, impl->options));
    a->gpu_used.assign(a->inventory.spec.gpus.size(), 0);
    impl->agents.push_back(std::move(a));
  }
  return std::unique_ptr<AgentFleet>(new AgentFleet(std::move(impl)));
}

AgentFleet::AgentFleet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AgentFleet::~AgentFleet() { Stop(); }

void AgentFleet::Start() {
  Impl& f = *impl_;
  if (f.started) {
    return;
  }
  f.started = true;
  f.timers = std::make_unique<internal::Timers>(f.options.timer_threads);
  const int clients = std::max(f.options.register_clients, 1);
  f.reg_clients.assign(static_cast<size_t>(clients), nullptr);
  for (int i = 0; i < clients; ++i) {
    f.registrars.emplace_back([&f, i] { f.Registrar(i); });
  }
  f.sweeper = std::thread([&f] { f.Sweep(); });
  for (const auto& a : f.agents) {
    std::lock_guard<std::mutex> lock(a->mu);
    f.QueueRegistration(*a);
  }
}

void AgentFleet::Stop() {
  Impl& f = *impl_;
  if (!f.started || f.stopping.exchange(true)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(f.reg_mu);
    for (httplib::Client* c : f.reg_clients) {
      if (c != nullptr) {
        c->stop();  // a registration in flight ends now
      }
    }
  }
  f.reg_cv.notify_all();
  for (std::thread& t : f.registrars) {
    t.join();
  }
  f.sweep_cv.notify_all();
  f.sweeper.join();
  for (const auto& a : f.agents) {
    std::lock_guard<std::mutex> lock(a->mu);
    ++a->epoch;
    a->open = false;
    if (a->link != nullptr) {
      a->link->Cancel();
    }
  }
  f.timers->Stop();
  std::unique_lock<std::mutex> lock(f.live_mu);
  if (!f.live_cv.wait_for(lock, std::chrono::seconds(60), [&f] { return f.live_streams == 0; })) {
    std::fprintf(stderr, "agent fleet: %d streams did not end within 60 s\n", f.live_streams);
  }
}

FleetStats AgentFleet::Stats() const {
  const Impl& f = *impl_;
  FleetStats s;
  s.agents = static_cast<int>(f.agents.size());
  for (const auto& a : f.agents) {
    std::lock_guard<std::mutex> lock(a->mu);
    s.streaming += a->open ? 1 : 0;
  }
  s.registrations = f.registrations;
  s.register_errors = f.register_errors;
  s.connects = f.connects;
  s.stream_ends = f.stream_ends;
  s.heartbeats = f.heartbeats;
  s.store_errors = f.store_errors;
  s.answer_timeouts = f.answer_timeouts;
  s.hello_timeouts = f.hello_timeouts;
  s.launches = f.launches;
  s.tasks_started = f.tasks_started;
  s.exits_acknowledged = f.exits_acknowledged;
  s.running = f.running;
  s.double_bookings = f.double_bookings;
  s.fenced = f.fenced;
  std::lock_guard<std::mutex> lock(f.counts_mu);
  s.errors = f.errors;
  return s;
}

namespace {

template <typename Agents, typename Pred>
int CountAgents(const Agents& agents, SteadyTime since, Pred pred) {
  const Micros t =
      std::chrono::duration_cast<std::chrono::microseconds>(since.time_since_epoch()).count();
  int n = 0;
  for (const auto& a : agents) {
    std::lock_guard<std::mutex> lock(a->mu);
    n += a->registered_at >= t && pred(*a) ? 1 : 0;
  }
  return n;
}

}  // namespace

int AgentFleet::StreamingSince(SteadyTime since) const {
  return CountAgents(impl_->agents, since, [](const SimAgent& a) { return a.open; });
}

int AgentFleet::RegisteredSince(SteadyTime since) const {
  return CountAgents(impl_->agents, since, [](const SimAgent&) { return true; });
}

LatencyHistogram& AgentFleet::heartbeat_rtt() { return impl_->rtt; }
LatencyHistogram& AgentFleet::hello_rtt() { return impl_->hello_rtt; }

std::vector<TaskCount> AgentFleet::TaskCounts() const {
  std::lock_guard<std::mutex> lock(impl_->counts_mu);
  std::vector<TaskCount> out;
  out.reserve(impl_->counts.size());
  for (const auto& [key, c] : impl_->counts) {
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> AgentFleet::Clashes() const {
  std::lock_guard<std::mutex> lock(impl_->counts_mu);
  return impl_->clashes;
}

}  // namespace tessera::fleet
