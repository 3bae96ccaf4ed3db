// `tessera whatif` against a small live server in process (loopback, ephemeral port):
// a node played by the test runs three short jobs, then the command fetches the
// history with the admin token and prints the comparison; and its errors.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/job_codec.h"
#include "cli/whatif_command.h"
#include "server/controller.h"
#include "server/http/server_fixture.h"

namespace tessera {
namespace {

class WhatIfCommandTest : public ServerFixture {
 protected:
  WhatIfCommandTest() : ServerFixture("whatif-cli") {}

  void Submit(const std::string& tenant, const std::string& name) {
    StatusOr<JobSubmission> job = ParseJobJson(
        R"({"name": ")" + name + R"(", "command": ["true"], "resources": {"gpus": 2}})",
        GpuCatalog::Default());
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    auto out = server_->controller().intake().Submit(Principal{Role::kTenant, tenant, tenant},
                                                     std::move(job).value(), "");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }

  // A node of 4 GPUs runs three 2-GPU jobs (one waits), each for about 30 ms.
  void RunThreeJobs() {
    const GpuCatalog& catalog = GpuCatalog::Default();
    RegisterRequest reg;
    reg.agent_id = "agent-1";
    reg.inventory.spec = MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024),
                                         catalog.Find("H100-80GB").value(), 4,
                                         SharingMode::kExclusive);
    for (int g = 0; g < 4; ++g) {
      reg.inventory.gpu_uuids.push_back("GPU-" + std::to_string(g));
      reg.inventory.mig_instances.emplace_back();
    }
    ASSERT_TRUE(server_->controller().Register(reg, "127.0.0.1").ok());
    Submit("team-a", "a1");
    Submit("team-a", "a2");
    Submit("team-b", "b1");
    std::map<uint64_t, std::pair<TaskKey, std::chrono::steady_clock::time_point>> running;
    int exited = 0;
    for (int i = 0; i < 500 && exited < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      HeartbeatRequest hb{"n1", "agent-1", {}, {}};
      const auto now = std::chrono::steady_clock::now();
      for (auto it = running.begin(); it != running.end();) {
        TaskReport r;
        r.key = it->second.first;
        if (now - it->second.second > std::chrono::milliseconds(30)) {
          r.state = TaskState::kExited;
          ++exited;
          it = running.erase(it);
        } else {
          ++it;
        }
        hb.tasks.push_back(r);
      }
      auto resp = server_->controller().Heartbeat(hb);
      ASSERT_TRUE(resp.ok()) << resp.status().ToString();
      for (const TaskLaunch& l : resp->launch) {
        running.emplace(l.key.job, std::make_pair(l.key, now));
      }
    }
    ASSERT_EQ(exited, 3);
  }

  ClientConfig Config(const std::string& token) const {
    ClientConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(server_->port());
    c.token = token;
    return c;
  }
};

TEST_F(WhatIfCommandTest, ComparesTheRecordedRunWithAnotherPolicy) {
  RunThreeJobs();
  WhatIfCommandOptions o;
  o.policy = "fifo";
  o.since = "1h";
  o.page_size = 2;  // two pages
  std::ostringstream out, err;
  ASSERT_EQ(RunWhatIfCommand(Config(server_->admin_token()), o, SystemClock(), out, err), 0)
      << err.str();
  std::cout << out.str();
  EXPECT_NE(out.str().find("What-if over 3 jobs on 1 nodes (4 GPUs)"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("[3] fifo"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("tenant team-b"), std::string::npos) << out.str();

  o.json = true;
  std::ostringstream jout, jerr;
  ASSERT_EQ(RunWhatIfCommand(Config(server_->admin_token()), o, SystemClock(), jout, jerr), 0)
      << jerr.str();
  nlohmann::json j = nlohmann::json::parse(jout.str());
  EXPECT_EQ(j["replayed"], 3);
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_EQ(j["sides"][0]["label"], "actual");
  EXPECT_EQ(j["sides"][2]["label"], "fifo");
  for (const auto& side : j["sides"]) {
    EXPECT_EQ(side["jobs"], 3) << side.dump();
  }
  // The default queues give the teams quotas: finish-time fairness against static-vc.
  EXPECT_EQ(j["quotas"], true);
  int tenants = 0;
  for (const auto& g : j["groups"]) {
    if (g["kind"] == "tenant") {
      ++tenants;
      for (const auto& side : g["sides"]) {
        EXPECT_TRUE(side["rho"].is_number()) << g.dump();
      }
    }
  }
  EXPECT_EQ(tenants, 2);
  EXPECT_NE(out.str().find("RHO [1]"), std::string::npos) << out.str();
}

TEST_F(WhatIfCommandTest, ClearErrors) {
  auto run = [&](WhatIfCommandOptions o, const std::string& token, std::string* message) {
    std::ostringstream out, err;
    int code = RunWhatIfCommand(Config(token), o, SystemClock(), out, err);
    *message = err.str();
    return code;
  };
  std::string msg;
  WhatIfCommandOptions o;
  o.policy = "fifo";
  // Nothing ran: the window is empty.
  EXPECT_EQ(run(o, server_->admin_token(), &msg), 2);
  EXPECT_NE(msg.find("no job to replay"), std::string::npos) << msg;

  WhatIfCommandOptions unknown = o;
  unknown.policy = "no-such-policy";
  EXPECT_EQ(run(unknown, server_->admin_token(), &msg), 2);
  EXPECT_NE(msg.find("--policy"), std::string::npos) << msg;

  WhatIfCommandOptions bad_since = o;
  bad_since.since = "last tuesday";
  EXPECT_EQ(run(bad_since, server_->admin_token(), &msg), 2);
  EXPECT_NE(msg.find("--since"), std::string::npos) << msg;

  WhatIfCommandOptions backwards = o;
  backwards.since = "1h";
  backwards.until = "2h";
  EXPECT_EQ(run(backwards, server_->admin_token(), &msg), 2);
  EXPECT_NE(msg.find("window is empty"), std::string::npos) << msg;

  WhatIfCommandOptions nothing;
  EXPECT_EQ(run(nothing, server_->admin_token(), &msg), 2);
  EXPECT_NE(msg.find("--policy, --queues"), std::string::npos) << msg;

  // The history is the admin's.
  EXPECT_EQ(run(o, team_a_, &msg), 4);
}

}  // namespace
}  // namespace tessera
