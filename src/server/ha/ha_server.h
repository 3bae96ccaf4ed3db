// HaServer: one of several controllers on one store (etcd); the elected one serves.
//
// Every controller runs a LeaderElection (leader_election.h). The leader runs a whole
// Server (server.h) on its port: the scheduling loop, the agent channel and the API,
// over the store opened for its term with the term's fence, so that every write it makes
// is refused once another controller leads (a deposed leader that wakes up cannot write,
// and since the controller hands decisions to agents only once they are durable, nothing
// it decides then reaches an agent). A fenced write ends the term at once.
//
// A follower serves only a small HTTP front on the same port:
//   GET /healthz  200 {"status": "ok", "role": "follower", "leader": URL or ""}
//   anything else 307 to the leader (Location: leader URL + the request's path and query,
//                 X-Tessera-Leader: leader URL), or 503 {"error": {"code": "Unavailable",
//                 "message": "no leader: ..."}} with Retry-After: 1 while none is known
//                 (an election under way, or the store without quorum).
// It opens no agent channel. Followers are warm: the process is up, connected to the
// store and watching the leader key, so a takeover costs the lease's expiry plus one
// recovery from the store (the same recovery as a restart: running jobs keep their
// placement while their agents re-attach).
//
// Role changes run on one thread of their own, in the order the election reports them,
// so that the election keeps renewing the lease while a new term's Server starts. A term
// that ends keeps its lease until its Server has stopped, so that no other controller
// leads while this one may still answer an agent. A leader whose store failed a write
// (the controller then refuses work until restarted) ends its term: the next one
// recovers from the store.
// Thread safety: Start and Stop from one thread; the accessors from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "server/ha/election_backend.h"
#include "server/ha/leader_election.h"
#include "server/http/server.h"

namespace httplib {
class Server;
}

namespace tessera {

struct HaServerOptions {
  // The controller's options: host and port (0: any free one, kept across terms),
  // agent_port (should be fixed, so that agents can reach each leader's channel), ...
  // Its open_store and leader_url are set per term.
  ServerOptions server;
  // How clients reach this controller; "" : http(s)://host:port.
  std::string advertise_url;
  LeaderElectionOptions election;  // identity is advertise_url
  // Opens the store for a term: every write is conditioned on the leader key's create
  // revision `fence`; on_fenced is called (once, without blocking) when one is refused.
  std::function<StatusOr<std::unique_ptr<Store>>(int64_t fence, std::function<void()> on_fenced)>
      open_store;
};

class HaServer {
 public:
  // `backend` (the election's store) and `catalog` must outlive the HaServer.
  static StatusOr<std::unique_ptr<HaServer>> Create(HaServerOptions options,
                                                    const GpuCatalog& catalog,
                                                    ElectionBackend& backend);
  ~HaServer();
  HaServer(const HaServer&) = delete;
  HaServer& operator=(const HaServer&) = delete;

  // Binds the port as a follower and starts campaigning.
  Status Start();
  // A leader stops serving and resigns (another takes over at once); a follower stops.
  void Stop();

  bool leading() const;
  std::string leader() const;  // the leader's URL as last seen, "" unknown
  int port() const { return port_; }
  const std::string& url() const { return url_; }
  uint64_t terms() const;  // terms this controller has served as leader
  // Why the last term ended or failed to start, "" when none has.
  std::string last_step_down() const;
  // Calls f with the running Server while leading (under the role lock: keep it short);
  // false when not leading.
  bool WithServer(const std::function<void(Server&)>& f);

 private:
  HaServer(HaServerOptions options, const GpuCatalog& catalog, ElectionBackend& backend);
  void OnElection(const ElectionEvent& event);  // the election's thread: queue it
  void RoleLoop();
  void BecomeLeader(int64_t fence);
  void BecomeFollower(const std::string& why);
  // While leading: a controller whose store failed ends its term (kHealthCheckMs).
  void CheckHealth();
  static constexpr int kHealthCheckMs = 250;
  Status StartFront();  // the follower's HTTP front, on port_
  void StopFront();

  HaServerOptions options_;
  const GpuCatalog& catalog_;
  ElectionBackend& backend_;
  SystemClock clock_;
  int port_ = 0;
  std::string url_;
  std::unique_ptr<LeaderElection> election_;

  Mutex events_mu_;
  CondVar events_cv_;
  std::deque<ElectionEvent> events_ GUARDED_BY(events_mu_);
  // The fence of the last term elected, and of the last that ended (kLost): a term's
  // store refuses writes once its fence has ended (TermStore in ha_server.cc).
  int64_t elected_fence_ GUARDED_BY(events_mu_) = 0;
  std::shared_ptr<std::atomic<int64_t>> ended_fence_ = std::make_shared<std::atomic<int64_t>>(0);
  bool stopping_ GUARDED_BY(events_mu_) = false;
  std::thread role_thread_;

  mutable Mutex role_mu_;
  std::unique_ptr<Server> server_ GUARDED_BY(role_mu_);
  std::string last_step_down_ GUARDED_BY(role_mu_);
  std::unique_ptr<httplib::Server> front_;
  std::thread front_thread_;
};

}  // namespace tessera
