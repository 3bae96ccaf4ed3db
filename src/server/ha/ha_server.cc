#include "base/mutex.h"
#include "server/ha/ha_server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "server/http/server_util.h"
#include "store/store.h"

namespace tessera {
namespace {

using server_internal::SendError;
using server_internal::SendJson;

StatusOr<int> PickFreePort(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return UnavailableError("cannot open a socket to find a free port");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1 &&
                  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) {
    return UnavailableError("cannot find a free port on " + host + " (an IPv4 address is needed "
                            "with port 0)");
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

// One term's store: refuses every write once the election has said the term ended. The
// fence alone lets an ended term's writes through until another controller is elected
// (etcd keeps an expired leader's lease alive a while after its quorum returns), and a
// Server that is stopping still makes them: a scheduling cycle, an agent's report or a
// submission that waited out the store's deadline. Such a write once declared the nodes
// lost and their running jobs requeued, and the next leader ran them a second time.
class TermStore final : public ForwardingStore {
 public:
  TermStore(std::unique_ptr<Store> inner, int64_t fence,
            std::shared_ptr<const std::atomic<int64_t>> ended_fence)
      : ForwardingStore(std::move(inner)), fence_(fence), ended_fence_(std::move(ended_fence)) {}

  Status Commit(WriteBatch batch) override {
    if (ended_fence_->load() >= fence_) {
      return UnavailableError("fenced: this controller's term as leader has ended; the new "
                              "leader takes the request");
    }
    return ForwardingStore::Commit(std::move(batch));
  }

 private:
  const int64_t fence_;
  const std::shared_ptr<const std::atomic<int64_t>> ended_fence_;
};

}  // namespace

HaServer::HaServer(HaServerOptions options, const GpuCatalog& catalog, ElectionBackend& backend)
    : options_(std::move(options)), catalog_(catalog), backend_(backend) {}

StatusOr<std::unique_ptr<HaServer>> HaServer::Create(HaServerOptions options,
                                                     const GpuCatalog& catalog,
                                                     ElectionBackend& backend) {
  if (!options.open_store) {
    return InvalidArgumentError("HaServer needs open_store");
  }
  if (options.server.data_dir.empty()) {
    return InvalidArgumentError("HaServer needs a data directory");
  }
  return std::unique_ptr<HaServer>(new HaServer(std::move(options), catalog, backend));
}

HaServer::~HaServer() { Stop(); }

Status HaServer::Start() {
  port_ = options_.server.port;
  if (port_ == 0) {
    // One port for every term (the front's and the leader's): learn a free one first.
    TESSERA_ASSIGN_OR_RETURN(port_, PickFreePort(options_.server.host));
  }
  url_ = options_.advertise_url;
  if (url_.empty()) {
    url_ = std::string(options_.server.tls_cert.empty() ? "http://" : "https://") +
           options_.server.host + ":" + std::to_string(port_);
  }
  LeaderElectionOptions election = options_.election;
  election.identity = url_;
  election.defer_release = true;  // released once the term's Server has stopped
  election_ = std::make_unique<LeaderElection>(
      backend_, clock_, election, [this](const ElectionEvent& e) { OnElection(e); });
  TESSERA_RETURN_IF_ERROR(StartFront());
  role_thread_ = std::thread([this] { RoleLoop(); });
  election_->Start();
  return Status::Ok();
}

void HaServer::Stop() {
  {
    MutexLock lock(events_mu_);
    stopping_ = true;  // the term's end below brings no front back
  }
  if (election_ != nullptr) {
    // Ends a term (kLost is queued), then resigns: the others take over at once.
    election_->Stop(/*resign=*/true);
  }
  events_cv_.NotifyAll();
  if (role_thread_.joinable()) {
    role_thread_.join();
  }
  std::unique_ptr<Server> server;
  {
    MutexLock lock(role_mu_);
    server = std::move(server_);
  }
  if (server != nullptr) {
    server->Stop();
  }
  if (election_ != nullptr) {
    election_->ReleaseEndedTerm();
  }
  StopFront();
}

bool HaServer::leading() const { return election_ != nullptr && election_->leading(); }

std::string HaServer::leader() const { return election_ == nullptr ? "" : election_->leader(); }

uint64_t HaServer::terms() const { return election_ == nullptr ? 0 : election_->terms(); }

std::string HaServer::last_step_down() const {
  MutexLock lock(role_mu_);
  return last_step_down_;
}

bool HaServer::WithServer(const std::function<void(Server&)>& f) {
  MutexLock lock(role_mu_);
  if (server_ == nullptr) {
    return false;
  }
  f(*server_);
  return true;
}

void HaServer::OnElection(const ElectionEvent& event) {
  {
    MutexLock lock(events_mu_);
    if (event.kind == ElectionEvent::Kind::kElected) {
      elected_fence_ = event.fence_revision;
    } else {
      // Every write of the term is refused from now on, before the role thread even
      // starts to stop its Server (TermStore).
      ended_fence_->store(elected_fence_);
    }
    events_.push_back(event);
  }
  events_cv_.NotifyAll();
}

void HaServer::RoleLoop() {
  for (;;) {
    ElectionEvent event;
    {
      MutexLock lock(events_mu_);
      events_cv_.WaitFor(events_mu_, std::chrono::milliseconds(kHealthCheckMs),
                         [this]() REQUIRES(events_mu_) { return stopping_ || !events_.empty(); });
      if (events_.empty()) {
        if (stopping_) {
          return;  // nothing left to apply
        }
        lock.Unlock();
        CheckHealth();
        continue;
      }
      event = std::move(events_.front());
      events_.pop_front();
    }
    if (event.kind == ElectionEvent::Kind::kElected) {
      BecomeLeader(event.fence_revision);
    } else {
      BecomeFollower(event.why);
    }
  }
}

void HaServer::CheckHealth() {
  bool failed = false;
  {
    MutexLock lock(role_mu_);
    failed = server_ != nullptr && !server_->controller().healthy();
  }
  if (failed) {
    // A commit failed (etcd timed out, lost an answer): the controller refuses work until
    // a restart. A new term recovers from the store instead, here or on another controller.
    election_->StepDown("the state store failed a write; a new term recovers from it");
  }
}

void HaServer::BecomeLeader(int64_t fence) {
  StopFront();
  ServerOptions so = options_.server;
  so.port = port_;
  so.leader_url = url_;
  LeaderElection* election = election_.get();
  auto open = options_.open_store;
  std::shared_ptr<const std::atomic<int64_t>> ended = ended_fence_;
  so.open_store = [open, fence, election, ended]() -> StatusOr<std::unique_ptr<Store>> {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, open(fence, [election] {
      election->StepDown("fenced: the store refused a write of this term (another controller leads)");
    }));
    return std::unique_ptr<Store>(std::make_unique<TermStore>(std::move(store), fence, ended));
  };
  StatusOr<std::unique_ptr<Server>> server = Server::Create(std::move(so), catalog_);
  Status started = server.ok() ? (*server)->Start() : server.status();
  if (!started.ok()) {
    if (server.ok()) {
      (*server)->Stop();
    }
    const std::string why = "could not start leading: " + started.message();
    std::cerr << "tessera server: " << why << "\n";
    {
      MutexLock lock(role_mu_);
      last_step_down_ = why;
    }
    election_->StepDown(why);  // its kLost brings the front back
    return;
  }
  std::cerr << "tessera server: leading (term fence " << fence << ") on " << url_ << "\n";
  MutexLock lock(role_mu_);
  server_ = std::move(server.value());
}

void HaServer::BecomeFollower(const std::string& why) {
  std::unique_ptr<Server> server;
  {
    MutexLock lock(role_mu_);
    server = std::move(server_);
    if (server != nullptr) {
      last_step_down_ = why;
    }
  }
  if (server != nullptr) {
    std::cerr << "tessera server: stepping down: " << why << "\n";
    server->Stop();
  }
  // Only now may another controller lead: this one answers no agent any more.
  election_->ReleaseEndedTerm();
  {
    MutexLock lock(events_mu_);
    if (stopping_) {
      return;
    }
  }
  Status s = StartFront();
  if (!s.ok()) {
    std::cerr << "tessera server: " << s.message() << "\n";
  }
}

Status HaServer::StartFront() {
  if (front_ != nullptr) {
    return Status::Ok();
  }
  auto front = std::make_unique<httplib::Server>();
  LeaderElection* election = election_.get();
  const std::string self = url_;
  auto health = [election, self](const httplib::Request&, httplib::Response& res) {
    const std::string leader = election->leader();
    SendJson(res, {{"status", "ok"}, {"role", "follower"}, {"leader", leader == self ? "" : leader}},
             200);
  };
  auto follow = [election, self](const httplib::Request& req, httplib::Response& res) {
    const std::string leader = election->leader();
    // Our own URL as the leader is a term of ours that is ending or starting: no loop.
    if (!leader.empty() && leader != self) {
      res.set_header("Location", leader + req.target);
      res.set_header("X-Tessera-Leader", leader);
      SendJson(res, {{"error", {{"code", "redirect"}, {"message", "not the leader; the leader is " + leader}}}},
               307);
      return;
    }
    std::string why = election->last_error();
    why = why.empty() ? "an election is under way" : "the store cannot be reached: " + why;
    res.set_header("Retry-After", "1");
    SendError(res, UnavailableError("no leader: " + why));
  };
  // SO_REUSEADDR alone, as the Server's socket has: connections this front leaves in
  // TIME_WAIT would otherwise (with the library's default SO_REUSEPORT) keep the leader's
  // Server from binding the port for a minute.
  front->set_socket_options([](socket_t fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  front->Get("/healthz", health);
  const char* any = "/.*";
  front->Get(any, follow);
  front->Post(any, follow);
  front->Put(any, follow);
  front->Delete(any, follow);
  front->Patch(any, follow);
  front->Options(any, follow);
  if (!front->bind_to_port(options_.server.host.c_str(), port_)) {
    return UnavailableError("cannot listen on " + options_.server.host + ":" +
                            std::to_string(port_));
  }
  httplib::Server* raw = front.get();
  front_thread_ = std::thread([raw] { raw->listen_after_bind(); });
  // stop() does nothing until the loop has started (see Server::Start).
  for (int i = 0; i < 5000 && !raw->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  front_ = std::move(front);
  return Status::Ok();
}

void HaServer::StopFront() {
  if (front_ == nullptr) {
    return;
  }
  front_->stop();
  if (front_thread_.joinable()) {
    front_thread_.join();
  }
  front_.reset();
}

}  // namespace tessera
