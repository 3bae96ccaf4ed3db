// A loopback stand-in for the controller in agent tests: it answers register and
// heartbeat, keeps every request it receives, and answers heartbeats with what the
// test queued (then empty answers). Heartbeats come over HTTP (JSON), or over the agent
// channel when a FakeAgentChannel (agent/testing/fake_agent_channel.h) serves one for
// it: TakeHeartbeat is the controller's side of either, so that a test can run the same
// expectations against both transports.
// Thread safety: the accessors may be called while the server thread answers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "base/mutex.h"

namespace tessera {

class FakeController {
 public:
  using Json = nlohmann::json;

  FakeController() {
    server_.Post("/v1/agents/register", [this](const httplib::Request& req, httplib::Response& res) {
      MutexLock lock(mu_);
      registrations_.push_back(Json::parse(req.body, nullptr, false));
      res.set_content(ToJson(register_answer_).dump(), "application/json");
    });
    server_.Post("/v1/agents/heartbeat",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Json body = Json::parse(req.body, nullptr, false);
                   StatusOr<HeartbeatRequest> decoded = HeartbeatRequestFromJson(body);
                   std::optional<HeartbeatResponse> answer =
                       TakeHeartbeat(std::move(body), std::move(decoded));
                   if (!answer.has_value()) {
                     res.status = 503;
                     res.set_content(R"({"error":"busy"})", "application/json");
                     return;
                   }
                   res.set_content(ToJson(*answer).dump(), "application/json");
                 });
    register_answer_.node = "n1";
    register_answer_.heartbeat_interval_ms = 1000;
    // A stand-in stopped while an agent still holds a kept connection waits this long.
    server_.set_keep_alive_timeout(1);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FakeController() {
    server_.stop();
    thread_.join();
  }
  FakeController(const FakeController&) = delete;
  FakeController& operator=(const FakeController&) = delete;

  bool ok() const { return port_ > 0 && server_.is_running(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The answer to the next heartbeat (then empty answers).
  void Answer(HeartbeatResponse answer) {
    MutexLock lock(mu_);
    answers_.push_back(std::move(answer));
  }
  // The answer to the next heartbeat: this one launch.
  void AnswerWithLaunch(TaskLaunch launch) {
    HeartbeatResponse answer;
    answer.launch.push_back(std::move(launch));
    Answer(std::move(answer));
  }
  void AnswerRegistrations(RegisterResponse answer) {
    MutexLock lock(mu_);
    register_answer_ = std::move(answer);
  }
  // The next heartbeat gets 503 (on the channel: an answer with `error`).
  void FailNext() {
    MutexLock lock(mu_);
    fail_next_ = true;
  }
  std::vector<Json> heartbeats() {
    MutexLock lock(mu_);
    return heartbeats_;
  }
  std::vector<Json> registrations() {
    MutexLock lock(mu_);
    return registrations_;
  }
  Json last() {
    MutexLock lock(mu_);
    return heartbeats_.empty() ? Json() : heartbeats_.back();
  }
  // The heartbeats received, decoded (those that decode), over either transport.
  std::vector<HeartbeatRequest> requests() {
    MutexLock lock(mu_);
    return requests_;
  }
  // Registrations are answered with this agent channel port (0: none, HTTP only).
  void SetChannelPort(int port) {
    MutexLock lock(mu_);
    register_answer_.channel_port = port;
  }

  // The controller's side of one heartbeat, whichever transport carried it (`json`: as
  // received over HTTP, or the JSON encoding of what came over the channel; `decoded`:
  // what its codec made of it): keeps it and returns the next queued answer, or nothing
  // when FailNext asked it to fail (the heartbeat is then not kept).
  std::optional<HeartbeatResponse> TakeHeartbeat(Json json, StatusOr<HeartbeatRequest> decoded) {
    MutexLock lock(mu_);
    if (fail_next_) {
      fail_next_ = false;
      return std::nullopt;
    }
    if (decoded.ok()) {
      requests_.push_back(std::move(decoded).value());
    }
    heartbeats_.push_back(std::move(json));
    HeartbeatResponse answer;
    if (!answers_.empty()) {
      answer = answers_.front();
      answers_.pop_front();
    }
    return answer;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  Mutex mu_;
  std::vector<Json> heartbeats_ GUARDED_BY(mu_);
  std::vector<HeartbeatRequest> requests_ GUARDED_BY(mu_);
  std::vector<Json> registrations_ GUARDED_BY(mu_);
  std::deque<HeartbeatResponse> answers_ GUARDED_BY(mu_);
  RegisterResponse register_answer_ GUARDED_BY(mu_);
  bool fail_next_ GUARDED_BY(mu_) = false;
};

}  // namespace tessera
