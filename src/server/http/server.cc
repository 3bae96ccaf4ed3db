#include "base/mutex.h"
#include "server/http/server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/http_errors.h"
#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "server/agent_channel_server.h"
#include "server/http/auth.h"
#include "server/http/dashboard.h"
#include "server/http/http_guard.h"
#include "server/http/rate_limiter.h"
#include "server/http/server_util.h"
#include "server/thread_priority.h"
#include "store/commit_watch.h"
#include "store/sqlite_store.h"

namespace tessera {
namespace {

using server_internal::AdminOnly;
using server_internal::IsYaml;
using server_internal::ParseBody;
using server_internal::ParseId;
using server_internal::ParseIntParam;
using server_internal::ParseWindow;
using server_internal::SendError;
using server_internal::SendJson;

// A pool that grows while every worker is busy (up to max) and keeps `min` ready: a
// connection holds its worker until it closes, so a fixed pool is a fixed number of slow
// or idle clients away from refusing everyone (httplib's ThreadPool is fixed).
class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(size_t min, size_t max) : max_(std::max(min, max)) {
    MutexLock lock(mu_);
    for (size_t i = 0; i < min; ++i) {
      Spawn();
    }
  }
  ~ElasticPool() override = default;

  void enqueue(std::function<void()> fn) override {
    MutexLock lock(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && threads_.size() < max_) {
      Spawn();
    }
    cv_.NotifyOne();
  }

  void shutdown() override {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.NotifyAll();
    std::vector<std::thread> threads;
    {
      MutexLock lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) {
      t.join();
    }
  }

 private:
  void Spawn() REQUIRES(mu_) {
    ++idle_;
    threads_.emplace_back([this] { Work(); });
  }
  void Work() {
    MutexLock lock(mu_);
    for (;;) {
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) {
        return;  // stopping, nothing left
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      --idle_;
      lock.Unlock();
      fn();
      lock.Lock();
      ++idle_;
    }
  }

  const size_t max_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
};

// Which roles may call which kind of endpoint; the handlers check finer rules (admin
// only, own jobs only, a node's own name).
Status MayCall(Role role, Server::Access access) {
  using Access = Server::Access;
  switch (access) {
    case Access::kUser:
      if (role == Role::kAdmin || role == Role::kTenant) {
        return Status::Ok();
      }
      return PermissionDeniedError(
          role == Role::kMetrics ? "a metrics token reads /metrics only"
          : role == Role::kAgent ? "the join token only registers nodes (POST /v1/agents/register)"
                                 : "a node credential is for the agent endpoints only");
    case Access::kMetrics:
      return role == Role::kMetrics || role == Role::kAdmin
                 ? Status::Ok()
                 : PermissionDeniedError("only a metrics or admin token reads metrics");
    case Access::kAgent:
      return role == Role::kAgent || role == Role::kNode
                 ? Status::Ok()
                 : PermissionDeniedError(
                       "only agents (the join token or a node credential) call this");
  }
  return PermissionDeniedError("refused");
}

Status WriteSecret(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    return UnavailableError("cannot write " + path);
  }
  out << text << "\n";
  out.close();
  ::chmod(path.c_str(), 0600);
  return Status::Ok();
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string DefaultQueuesYaml() {
  return R"(# Embedded default: two teams with guaranteed GPUs in one cohort; each may
# borrow what the other leaves idle. "default" serves the admin and quick tests.
cohorts:
  - name: cluster
queues:
  - name: team-a
    cohort: cluster
    quota:
      gpu: 8
  - name: team-b
    cohort: cluster
    quota:
      gpu: 8
  - name: default
    cohort: cluster
    quota:
      gpu: 2
)";
}

Server::Server(ServerOptions options, const GpuCatalog& catalog)
    : options_(std::move(options)), catalog_(&catalog) {}

Server::~Server() { Stop(); }

StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options, const GpuCatalog& catalog) {
  if (options.data_dir.empty()) {
    return InvalidArgumentError("a data directory is required");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return InvalidArgumentError("TLS needs both a certificate and a key");
  }
  std::unique_ptr<Server> s(new Server(std::move(options), catalog));
  TESSERA_RETURN_IF_ERROR(s->Init());
  return s;
}

Status Server::Init() {
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir, ec);
  if (ec) {
    return UnavailableError("cannot create data directory " + options_.data_dir + ": " +
                            ec.message());
  }
  if (options_.open_store) {
    TESSERA_ASSIGN_OR_RETURN(store_, options_.open_store());
  } else {
    SqliteStoreOptions store_options;
    store_options.fsync = options_.fsync;
    TESSERA_ASSIGN_OR_RETURN(store_,
                             OpenSqliteStore(options_.data_dir + "/state.db", store_options));
  }
  // Every write is timed: a frozen disk shows in /healthz while writes wait on it.
  auto watched = std::make_unique<CommitWatch>(std::move(store_), clock_);
  commit_watch_ = watched.get();
  store_ = std::move(watched);

  tokens_ = std::make_unique<TokenRegistry>();
  TESSERA_ASSIGN_OR_RETURN(std::vector<TokenRow> rows, store_->LoadTokens());
  bool have_admin = false, have_join = false, have_metrics = false;
  for (const TokenRow& row : rows) {
    if (LoadNodeCredential(row)) {
      continue;
    }
    StatusOr<Role> role = ParseRole(row.role);
    if (!role.ok()) {
      return InternalError("stored token '" + row.name + "': " + role.status().message());
    }
    tokens_->Add(row.hash, Principal{role.value(), row.tenant, row.name, row.user});
    have_admin = have_admin || role.value() == Role::kAdmin;
    have_join = have_join || role.value() == Role::kAgent;
    have_metrics = have_metrics || role.value() == Role::kMetrics;
  }
  WriteBatch batch;
  const Micros now = clock_.NowMicros();
  auto make = [&](Role role, const char* prefix, const char* file) -> Status {
    const std::string token = GenerateToken(prefix);
    TESSERA_RETURN_IF_ERROR(WriteSecret(options_.data_dir + "/" + file, token));
    TokenRow row{HashToken(token), std::string(RoleName(role)), "", file, now, ""};
    tokens_->Add(row.hash, Principal{role, "", file});
    batch.tokens.push_back(std::move(row));
    return Status::Ok();
  };
  if (!have_admin) {
    TESSERA_RETURN_IF_ERROR(make(Role::kAdmin, "tsr_admin", "admin.token"));
  }
  if (!have_join) {
    TESSERA_RETURN_IF_ERROR(make(Role::kAgent, "tsr_join", "join.token"));
  }
  if (!have_metrics) {
    TESSERA_RETURN_IF_ERROR(make(Role::kMetrics, "tsr_metrics", "metrics.token"));
  }
  if (!batch.empty()) {
    TESSERA_RETURN_IF_ERROR(store_->Commit(std::move(batch)));
  }
  admin_token_ = ReadFirstLine(options_.data_dir + "/admin.token");
  join_token_ = ReadFirstLine(options_.data_dir + "/join.token");
  metrics_token_ = ReadFirstLine(options_.data_dir + "/metrics.token");

  limiter_ = std::make_unique<RateLimiter>(clock_, options_.rate_per_second, options_.rate_burst);
  throttle_ = std::make_unique<AuthThrottle>(clock_, options_.auth_throttle);
  ControllerOptions copts = options_.controller;
  copts.data_dir = options_.data_dir;
  const std::string queues =
      options_.queues_yaml.empty() ? DefaultQueuesYaml() : options_.queues_yaml;
  TESSERA_ASSIGN_OR_RETURN(
      controller_, Controller::Open(std::move(copts), store_.get(), *catalog_, clock_, queues));
  job_actions_ = std::make_unique<JobActions>(*controller_);
  job_reads_ = std::make_unique<JobReads>(*controller_);
  TESSERA_ASSIGN_OR_RETURN(validations_, ValidationService::Open(*controller_));
  TESSERA_ASSIGN_OR_RETURN(registry_credentials_, RegistryCredentialsService::Open(*controller_));
  node_actions_ = std::make_unique<NodeActions>(*controller_);
  views_ = std::make_unique<ClusterViews>(*controller_, *store_);
  TESSERA_RETURN_IF_ERROR(controller_->ForgetRemovedNodes());

  const size_t threads = static_cast<size_t>(std::max(options_.threads, 1));
  const size_t max_threads = static_cast<size_t>(std::max(options_.max_threads, options_.threads));
  HttpGuardOptions guard;
  guard.header_timeout_ms = options_.header_timeout_ms;
  guard.max_connections_per_source = options_.max_connections_per_source;
  TESSERA_ASSIGN_OR_RETURN(
      http_, NewGuardedHttpServer(guard, options_.tls_cert, options_.tls_key,
                                  [threads, max_threads] {
                                    return new ElasticPool(threads, max_threads);
                                  }));
  http_->set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    RestoreThreadPriority();  // after a bulk answer this thread wrote last
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_payload_max_length(options_.max_body_bytes);
  // A read waits at most this long for bytes; idle keep-alive connections go after
  // keep_alive_timeout_s, and a connection serves at most keep_alive_max requests.
  http_->set_read_timeout(options_.read_timeout_ms / 1000,
                          (options_.read_timeout_ms % 1000) * 1000);
  http_->set_write_timeout(5, 0);
  http_->set_keep_alive_max_count(static_cast<size_t>(std::max(options_.keep_alive_max, 1)));
  http_->set_keep_alive_timeout(std::max(options_.keep_alive_timeout_s, 1));
  // The library listens with a backlog of 5 (compiled in): keep the listening socket to
  // listen() again with ours. TCP_DEFER_ACCEPT: a connection that sends nothing is not
  // handed to a worker at all.
  http_->set_socket_options([this](socket_t fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    int defer_s = 5;
    ::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof(defer_s));
    listen_fd_ = fd;
  });
  // Small request/response pairs: without this, Nagle and delayed ACKs add 40 ms.
  http_->set_tcp_nodelay(true);
  Routes();
  return Status::Ok();
}

