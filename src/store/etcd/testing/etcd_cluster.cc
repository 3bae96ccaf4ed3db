// EtcdCluster: see etcd_cluster.h.
#include "store/etcd/testing/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A port the kernel considers free now on 127.0.0.1.
StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return UnavailableError("socket failed");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return UnavailableError("cannot bind a free loopback port");
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

// `name` on PATH, "" when absent.
std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

// "" when the member on `port` answers GET /health with health true (it has a leader and
// a quorum read works), else why not. A fresh connection each time: a gRPC connection
// opened before a member serves waits about 10 s once it does.
std::string Health(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return "socket failed";
  }
  timeval timeout{0, 500 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "connection refused";
  }
  const std::string request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[1024];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0 && answer.size() < 8192) {
      answer.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (answer.find("\"health\":\"true\"") != std::string::npos) {
    return "";
  }
  return answer.empty() ? "no answer to GET /health" : "unhealthy";
}

}  // namespace

StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(EtcdClusterOptions options) {
  if (options.members < 1) {
    return InvalidArgumentError("an etcd cluster needs at least one member");
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster(options));
  cluster->etcd_ = FindOnPath("etcd");
  if (cluster->etcd_.empty()) {
    return FailedPreconditionError(
        "etcd is not installed (no `etcd` on PATH): run scripts/setup.sh, which installs "
        "Debian's etcd-server and etcd-client");
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "tessera_etcd_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return UnavailableError("cannot make a temporary directory for etcd");
  }
  cluster->dir_ = pattern;
  for (int i = 0; i < options.members; ++i) {
    Member& m = cluster->members_.emplace_back();
    m.name = "m" + std::to_string(i);
    m.data_dir = cluster->dir_ + "/" + m.name + ".etcd";
    m.log = cluster->dir_ + "/" + m.name + ".log";
    TESSERA_ASSIGN_OR_RETURN(m.client_port, FreePort());
    TESSERA_ASSIGN_OR_RETURN(m.peer_port, FreePort());
    cluster->initial_cluster_ += (i == 0 ? "" : ",") + m.name + "=" + Url(m.peer_port);
  }
  std::vector<int> all;
  for (int i = 0; i < options.members; ++i) {
    TESSERA_RETURN_IF_ERROR(cluster->Spawn(cluster->members_[static_cast<size_t>(i)]));
    all.push_back(i);
  }
  TESSERA_RETURN_IF_ERROR(cluster->WaitServing(all));
  return cluster;
}

EtcdCluster::~EtcdCluster() { Stop(); }

Status EtcdCluster::Spawn(Member& m) {
  std::vector<std::string> args = {
      etcd_,
      "--name",
      m.name,
      "--data-dir",
      m.data_dir,
      "--listen-client-urls",
      Url(m.client_port),
      "--advertise-client-urls",
      Url(m.client_port),
      "--listen-peer-urls",
      Url(m.peer_port),
      "--initial-advertise-peer-urls",
      Url(m.peer_port),
      "--initial-cluster",
      initial_cluster_,
      "--initial-cluster-state",
      "new",
      "--initial-cluster-token",
      "tessera-test-" + std::to_string(getpid()),
      "--heartbeat-interval",
      "50",
      "--election-timeout",
      "500",
      "--max-txn-ops",
      "10000",
      "--max-request-bytes",
      "33554432",
      "--logger",
      "zap",
      "--log-outputs",
      "stderr",
  };
  std::vector<char*> argv;
  for (std::string& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  const int log = open(m.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    return UnavailableError("cannot open " + m.log);
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return UnavailableError("fork failed");
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
      _exit(127);
    }
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log);
  m.pid = pid;
  return Status::Ok();
}

Status EtcdCluster::WaitServing(const std::vector<int>& which) {
  const auto until = Clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
  for (int i : which) {
    Member& m = members_[static_cast<size_t>(i)];
    std::string last = "not tried";
    for (;;) {
      int status = 0;
      if (m.pid > 0 && waitpid(m.pid, &status, WNOHANG) == m.pid) {
        m.pid = -1;
        return UnavailableError("etcd member " + m.name + " exited while starting; its log:\n" +
                                LogTail(i));
      }
      last = Health(m.client_port);
      if (last.empty()) {
        break;
      }
      if (Clock::now() >= until) {
        return UnavailableError("etcd member " + m.name + " did not serve within " +
                                std::to_string(options_.start_timeout_ms) + " ms (" + last +
                                "); its log:\n" + LogTail(i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

std::string EtcdCluster::Endpoints() const {
  std::string out;
  for (const std::string& endpoint : EndpointList()) {
    out += (out.empty() ? "" : ",") + endpoint;
  }
  return out;
}

std::vector<std::string> EtcdCluster::EndpointList() const {
  std::vector<std::string> out;
  for (const Member& m : members_) {
    out.push_back("127.0.0.1:" + std::to_string(m.client_port));
  }
  return out;
}

Status EtcdCluster::Kill(int i) {
  if (i < 0 || i >= members()) {
    return InvalidArgumentError("no etcd member " + std::to_string(i));
  }
  Member& m = members_[static_cast<size_t>(i)];
  if (m.pid <= 0) {
    return FailedPreconditionError("etcd member " + m.name + " is not running");
  }
  kill(m.pid, SIGKILL);
  int status = 0;
  waitpid(m.pid, &status, 0);
  m.pid = -1;
  return Status::Ok();
}

Status EtcdCluster::Restart(int i) {
  if (i < 0 || i >= members()) {
    return InvalidArgumentError("no etcd member " + std::to_string(i));
  }
  Member& m = members_[static_cast<size_t>(i)];
  if (m.pid > 0) {
    TESSERA_RETURN_IF_ERROR(Kill(i));
  }
  TESSERA_RETURN_IF_ERROR(Spawn(m));
  return WaitServing({i});
}

void EtcdCluster::Stop() {
  for (Member& m : members_) {
    if (m.pid > 0) {
      kill(m.pid, SIGKILL);
    }
  }
  for (Member& m : members_) {
    if (m.pid > 0) {
      int status = 0;
      waitpid(m.pid, &status, 0);
      m.pid = -1;
    }
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }
}

std::string EtcdCluster::LogTail(int i) const {
  std::ifstream in(members_[static_cast<size_t>(i)].log);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > 40) {
      lines.erase(lines.begin());
    }
  }
  std::string out;
  for (const std::string& l : lines) {
    out += l + "\n";
  }
  return out;
}

StatusOr<EtcdCluster*> SharedEtcdCluster() {
  static StatusOr<std::unique_ptr<EtcdCluster>>* cluster = nullptr;
  static std::unique_ptr<EtcdCluster> owned;  // stopped at exit
  if (cluster == nullptr) {
    cluster = new StatusOr<std::unique_ptr<EtcdCluster>>(EtcdCluster::Start());
    if (cluster->ok()) {
      owned = std::move(cluster->value());
    }
  }
  if (!cluster->ok()) {
    return cluster->status();
  }
  return owned.get();
}

}  // namespace tessera::testing
