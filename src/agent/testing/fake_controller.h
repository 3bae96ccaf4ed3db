// A loopback stand-in for the controller in agent tests: it answers register and
// heartbeat, keeps every request it receives, and answers heartbeats with what the
// test queued (then empty answers).
// Thread safety: the accessors may be called while the server thread answers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"

namespace tessera {

class FakeController {
 public:
  using Json = nlohmann::json;

  FakeController() {
    server_.Post("/v1/agents/register", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      registrations_.push_back(Json::parse(req.body, nullptr, false));
      res.set_content(ToJson(register_answer_).dump(), "application/json");
    });
    server_.Post("/v1/agents/heartbeat",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   if (fail_next_) {
                     fail_next_ = false;
                     res.status = 503;
                     res.set_content(R"({"error":"busy"})", "application/json");
                     return;
                   }
                   heartbeats_.push_back(Json::parse(req.body, nullptr, false));
                   HeartbeatResponse answer;
                   if (!answers_.empty()) {
                     answer = answers_.front();
                     answers_.pop_front();
                   }
                   res.set_content(ToJson(answer).dump(), "application/json");
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
    std::lock_guard<std::mutex> lock(mu_);
    answers_.push_back(std::move(answer));
  }
  // The answer to the next heartbeat: this one launch.
  void AnswerWithLaunch(TaskLaunch launch) {
    HeartbeatResponse answer;
    answer.launch.push_back(std::move(launch));
    Answer(std::move(answer));
  }
  void AnswerRegistrations(RegisterResponse answer) {
    std::lock_guard<std::mutex> lock(mu_);
    register_answer_ = std::move(answer);
  }
  // The next heartbeat gets 503.
  void FailNext() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = true;
  }
  std::vector<Json> heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }
  std::vector<Json> registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  Json last() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_.empty() ? Json() : heartbeats_.back();
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Json> heartbeats_;
  std::vector<Json> registrations_;
  std::deque<HeartbeatResponse> answers_;
  RegisterResponse register_answer_;
  bool fail_next_ = false;
};

}  // namespace tessera