StatusOr<std::string> Server::CreateTenantToken(const std::string& tenant,
                                                const std::string& name, const std::string& user) {
  const std::vector<std::string> tenants = views_->Tenants();
  if (std::find(tenants.begin(), tenants.end(), tenant) == tenants.end()) {
    return InvalidArgumentError("no tenant '" + tenant + "' in the queue configuration");
  }
  if (!user.empty()) {
    TESSERA_RETURN_IF_ERROR(CheckUserName(user));
  }
  const std::string token = GenerateToken("tsr_" + tenant);
  TokenRow row{HashToken(token), std::string(RoleName(Role::kTenant)), tenant, name,
               clock_.NowMicros(), user};
  WriteBatch batch;
  batch.tokens.push_back(row);
  TESSERA_RETURN_IF_ERROR(store_->Commit(std::move(batch)));
  tokens_->Add(row.hash, Principal{Role::kTenant, tenant, name, user});
  return token;
}

// Throttles addresses that failed to authenticate, authenticates, checks that the role
// may call this kind of endpoint, rate-limits users, then runs `f`.
std::function<void(const httplib::Request&, httplib::Response&)> Server::Authed(RouteHandler f,
                                                                                Access access) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  return [this, f = std::move(f), access](const Req& req, Res& res) {
    const std::string header = req.get_header_value("Authorization");
    StatusOr<Principal> who = tokens_->Authenticate(header);
    // A blocked address is refused only its failed attempts: valid credentials from it
    // still work, so a task that guesses tokens cannot cut its own node (or, under
    // `tessera up`, everyone on loopback) off the controller. Tokens are 256-bit random,
    // so what the block limits is the cost of guessing, not its (nil) chance.
    if (!who.ok()) {
      if (const Micros wait = throttle_->Blocked(req.remote_addr); wait > 0) {
        res.set_header("Retry-After", std::to_string((wait + 999'999) / 1'000'000));
        SendError(res, ResourceExhaustedError("too many failed authentications from " +
                                              req.remote_addr + "; retry later"));
        return;
      }
      if (std::string revoked = RevokedMessage(header); !revoked.empty()) {
        SendError(res, PermissionDeniedError(revoked));
        return;
      }
      if (!header.empty()) {
        throttle_->Failed(req.remote_addr);  // a wrong guess, not a missing token
      }
      res.set_header("WWW-Authenticate", "Bearer");
      SendError(res, who.status());
      return;
    }
    if (Status allowed = MayCall(who->role, access); !allowed.ok()) {
      SendError(res, allowed);
      return;
    }
    const bool user = who->role != Role::kAgent && who->role != Role::kNode;
    if (user && !limiter_->Allow(HashToken(header))) {
      res.set_header("Retry-After", "1");
      SendError(res, ResourceExhaustedError("rate limit exceeded; slow down"));
    } else {
      f(who.value(), req, res);
    }
    if (user && res.status == 429 && options_.refusal_pause_ms > 0) {
      // Holds this connection, not the CPU (ServerOptions::refusal_pause_ms).
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.refusal_pause_ms));
    }
  };
}

