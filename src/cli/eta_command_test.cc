// `tessera jobs --start` and `tessera show` against a live server in process (loopback,
// ephemeral port): a 4-GPU node runs one 4-GPU job and two wait; the controller's
// background ETA refresh gives them positions and ETAs, which the commands print.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "api/job_codec.h"
#include "base/time_format.h"
#include "cli/cluster_commands.h"
#include "server/controller.h"
#include "server/http/server_fixture.h"
#include "server/services/job_reads.h"

namespace tessera {
namespace {

class EtaCommandTest : public ServerFixture {
 protected:
  EtaCommandTest() : ServerFixture("eta-cli") {}

  void Tune(ServerOptions& options) override { options.controller.eta.interval = 20'000; }

  uint64_t Submit(const std::string& name) {
    StatusOr<JobSubmission> job = ParseJobJson(
        R"({"name": ")" + name +
            R"(", "command": ["true"], "runtime_limit": "1h", "resources": {"gpus": 4}})",
        GpuCatalog::Default());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    auto out = server_->controller().intake().Submit(Principal{Role::kTenant, "team-a", "a"},
                                                     std::move(job).value(), "");
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->jobs.front().value() : 0;
  }

  nlohmann::json View(uint64_t id) {
    auto v =
        JobReads(server_->controller()).GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : nlohmann::json::object();
  }

  ClientConfig Config() const {
    ClientConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(server_->port());
    c.token = team_a_;
    return c;
  }
};

TEST_F(EtaCommandTest, JobsStartListsPendingJobsByPositionWithTheirEta) {
  RegisterRequest reg;
  reg.agent_id = "agent-1";
  reg.inventory.spec = MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024),
                                       GpuCatalog::Default().Find("H100-80GB").value(), 4,
                                       SharingMode::kExclusive);
  for (int g = 0; g < 4; ++g) {
    reg.inventory.gpu_uuids.push_back("GPU-" + std::to_string(g));
    reg.inventory.mig_instances.emplace_back();
  }
  ASSERT_TRUE(server_->controller().Register(reg, "127.0.0.1").ok());
  const uint64_t running = Submit("first");
  const uint64_t second = Submit("second");
  const uint64_t third = Submit("third");
  // The loop starts the first job and the refresher (every 20 ms after a cycle) gives
  // the two others ETAs; bounded wait.
  bool ready = false;
  for (int i = 0; i < 500 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = View(running)["state"] == "running" && View(third)["eta"].is_string();
  }
  ASSERT_TRUE(ready) << View(third).dump();
  const nlohmann::json a = View(second), b = View(third);
  EXPECT_EQ(a["position"], 1);
  EXPECT_EQ(b["position"], 2);
  // The three jobs look alike to the predictor: the second starts when the first ends,
  // the third one predicted runtime later.
  const Micros started = ParseRfc3339(View(running)["start_time"].get<std::string>()).value();
  const Micros eta2 = ParseRfc3339(a["eta"].get<std::string>()).value();
  const Micros eta3 = ParseRfc3339(b["eta"].get<std::string>()).value();
  EXPECT_GT(eta2, started);
  EXPECT_LE(eta2 - started, 3600LL * 1'000'000);  // within the limit
  EXPECT_NEAR(static_cast<double>(eta3 - eta2), static_cast<double>(eta2 - started), 60e6);
  EXPECT_EQ(b["blocking"]["kind"], "gpus");

  JobsOptions o;
  o.start = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunJobs(Config(), o, SystemClock(), out, err), 0) << err.str();
  const std::string table = out.str();
  EXPECT_EQ(table.rfind("POS  QPOS  ID  NAME    QUEUE   GPUS  ETA", 0), 0u) << table;
  const size_t row2 = table.find("  1     1  " + std::to_string(second) + "   second");
  const size_t row3 = table.find("  2     2  " + std::to_string(third) + "   third");
  EXPECT_NE(row2, std::string::npos) << table;
  EXPECT_NE(row3, std::string::npos) << table;
  EXPECT_LT(row2, row3) << table;
  EXPECT_NE(table.find("Z (in "), std::string::npos) << table;
  EXPECT_NE(table.find("  GPUs\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("first"), std::string::npos) << table;  // running: not listed

  ShowOptions show;
  show.job = std::to_string(third);
  std::ostringstream sout, serr;
  ASSERT_EQ(RunShow(Config(), show, SystemClock(), sout, serr), 0) << serr.str();
  const std::string text = sout.str();
  const size_t eta_line = text.find("  ETA:");
  ASSERT_NE(eta_line, std::string::npos) << text;
  EXPECT_EQ(text.find(b["eta"].get<std::string>()), text.find_first_not_of(' ', eta_line + 6))
      << text;
  EXPECT_NE(text.find(" 2 (in its queue: 2)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  Blocked by:"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera
