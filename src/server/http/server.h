// Server: the controller daemon. It opens the state store under a data directory,
// makes the bootstrap tokens, recovers the Controller and serves the HTTP/JSON API.
//
// API (JSON unless said otherwise; errors are {"error": {"code", "message"}}):
//   GET  /healthz                          no token
//   POST /v1/jobs                          JSON or YAML job spec; Idempotency-Key header
//   POST /v1/jobs/batch  {"jobs": [spec, ...], "submit_dir"?} (or YAML, a `jobs:` list);
//        all or none, in one durable commit; Idempotency-Key for the batch -> {"ids"}
//   GET  /v1/jobs?state=&queue=&tenant=&limit=&after=   pages: {"jobs", "next"}
//   GET  /v1/jobs/{id}        POST /v1/jobs/{id}/cancel
//   GET  /v1/jobs/{id}/logs?task=&offset=  text/plain; X-Log-Offset, X-Job-State headers
//   GET  /v1/nodes            GET /v1/queues            PUT /v1/queues (admin, YAML)
//   GET  /v1/usage?since=&until=&by=tenant|queue|job
//   GET  /v1/usage/series?since=&until=&step=5m   GPUs in use per tenant over time
//   GET  /v1/admin/history?since=&until=&after=&limit= (admin) what `tessera whatif` replays
//   POST /v1/nodes/{name}/drain {"reason", "gpu"?}   POST /v1/nodes/{name}/resume {"gpu"?} (admin)
//   DELETE /v1/nodes/{name} (or POST /v1/nodes/{name}/remove)   POST /v1/nodes/{name}/revoke
//   (admin) GET  /metrics  GET /metrics/gpus (DCGM exporter names)   (metrics or admin token) GET
//   /  the web dashboard (static assets without a token; their data calls need one) GET /v1/tenants
//   (admin)  POST /v1/tenants (admin) {"name"} -> {"token"} once POST /v1/agents/register  POST
//   /v1/agents/heartbeat   (node credential; join token) the agent channel: gRPC on agent_port
//   (server/agent_channel_server.h), node credential
// Tokens: an admin token, an agent join token and a metrics token are made on first
// start and written (mode 0600) to <data>/admin.token, join.token and metrics.token
// (the latter for Prometheus: it reads /metrics and nothing else); the store keeps
// only their SHA-256 hashes. A tenant sees and cancels only its own jobs.
//
// Node identity: the join token only registers a node name that has no credential; the
// answer carries the name's credential (once; stored hashed, role "node"). From then on
// the agent sends the credential as its bearer token: re-registration, heartbeats and
// task reports of that name need it, and the join token is refused (403) for the name
// until the admin removes the node. A revoked credential (row role "node_revoked") is
// refused with 403 and its node is fenced; a removed node's credential row becomes
// role "removed" (the store keeps rows; these are tombstones).
//
// Hardening: requests are served by an elastic pool (threads..max_threads), so that slow
// or idle connections, each bounded by the read timeout and keep-alive limits, cannot
// hold every worker; the listen backlog is listen_backlog. A connection waits for its
// first request's headers off the pool, and is closed when they (or a later request's)
// take longer than header_timeout_ms; a client address has at most
// max_connections_per_source connections at once (server/http/http_guard.h). A listing costs
// one rate token per list_rows_per_token rows, a submission that makes N jobs (a batch, or an
// array of N elements; its arrays' elements counted) 1 + N / batch_jobs_per_token
// (api/job_batch.h bounds a batch: 10,000 jobs; 413 beyond). Failed authentications
// are throttled per source address (auth_throttle; 429 with Retry-After).
//
// Thread safety: Start/Stop from one thread; requests are served by a pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "server/controller.h"
#include "server/http/rate_limiter.h"
#include "server/services/cluster_views.h"
#include "server/services/job_actions.h"
#include "server/services/job_reads.h"
#include "server/services/node_actions.h"
#include "server/services/registry_credentials_service.h"
#include "server/services/validation_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace tessera {

class CommitWatch;
class AgentChannelServer;
class TokenRegistry;

