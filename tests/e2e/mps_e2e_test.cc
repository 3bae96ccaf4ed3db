// Two tenants' shares on one shared GPU with managed MPS, through real processes: a
// `tessera server`, a root `tessera agent` on a fake shared A100 whose MPS is the fake
// nvidia-cuda-mps-control (src/agent/testing), and share tasks that run as their
// tenants' uids and connect to it as MPS clients (the fake's --client). The fake plays
// NVIDIA's legacy rule, one server per GPU for one uid at a time: a client of a second
// uid while the first uid's clients run is logged as a violation (and made to wait).
//
// Single-user MPS (label mps=on): the controller must keep tenant B's share pending
// until tenant A's has ended, so the fake sees no violation. Multi-user MPS (the agent's
// --mps-multi-user, with a fake that plays multi-user MPS): both run at once.
// Needs root (tasks start as the tenants' uids); skipped otherwise.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

#ifndef TESSERA_FAKE_MPS_CONTROL
#error "TESSERA_FAKE_MPS_CONTROL must name the fake nvidia-cuda-mps-control (set by CMake)"
#endif

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class MpsTenantsTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "mps"; }

  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: tasks start as the tenants' uids";
    }
    ServerAndAgentsTest::SetUp();
    // Copied into the 0711 test directory: tasks of the tenants' uids run it.
    fake_ = dir_ + "/fake-nvidia-cuda-mps-control";
    std::filesystem::copy_file(TESSERA_FAKE_MPS_CONTROL, fake_);
    ASSERT_EQ(::chmod(fake_.c_str(), 0755), 0);
    token_a_ = TenantToken("team-a");
    token_b_ = TenantToken("team-b");
    ASSERT_FALSE(token_a_.empty() || token_b_.empty());
  }

  std::string TenantToken(const std::string& tenant) {
    auto r = ApiClient(url_, admin_)
                 .Post("/v1/tenants", json({{"name", tenant}}).dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << "POST /v1/tenants " << tenant << ": " << (r ? r->body : "no answer");
      return "";
    }
    return json::parse(r->body).value("token", "");
  }

  // A 0.25 share of tenant `queue` that is an MPS client for `seconds`.
  uint64_t SubmitShare(const std::string& token, const std::string& queue, int seconds) {
    json spec = {{"name", "share-" + queue},
                 {"queue", queue},
                 {"command", "exec '" + fake_ + "' --client sleep " + std::to_string(seconds)},
                 {"resources", {{"gpus", 1}, {"gpu_fraction", 0.25}, {"cpu", "0.1"}}}};
    auto r = ApiClient(url_, token).Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << "POST /v1/jobs: " << (r ? r->body : "no answer");
      return 0;
    }
    return json::parse(r->body).value("id", uint64_t{0});
  }

  std::string StateOf(uint64_t id) { return Job(id).value("state", ""); }

  // Both jobs ended; true when both succeeded.
  bool BothSucceed(uint64_t a, uint64_t b) {
    auto ended = [&](uint64_t id) {
      const std::string s = StateOf(id);
      return s == "succeeded" || s == "failed" || s == "cancelled";
    };
    EXPECT_TRUE(WaitFor([&] { return ended(a) && ended(b); }, 60s))
        << StateOf(a) << " " << StateOf(b);
    return StateOf(a) == "succeeded" && StateOf(b) == "succeeded";
  }

  // The fake MPS server's client log of GPU 0 on agent `node`.
  std::string ClientsLog(const std::string& node) {
    return Process::ReadFile(dir_ + "/agent-" + node + "/mps/0/pipe/fake-mps/clients.log");
  }

  std::string fake_, token_a_, token_b_;
};

// The uids of the clients that connected, in order.
std::vector<std::string> ConnectedUids(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t uid = line.find(" uid=");
    if (line.ends_with(" connected") && uid != std::string::npos) {
      out.push_back(line.substr(uid + 5, line.find(' ', uid + 5) - uid - 5));
    }
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST_F(MpsTenantsTest, SingleUserMpsNeverSeesTwoTenantsClientsAtOnce) {
  StartAgent("n", "1xA100-80GB:shared", {"--mps-control", fake_, "--stop-kills-tasks",
                                         "--no-cgroups"});
  const uint64_t a = SubmitShare(token_a_, "team-a", 3);
  ASSERT_TRUE(WaitFor([&] { return StateOf(a) == "running"; }, 20s)) << StateOf(a);
  const uint64_t b = SubmitShare(token_b_, "team-b", 1);
  ASSERT_NE(b, 0u);
  EXPECT_TRUE(BothSucceed(a, b));
  const std::string log = ClientsLog("n");
  EXPECT_EQ(Count(log, "violation"), 0u) << log;
  EXPECT_EQ(Count(log, " connected"), 2u) << log;
  const std::vector<std::string> uids = ConnectedUids(log);
  ASSERT_EQ(uids.size(), 2u) << log;
  EXPECT_NE(uids[0], uids[1]) << log;  // each tenant's own uid
  // B connected only after A had gone.
  EXPECT_LT(log.find(" disconnected"), log.rfind(" connected")) << log;
}

TEST_F(MpsTenantsTest, MultiUserMpsRunsBothTenantsSharesTogether) {
  // The node's MPS really serves several users (the fake's multi-user mode), and the
  // admin says so with --mps-multi-user.
  const std::string multi = dir_ + "/multi-user-mps-control";
  std::ofstream(multi) << "#!/bin/sh\nFAKE_MPS_MULTI_USER=1 exec '" << fake_ << "' \"$@\"\n";
  ASSERT_EQ(::chmod(multi.c_str(), 0755), 0);
  StartAgent("n", "1xA100-80GB:shared",
             {"--mps-control", multi, "--mps-multi-user", "--stop-kills-tasks", "--no-cgroups"});
  bool labelled = false;
  for (const json& n : Get("/v1/nodes").value("nodes", json::array())) {
    labelled |= n.value("labels", json::object()).value("mps-multi-user", "") == "on";
  }
  EXPECT_TRUE(labelled) << Get("/v1/nodes").dump();
  const uint64_t a = SubmitShare(token_a_, "team-a", 3);
  const uint64_t b = SubmitShare(token_b_, "team-b", 3);
  ASSERT_TRUE(WaitFor([&] { return StateOf(a) == "running" && StateOf(b) == "running"; }, 20s))
      << StateOf(a) << " " << StateOf(b);
  EXPECT_TRUE(BothSucceed(a, b));
  const std::string log = ClientsLog("n");
  EXPECT_EQ(Count(log, "violation"), 0u) << log;
  EXPECT_EQ(Count(log, " connected"), 2u) << log;
  const std::vector<std::string> uids = ConnectedUids(log);
  ASSERT_EQ(uids.size(), 2u) << log;
  EXPECT_NE(uids[0], uids[1]) << log;  // each tenant's own uid
  // Side by side: both connected before either left.
  EXPECT_GT(log.find(" disconnected"), log.rfind(" connected")) << log;
}

}  // namespace
}  // namespace tessera::e2e