void Server::Routes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;
  RegisterDashboardRoutes(s);

  s.Get("/healthz", [this](const Req&, Res& res) {
    if (controller_->healthy()) {
      nlohmann::json out = {{"status", "ok"}};
      if (!options_.leader_url.empty()) {
        out["role"] = "leader";
        out["leader"] = options_.leader_url;
      }
      // Writes wait on the store (a frozen filesystem, a slow etcd): reads still work.
      if (const Micros wait = commit_watch_->OldestCommitWait(); wait >= kStoreStallAlert) {
        out["status"] = "degraded";
        out["store_wait_s"] = static_cast<double>(wait / 1000) / 1000.0;
        out["reason"] = "a write to the state store has waited " + FormatDuration(wait) +
                        "; submissions and reports wait with it";
      }
      // Serving, but some stored jobs were left out at the start: say which, and why.
      if (const auto& q = controller_->quarantined(); !q.empty()) {
        out["status"] = "degraded";
        nlohmann::json rows = nlohmann::json::array();
        for (size_t i = 0; i < q.size() && i < 100; ++i) {
          rows.push_back({{"job", q[i].id}, {"why", q[i].why}});
        }
        out["quarantined_jobs"] = q.size();
        out["quarantined"] = std::move(rows);
        out["reason"] = std::to_string(q.size()) +
                        " stored job rows could not be read at the start and were left out "
                        "(the log names each); they stay in the store as they were";
      }
      SendJson(res, out);
    } else {
      SendJson(res, {{"status", "failing"}, {"reason", "the state store failed"}}, 503);
    }
  });

  JobRoutes();
  DrainRoutes();
  ViewRoutes();
  ConfigRoutes();
  NodeRoutes();
  NodeAdminRoutes();
  HistoryRoutes();
  ValidationRoutes();
  AccountRoutes();
  RegistryRoutes();

  s.set_error_handler([](const Req&, Res& res) {
    if (res.status == 404 && res.body.empty()) {
      SendError(res, NotFoundError("no such endpoint"));
    } else if (res.status == 413 && res.body.empty()) {  // a handler's own 413 keeps its message
      SendError(res, InvalidArgumentError("request body too large"));
      res.status = 413;
    }
  });
  s.set_exception_handler([](const Req&, Res& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, InternalError(what));
  });
}

