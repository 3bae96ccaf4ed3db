// A fake controller for the CLI's tests: an httplib server on 127.0.0.1 that serves
// canned JSON and records each request, and helpers around it.
// Thread safety: FakeController records requests under its own lock.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/time_format.h"
#include "cli/cluster_commands.h"

namespace tessera::cli_testing {

using nlohmann::json;

struct SeenRequest {
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> params;
  std::string authorization;
  std::string content_type;
  std::string idempotency_key;
  std::string body;

  std::string Param(const std::string& key) const {
    auto it = params.find(key);
    return it == params.end() ? "<absent>" : it->second;
  }
};

class FakeController {
 public:
  explicit FakeController(std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {
    port_ = server_->bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait (bounded) for it.
    for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(server_->is_running());
  }
  ~FakeController() {
    server_->stop();
    thread_.join();
  }

  // Serves `method` `pattern` with `handler`, recording each request first.
  void On(const std::string& method, const std::string& pattern,
          std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    auto wrapped = [this, handler](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        SeenRequest seen;
        seen.method = req.method;
        seen.path = req.path;
        seen.params.insert(req.params.begin(), req.params.end());
        seen.authorization = req.get_header_value("Authorization");
        seen.content_type = req.get_header_value("Content-Type");
        seen.idempotency_key = req.get_header_value("Idempotency-Key");
        seen.body = req.body;
        seen_.push_back(std::move(seen));
      }
      handler(req, res);
    };
    if (method == "GET") {
      server_->Get(pattern, wrapped);
    } else if (method == "POST") {
      server_->Post(pattern, wrapped);
    } else {
      server_->Put(pattern, wrapped);
    }
  }

  // Answers `method` `pattern` with `status` and a JSON `body`.
  void Reply(const std::string& method, const std::string& pattern, int status,
             const std::string& body) {
    On(method, pattern, [status, body](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content(body, "application/json");
    });
  }

  std::vector<SeenRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  ClientConfig Config(const std::string& scheme = "http") const {
    ClientConfig config;
    config.server = scheme + "://127.0.0.1:" + std::to_string(port_);
    config.token = "tok-123";
    config.connect_timeout_ms = 2000;
    config.read_timeout_ms = 10000;
    return config;
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<SeenRequest> seen_;
};

inline std::string Error(const std::string& code, const std::string& message) {
  return json{{"error", {{"code", code}, {"message", message}}}}.dump();
}

// 2026-11-29T21:10:00Z
inline ManualClock TestClock() { return ManualClock(*ParseRfc3339("2026-11-29T21:10:00Z")); }
// A port on 127.0.0.1 that refuses connections: bound (so nobody else takes it) but
// not listening.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ClosedPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};


// A running gang and a pending share, as GET /v1/jobs/{id} answers them.
inline const json kRunningJob = json::parse(R"({
  "id": 42, "name": "train-llama", "tenant": "team-a", "queue": "team-a", "state": "running",
  "priority": 5, "submit_time": "2026-11-29T21:00:00Z", "start_time": "2026-11-29T21:01:00Z",
  "end_time": null, "attempts": 2, "preemptions": 1, "exit_code": null, "reason": "",
  "gpus": 4, "gpu_milli": 4000, "replicas": 2, "checkpoint_dir": "/ckpt/42",
  "tasks": [
    {"index": 0, "node": "node-a", "state": "running", "exit_code": null, "gpus": [
      {"index": 0, "uuid": "GPU-a0", "model": "H100-80GB", "milli": 1000, "mig_profile": null},
      {"index": 1, "uuid": "GPU-a1", "model": "H100-80GB", "milli": 1000, "mig_profile": null}]},
    {"index": 1, "node": "node-b", "state": "running", "exit_code": null, "gpus": [
      {"index": 2, "uuid": "GPU-b2", "model": "H100-80GB", "milli": 1000, "mig_profile": null},
      {"index": 3, "uuid": "GPU-b3", "model": "H100-80GB", "milli": 1000, "mig_profile": null}]}],
  "spec": {"name": "train-llama", "command": ["torchrun", "train.py", "--note", "two words"],
           "replicas": 2, "resources": {"gpus": 2, "gpu_model": "H100-80GB"},
           "checkpoint": {"interval": "30m"}}
})");

inline const json kPendingJob = json::parse(R"js({
  "id": 43, "name": "a-very-long-job-name-that-goes-on-and-on", "tenant": "team-b",
  "queue": "team-b", "state": "pending", "priority": 0, "submit_time": "2026-11-29T20:00:00Z",
  "start_time": null, "end_time": null, "attempts": 0, "preemptions": 0, "exit_code": null,
  "reason": "queue team-b is over its GPU quota (nominal 4, borrowing limit 0)",
  "gpus": 1, "gpu_milli": 500, "replicas": 1, "checkpoint_dir": "", "tasks": [],
  "spec": {"command": ["python", "serve.py"], "resources": {"gpu_fraction": 0.5}}
})js");

}  // namespace tessera::cli_testing