struct ServerOptions {
  std::string data_dir;                // required; created when absent
  std::string host = "127.0.0.1";
  int port = 7450;                     // 0: any free port (see Server::port())
  // The agent channel (gRPC, api/agent_channel.proto) on host: agents learn the port
  // when they register. 0: any free port (see Server::agent_port()); -1: no channel,
  // agents heartbeat over HTTP.
  int agent_port = 0;
  int agent_workers = 4;               // threads handling agents' messages
  std::string tls_cert, tls_key;       // both set: HTTPS
  std::string queues_yaml;             // queue configuration used when the store has none
  bool fsync = true;                   // the store's synchronous=FULL
  size_t max_body_bytes = 1 << 20;     // larger requests get 413
  // Per token (agents exempt); sized in docs/benchmarks.md: above Slurm's 500 jobs/s, a
  // 3,000-job burst taken whole, a fraction of what one controller sustains.
  double rate_per_second = 1000;
  double rate_burst = 4000;
  int threads = 32;                    // HTTP worker threads kept ready
  int max_threads = 1024;              // the pool grows to this while all are busy
  int listen_backlog = 4096;           // pending connections the kernel queues
  int read_timeout_ms = 5000;          // one read of a request (headers or body)
  int keep_alive_max = 10000;          // requests per connection (each close costs a reconnect)
  int keep_alive_timeout_s = 5;        // an idle keep-alive connection is closed after this
  // A request's line and headers must all arrive within this, or the connection is
  // closed (server/http/http_guard.h: plain HTTP only; 0: no total deadline).
  int header_timeout_ms = 5000;
  int max_connections_per_source = 64;  // concurrent, per client IP address; beyond: 429 (0: any)
  // A 429 to a user (rate, pending bound) is answered this long after it is decided: a
  // client that ignores Retry-After and asks again at once is held to a few requests a
  // second per connection instead of thousands, which took the CPU other tenants'
  // requests needed. Honest clients wait out Retry-After (1 s or more) anyway. 0: none.
  int refusal_pause_ms = 250;
  double list_rows_per_token = 10;     // a listing of N rows costs 1 + N / this rate tokens
  double batch_jobs_per_token = 4;     // a batch of N jobs costs 1 + N / this rate tokens
  AuthThrottleOptions auth_throttle;   // failed authentications per source address
  ControllerOptions controller;        // data_dir is filled in from data_dir
  // Opens the state store; unset: SQLite at <data_dir>/state.db. A leader of several
  // controllers (server/ha/ha_server.h) passes its fenced etcd store here.
  std::function<StatusOr<std::unique_ptr<Store>>()> open_store;
  // Set by HaServer on its leader: /healthz says {"role": "leader", "leader": this URL}.
  std::string leader_url;
};

// The embedded default queue configuration: one cohort, tenants team-a and team-b
// with guaranteed GPUs that may borrow each other's idle ones, and "default".
std::string DefaultQueuesYaml();

class Server {
 public:
  static StatusOr<std::unique_ptr<Server>> Create(ServerOptions options, const GpuCatalog& catalog);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves on a thread; starts the scheduling loop.
  Status Start();
  // Stops serving, then the scheduling loop, then closes the store. Idempotent.
  void Stop();

  int port() const { return port_; }
  int agent_port() const;  // 0: no agent channel
  size_t channel_streams() const;   // agents connected on the channel
  uint64_t channel_pushes() const;  // push messages sent on it
  std::string ChannelMetrics() const;  // its /metrics families; "" without a channel
  std::string url() const;
  const std::string& admin_token() const { return admin_token_; }
  const std::string& join_token() const { return join_token_; }
  const std::string& metrics_token() const { return metrics_token_; }
  Controller& controller() { return *controller_; }
  // The cluster-wide reads the routes serve (services/cluster_views.h).
  ClusterViews& views() { return *views_; }
  // Creates a tenant token (stored hashed) and returns it; a non-empty `user` makes it
  // that user's token inside the tenant (CheckUserName).
  StatusOr<std::string> CreateTenantToken(const std::string& tenant, const std::string& name,
                                          const std::string& user = "");

  // Who may call an endpoint: users (admin, tenants), metrics readers (metrics, admin) or
  // agents (the join token, node credentials).
  enum class Access : uint8_t { kUser, kMetrics, kAgent };

