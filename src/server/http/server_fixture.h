// Test-only fixtures: a scratch directory per test, and a controller with its HTTP
// server in process on loopback (an ephemeral port, no fsync, a long scheduling cycle)
// with a token for tenants "team-a" and "team-b".
// Thread safety: one test thread.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "server/http/server.h"

namespace tessera {

// dir_: a fresh directory /tmp/tessera-NAME-XXXXXX, removed after the test.
class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(std::string name) : name_(std::move(name)) {}

  void SetUp() override {
    std::string tmpl = "/tmp/tessera-" + name_ + "-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;

 private:
  std::string name_;
};

class ServerFixture : public ScratchDirTest {
 protected:
  explicit ServerFixture(std::string name) : ScratchDirTest(std::move(name)) {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    StartServer();
  }
  void TearDown() override {
    server_.reset();
    ScratchDirTest::TearDown();
  }

  // Changes to the options of every (re)started server.
  virtual void Tune(ServerOptions& /*options*/) {}

  // Starts (again) the server on dir_, as after a restart.
  void StartServer() {
    ServerOptions o;
    o.data_dir = dir_;
    o.port = 0;
    o.fsync = false;
    o.threads = 4;
    o.controller.cycle_interval = 10'000;
    Tune(o);
    StatusOr<std::unique_ptr<Server>> s = Server::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    ASSERT_TRUE(server_->Start().ok());
    if (team_a_.empty()) {
      team_a_ = server_->CreateTenantToken("team-a", "a").value();
      team_b_ = server_->CreateTenantToken("team-b", "b").value();
    }
  }

  // A client of the server, with `token` as bearer unless it is empty.
  httplib::Client Client(const std::string& token) {
    httplib::Client c("127.0.0.1", server_->port());
    if (!token.empty()) {
      c.set_bearer_token_auth(token.c_str());
    }
    return c;
  }

  std::unique_ptr<Server> server_;
  std::string team_a_, team_b_;
};

}  // namespace tessera