// GET /v1/nodes; the admin's drain and resume of a node or GPU.
void Server::DrainRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/v1/nodes", Authed([this](const Principal& who, const Req&, Res& res) {
          SendJson(res, views_->Nodes(who));
        }));

  // Admin: POST /v1/nodes/{name}/drain {"reason", "gpu"?} and /resume {"gpu"?}.
  auto drain_route = [this](bool drain) {
    return [this, drain](const Principal& who, const Req& req, Res& res) {
      Status st = AdminOnly(who);
      nlohmann::json body = nlohmann::json::object();
      if (st.ok() && !req.body.empty()) {
        body = nlohmann::json::parse(req.body, nullptr, false);
        if (body.is_discarded() || !body.is_object()) {
          st = InvalidArgumentError("the body must be a JSON object");
        }
      }
      int gpu = -1;
      std::string reason;
      if (st.ok() && body.contains("gpu") && !body["gpu"].is_null()) {
        if (!body["gpu"].is_number_integer() || body["gpu"].get<int64_t>() < 0 ||
            body["gpu"].get<int64_t>() > 1024) {
          st = InvalidArgumentError("gpu: expected a GPU index, got " + body["gpu"].dump());
        } else {
          gpu = body["gpu"].get<int>();
        }
      }
      if (st.ok() && drain) {
        if (!body.contains("reason") || !body["reason"].is_string() ||
            body["reason"].get<std::string>().empty()) {
          st = InvalidArgumentError("reason: a drain needs a reason (a non-empty string)");
        } else {
          reason = body["reason"].get<std::string>();
        }
      }
      if (!st.ok()) {
        SendError(res, st);
        return;
      }
      const std::string node = req.matches[1];
      StatusOr<nlohmann::json> out =
          drain ? node_actions_->Drain(node, gpu, reason) : node_actions_->Resume(node, gpu);
      if (!out.ok()) {
        SendError(res, out.status());
        return;
      }
      SendJson(res, out.value());
    };
  };
  s.Post(R"(/v1/nodes/([^/]+)/drain)", Authed(drain_route(true)));
  s.Post(R"(/v1/nodes/([^/]+)/resume)", Authed(drain_route(false)));
}

// Metrics and the usage series.
void Server::ViewRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/metrics", Authed(
                        [this](const Principal&, const Req&, Res& res) {
                          res.set_content(views_->Metrics() + ChannelMetrics(),
                                          "text/plain; version=0.0.4; charset=utf-8");
                        },
                        Access::kMetrics));
  s.Get("/metrics/gpus", Authed(
                             [this](const Principal&, const Req&, Res& res) {
                               res.set_content(views_->GpuMetrics(),
                                               "text/plain; version=0.0.4; charset=utf-8");
                             },
                             Access::kMetrics));

  s.Get("/v1/usage/series", Authed([this](const Principal& who, const Req& req, Res& res) {
          const Micros now = clock_.NowMicros();
          Micros since = now - 3600LL * 1'000'000;
          Micros until = now;
          Micros step = 60LL * 1'000'000;
          if (Status st = ParseWindow(req, &since, &until); !st.ok()) {
            SendError(res, st);
            return;
          }
          if (req.has_param("step")) {
            StatusOr<int64_t> d = ParseDurationMicros(req.get_param_value("step"));
            if (!d.ok()) {
              SendError(res, InvalidArgumentError("step: " + d.status().message()));
              return;
            }
            step = d.value();
          }
          if (req.has_param("by") && req.get_param_value("by") != "tenant") {
            SendError(res, InvalidArgumentError("by: only 'tenant' is supported for series"));
            return;
          }
          StatusOr<nlohmann::json> out = views_->UsageSeries(
              since, until, step, who.role == Role::kTenant ? who.tenant : "");
          if (!out.ok()) {
            SendError(res, out.status());
            return;
          }
          SendJson(res, out.value());
        }));
}

