// Shared by the end-to-end tests: scratch directories, `tessera server` and
// `tessera agent` processes on loopback, and clients of their HTTP API.
// Thread safety: stateless functions; one owner per Process.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "e2e/process.h"

namespace tessera::e2e {

// A fresh directory /tmp/tessera-NAME-XXXXXX, mode 0711: tasks run as their tenants'
// uids and must pass through it to the data directories. "" on failure.
inline std::string MakeTestDir(const std::string& name) {
  std::string tmpl = "/tmp/tessera-" + name + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr || ::chmod(tmpl.c_str(), 0711) != 0) {
    return "";
  }
  return tmpl;
}

// Removes `dir` after a test that passed; keeps it for inspection after one that failed.
inline void RemoveTestDir(const std::string& dir, bool failed) {
  if (!failed) {
    std::filesystem::remove_all(dir);
  } else {
    std::cerr << "kept " << dir << " for inspection\n";
  }
}

// The token in a token file (without its newline); "" when there is none.
inline std::string ReadToken(const std::string& path) { return Trim(Process::ReadFile(path)); }

// A client of the API at `url`, with `token` as bearer unless it is empty.
inline httplib::Client ApiClient(const std::string& url, const std::string& token,
                                 time_t read_timeout_s = 30) {
  httplib::Client c(url);
  if (!token.empty()) {
    c.set_bearer_token_auth(token.c_str());
  }
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(read_timeout_s, 0);
  return c;
}

// GET `path` as JSON; an empty object unless the answer is 200.
inline nlohmann::json GetJson(const std::string& url, const std::string& token,
                              const std::string& path, time_t read_timeout_s = 30) {
  auto r = ApiClient(url, token, read_timeout_s).Get(path.c_str());
  if (!r || r->status != 200) {
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(r->body, nullptr, false);
}

// Polls GET /healthz until it answers 200 or `timeout` passes.
inline bool WaitHealthy(const std::string& url, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        httplib::Client c(url);
        c.set_connection_timeout(0, 200'000);
        auto r = c.Get("/healthz");
        return r && r->status == 200;
      },
      timeout);
}

// Whether GET /v1/nodes (as `token`) shows node `name` up.
inline bool NodeUp(const std::string& url, const std::string& token, const std::string& name) {
  for (const nlohmann::json& n :
       GetJson(url, token, "/v1/nodes").value("nodes", nlohmann::json::array())) {
    if (n.value("name", "") == name && n.value("state", "") == "up") {
      return true;
    }
  }
  return false;
}

// `tessera server` on DATA, listening on loopback PORT, with `extra` flags; its output
// is appended to `log`.
inline std::unique_ptr<Process> StartServerProcess(const std::string& data, int port,
                                                   const std::vector<std::string>& extra,
                                                   const std::string& log) {
  std::vector<std::string> argv = {TESSERA_BINARY, "server", "--data", data,
                                   "--listen", "127.0.0.1:" + std::to_string(port)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<Process>(argv, log);
}

// `tessera agent` for node `name` of the controller at `url` (joined with the join token
// under `server_data`), on DATA with fake GPUs `gpus`, a 100 ms heartbeat, 64 CPUs and
// 256 GiB, and `extra` flags; its output is appended to `log`.
inline std::unique_ptr<Process> StartAgentProcess(const std::string& url,
                                                  const std::string& server_data,
                                                  const std::string& name,
                                                  const std::string& data,
                                                  const std::string& gpus,
                                                  const std::vector<std::string>& extra,
                                                  const std::string& log) {
  std::vector<std::string> argv = {TESSERA_BINARY, "agent",
                                   "--server",     url,
                                   "--token-file", server_data + "/join.token",
                                   "--node",       name,
                                   "--data",       data,
                                   "--fake-gpus",  gpus,
                                   "--heartbeat",  "100ms",
                                   "--cpu",        "64",
                                   "--memory",     "256GiB"};
  // No containers unless the test asks: each such agent would probe Podman and write a
  // CDI spec into the machine's /var/run/cdi.
  if (std::find(extra.begin(), extra.end(), "--containers") == extra.end()) {
    argv.insert(argv.end(), {"--containers", "off"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<Process>(argv, log);
}

// Ends `p` with SIGTERM and expects it to exit with status 0 within `timeout`; `what`
// names it in a failure.
inline void ExpectCleanStop(Process& p, std::chrono::milliseconds timeout,
                            const std::string& what = "") {
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(timeout), std::optional<int>(0))
      << (what.empty() ? "" : what + ":\n") << p.Output();
}

// Stops every agent, then the server if it still runs (each must exit 0), and drops them.
inline void StopAgentsThenServer(std::map<std::string, std::unique_ptr<Process>>& agents,
                                 std::unique_ptr<Process>& server) {
  for (auto& [name, agent] : agents) {
    ExpectCleanStop(*agent, std::chrono::seconds(15), name);
  }
  agents.clear();
  if (server && server->running()) {
    ExpectCleanStop(*server, std::chrono::seconds(15));
  }
  server.reset();
}

// A test with a `tessera server` of its own (embedded queues) in a scratch directory, and
// agents it starts by name; everything is stopped and the directory removed (kept on
// failure) afterwards. `Prefix()` names the scratch directory.
class ServerAndAgentsTest : public ::testing::Test {
 protected:
  virtual std::string Prefix() const = 0;

  void SetUp() override {
    dir_ = MakeTestDir(Prefix());
    ASSERT_FALSE(dir_.empty());
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    server_ = StartServerProcess(dir_ + "/server", port_, {}, dir_ + "/server.log");
    ASSERT_TRUE(WaitHealthy(url_, std::chrono::seconds(20))) << server_->Output();
    admin_ = ReadToken(dir_ + "/server/admin.token");
    ASSERT_FALSE(admin_.empty());
  }
  void TearDown() override {
    StopAgentsThenServer(agents_, server_);
    RemoveTestDir(dir_, HasFailure());
  }

  // Starts agent `name` with fake GPUs `gpus` and `extra` flags; returns once it is up.
  void StartAgent(const std::string& name, const std::string& gpus,
                  const std::vector<std::string>& extra = {}) {
    agents_[name] = StartAgentProcess(url_, dir_ + "/server", name, dir_ + "/agent-" + name,
                                      gpus, extra, dir_ + "/agent-" + name + ".log");
    ASSERT_TRUE(WaitFor([&] { return NodeUp(url_, admin_, name); }, std::chrono::seconds(20)))
        << agents_[name]->Output();
  }

  nlohmann::json Get(const std::string& path) { return GetJson(url_, admin_, path); }
  nlohmann::json Job(uint64_t id) { return Get("/v1/jobs/" + std::to_string(id)); }

  std::string dir_;
  int port_ = 0;
  std::string url_;
  std::string admin_;
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

}  // namespace tessera::e2e
