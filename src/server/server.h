// Server: the controller daemon. It opens the state store under a data directory,
// makes the bootstrap tokens, recovers the Controller and serves the HTTP/JSON API.
//
// API (JSON unless said otherwise; errors are {"error": {"code", "message"}}):
//   GET  /healthz                          no token
//   POST /v1/jobs                          JSON or YAML job spec; Idempotency-Key header
//   GET  /v1/jobs?state=&queue=&tenant=&limit=
//   GET  /v1/jobs/{id}        POST /v1/jobs/{id}/cancel
//   GET  /v1/jobs/{id}/logs?task=&offset=  text/plain; X-Log-Offset, X-Job-State headers
//   GET  /v1/nodes            GET /v1/queues            PUT /v1/queues (admin, YAML)
//   GET  /v1/usage?since=&until=&by=tenant|queue|job
//   GET  /v1/usage/series?since=&until=&step=5m   GPUs in use per tenant over time
//   POST /v1/nodes/{name}/drain {"reason", "gpu"?}   POST /v1/nodes/{name}/resume {"gpu"?} (admin)
//   GET  /metrics  GET /metrics/gpus (DCGM exporter names)   (metrics or admin token)
//   GET  /  the web dashboard (static assets without a token; their data calls need one)
//   GET  /v1/tenants (admin)  POST /v1/tenants (admin) {"name"} -> {"token"} once
//   POST /v1/agents/register  POST /v1/agents/heartbeat   (agent join token)
// Tokens: an admin token, an agent join token and a metrics token are made on first
// start and written (mode 0600) to <data>/admin.token, join.token and metrics.token
// (the latter for Prometheus: it reads /metrics and nothing else); the store keeps
// only their SHA-256 hashes. A tenant sees and cancels only its own jobs.
//
// Thread safety: Start/Stop from one thread; requests are served by a pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "server/controller.h"

namespace httplib {
class Server;
}

namespace tessera {

class RateLimiter;
class TokenRegistry;

struct ServerOptions {
  std::string data_dir;                // required; created when absent
  std::string host = "127.0.0.1";
  int port = 7450;                     // 0: any free port (see Server::port())
  std::string tls_cert, tls_key;       // both set: HTTPS
  std::string queues_yaml;             // queue configuration used when the store has none
  bool fsync = true;                   // the store's synchronous=FULL
  size_t max_body_bytes = 1 << 20;     // larger requests get 413
  double rate_per_second = 200;        // per token (agents exempt)
  double rate_burst = 400;
  int threads = 32;                    // HTTP worker threads
  ControllerOptions controller;        // data_dir is filled in from data_dir
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
  std::string url() const;
  const std::string& admin_token() const { return admin_token_; }
  const std::string& join_token() const { return join_token_; }
  const std::string& metrics_token() const { return metrics_token_; }
  Controller& controller() { return *controller_; }
  // Creates a tenant token (stored hashed) and returns it.
  StatusOr<std::string> CreateTenantToken(const std::string& tenant, const std::string& name);

 private:
  explicit Server(ServerOptions options, const GpuCatalog& catalog);
  Status Init();
  void Routes();

  ServerOptions options_;
  const GpuCatalog* catalog_;
  SystemClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<TokenRegistry> tokens_;
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<httplib::Server> http_;
  std::thread serve_;
  int port_ = 0;
  std::string admin_token_, join_token_, metrics_token_;
  bool stopped_ = false;
};

}  // namespace tessera