// Queues, usage and tenants.
void Server::ConfigRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Get("/v1/queues", Authed([this](const Principal&, const Req&, Res& res) {
          SendJson(res, views_->Queues());
        }));

  s.Put("/v1/queues", Authed([this](const Principal& who, const Req& req, Res& res) {
          Status st = AdminOnly(who);
          if (st.ok()) {
            st = controller_->SetQueues(req.body);
          }
          if (!st.ok()) {
            SendError(res, st);
            return;
          }
          SendJson(res, views_->Queues());
        }));

  s.Get("/v1/usage", Authed([this](const Principal& who, const Req& req, Res& res) {
          const Micros now = clock_.NowMicros();
          Micros since = now - 24LL * 3600 * 1'000'000;
          Micros until = now;
          if (Status st = ParseWindow(req, &since, &until); !st.ok()) {
            SendError(res, st);
            return;
          }
          const std::string by = req.has_param("by") ? req.get_param_value("by") : "tenant";
          // A tenant sees its own usage only.
          const std::string scope = who.role == Role::kTenant ? who.tenant : "";
          StatusOr<nlohmann::json> out = by == "user" ? UsageByUser(since, until, scope)
                                                      : views_->Usage(since, until, by, scope);
          if (!out.ok()) {
            SendError(res, out.status());
            return;
          }
          SendJson(res, out.value());
        }));

  s.Get("/v1/tenants", Authed([this](const Principal& who, const Req&, Res& res) {
          Status st = AdminOnly(who);
          if (!st.ok()) {
            SendError(res, st);
            return;
          }
          SendJson(res, {{"tenants", views_->Tenants()}});
        }));

  s.Post("/v1/tenants", Authed([this](const Principal& who, const Req& req, Res& res) {
           Status st = AdminOnly(who);
           StatusOr<nlohmann::json> body = ParseBody(req);
           if (st.ok() && !body.ok()) {
             st = body.status();
           }
           if (st.ok() && (!body->contains("name") || !(*body)["name"].is_string())) {
             st = InvalidArgumentError("name: a tenant name is required");
           }
           if (!st.ok()) {
             SendError(res, st);
             return;
           }
           const std::string tenant = (*body)["name"].get<std::string>();
           StatusOr<std::string> token = CreateTenantToken(tenant, tenant);
           if (!token.ok()) {
             SendError(res, token.status());
             return;
           }
           SendJson(res, {{"tenant", tenant}, {"token", token.value()}}, 201);
         }));
}

Status Server::Start() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host.c_str());
  } else {
    port_ = http_->bind_to_port(options_.host.c_str(), options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    return UnavailableError("cannot listen on " + options_.host + ":" +
                            std::to_string(options_.port));
  }
  // listen() again on a listening socket only resizes its queue (Linux).
  if (listen_fd_ >= 0 && ::listen(listen_fd_, std::max(options_.listen_backlog, 5)) != 0) {
    std::cerr << "tessera server: cannot set the listen backlog to " << options_.listen_backlog
              << "\n";
  }
  TESSERA_RETURN_IF_ERROR(StartChannel());
  controller_->Start();
  serve_ = std::thread([this] { http_->listen_after_bind(); });
  // The library's stop() does nothing until the loop has started: a Stop() right after
  // Start() (a leader whose term ends as it begins) would otherwise never end the loop.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void Server::Stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  if (http_ != nullptr) {
    http_->stop();
  }
  if (serve_.joinable()) {
    serve_.join();
  }
  if (channel_ != nullptr) {
    controller_->SetPushSink(nullptr);
    channel_->Stop();
  }
  if (controller_ != nullptr) {
    controller_->Stop();
  }
  if (store_ != nullptr) {
    (void)store_->Close();
  }
}

std::string Server::url() const {
  return std::string(options_.tls_cert.empty() ? "http://" : "https://") + options_.host + ":" +
         std::to_string(port_);
}

}  // namespace tessera