 private:
  using RouteHandler =
      std::function<void(const Principal&, const httplib::Request&, httplib::Response&)>;
  // Wraps a handler: per-address throttling of failed authentication, authentication,
  // MayCall(role, access), the per-token rate limit for users.
  std::function<void(const httplib::Request&, httplib::Response&)> Authed(
      RouteHandler f, Access access = Access::kUser);
  explicit Server(ServerOptions options, const GpuCatalog& catalog);
  Status Init();
  void Routes();  // health, then the groups below, then the error handlers
  void JobRoutes();     // reads, cancels and logs; calls SubmitRoutes
  void SubmitRoutes();  // POST /v1/jobs and /v1/jobs/batch
  void NamedActionRoutes();  // cancel, hold, release, requeue by a job's name
  // A job named by its id or, for an array element, "ARRAY_INDEX".
  StatusOr<JobNumber> JobIdOf(const Principal& who, const std::string& text);
  // Charges the request's token for the `jobs` a submission makes (see Hardening).
  void ChargeJobs(const httplib::Request& req, size_t jobs);
  void DrainRoutes();
  void ViewRoutes();
  void ConfigRoutes();
  // The agent and node-membership endpoints (server_nodes.cc).
  void NodeRoutes();
  // POST /v1/agents/register with the join token: a new node gets its credential.
  void JoinNode(const RegisterRequest& r, const std::string& remote_addr, httplib::Response& res);
  void NodeAdminRoutes();
  void HistoryRoutes();  // GET /v1/admin/history (server_whatif.cc)
  void RegistryRoutes();    // a tenant's registry credentials (server_registry.cc)
  void ValidationRoutes();  // /v1/admin/validations (server_validations.cc)
  // /v1/tokens, /v1/whoami and /v1/history (server_accounts.cc).
  void AccountRoutes();
  // GET /v1/usage?by=user: the controller's usage by job, added up by the jobs' users.
  StatusOr<nlohmann::json> UsageByUser(Micros since, Micros until, const std::string& tenant);
  // The agent channel (server_channel.cc): started before the scheduling loop, so that
  // its first decisions are pushed.
  Status StartChannel();
  // The node whose credential `authorization` carries, for the agent channel.
  StatusOr<std::string> AuthenticateNode(const std::string& authorization, const std::string& peer);
  // Loads a node credential row (role node, node_revoked or removed); false for others.
  bool LoadNodeCredential(const TokenRow& row);
  // 403 text for a revoked credential's bearer header; "" when it is not one.
  std::string RevokedMessage(const std::string& authorization);

  ServerOptions options_;
  const GpuCatalog* catalog_;
  SystemClock clock_;
  std::unique_ptr<Store> store_;
  CommitWatch* commit_watch_ = nullptr;  // store_ itself: times its commits
  // A write waiting this long makes /healthz say "degraded".
  static constexpr Micros kStoreStallAlert = 2'000'000;
  std::unique_ptr<TokenRegistry> tokens_;
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<AuthThrottle> throttle_;
  // Node credentials by node name; guards first registrations of a name, removal and
  // revocation (so that two agents cannot both get a credential for one name).
  struct NodeCredential {
    std::string hash;
    bool revoked = false;
  };
  Mutex cred_mu_;
  std::map<std::string, NodeCredential> node_creds_ GUARDED_BY(cred_mu_);
  // Names whose first registration is under way.
  std::set<std::string> joining_ GUARDED_BY(cred_mu_);
  std::map<std::string, std::string> revoked_ GUARDED_BY(cred_mu_);  // hash -> node name
  int listen_fd_ = -1;
  // Before controller_, which calls its module and pass until it is gone
  // (services/validation_service.h).
  std::unique_ptr<ValidationService> validations_;
  std::unique_ptr<RegistryCredentialsService> registry_credentials_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<JobActions> job_actions_;  // over controller_ (services/job_actions.h)
  std::unique_ptr<JobReads> job_reads_;  // over controller_ (services/job_reads.h)
  std::unique_ptr<NodeActions> node_actions_;  // over controller_ (services/node_actions.h)
  std::unique_ptr<ClusterViews> views_;  // over controller_ and store_ (services/cluster_views.h)
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<AgentChannelServer> channel_;
  std::thread serve_;
  int port_ = 0;
  std::string admin_token_, join_token_, metrics_token_;
  bool stopped_ = false;
};

}  // namespace tessera
