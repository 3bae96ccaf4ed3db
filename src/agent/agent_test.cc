// Tests of the agent against a loopback stand-in for the controller, which answers
// register and heartbeat and keeps every heartbeat it receives. Fake GPUs, a manual
// clock for the telemetry interval, real task processes.
#include "agent/agent.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/testing/fake_controller.h"

namespace tessera {
namespace {

using Json = nlohmann::json;

constexpr Micros kInterval = 10'000'000;

class AgentTelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    char dir[] = "/tmp/tessera_agent_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Start(Micros telemetry_interval) {
    AgentOptions o;
    o.server_url = controller_.url();
    o.token = "join-token";
    o.node_name = "n1";
    o.data_dir = dir_;
    o.fake_gpus = "2xH100-80GB";
    o.use_cgroups = false;
    o.telemetry_interval = telemetry_interval;
    o.allow_root_tasks = true;  // this stand-in controller gives no uid
    o.clock = &clock_;
    auto agent = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
    Status registered = agent_->RunOnce();
    ASSERT_TRUE(registered.ok()) << registered.ToString();
    ASSERT_TRUE(controller_.heartbeats().empty());
  }

  // One heartbeat, which must succeed; returns what the controller received.
  Json Beat() {
    Status s = agent_->RunOnce();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return controller_.last();
  }

  static std::vector<GpuTelemetry> Gpus(const Json& heartbeat) {
    StatusOr<HeartbeatRequest> req = HeartbeatRequestFromJson(heartbeat);
    EXPECT_TRUE(req.ok()) << req.status().ToString();
    return req.ok() ? req->gpus : std::vector<GpuTelemetry>{};
  }

  void Fault(const std::string& line) {
    std::ofstream(dir_ + "/fake-faults", std::ios::app) << line << "\n";
  }

  FakeController controller_;
  ManualClock clock_{1'700'000'000'000'000};
  std::string dir_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTelemetryTest, HeartbeatsCarrySamplesOfTheFakeGpus) {
  Start(kInterval);
  Fault(R"({"gpu":0,"xid":79})");
  TaskLaunch launch;
  launch.key = {7, 0, 0};
  launch.job_name = "train";
  launch.command = {"sleep", "30"};
  launch.gpus = {1};
  launch.gpu_milli = 1000;
  controller_.Answer(HeartbeatResponse{{launch}, {}, false});

  // The first heartbeat: a sample, with the injected XID; both GPUs idle.
  Json hb = Beat();
  ASSERT_TRUE(hb.contains("gpus")) << hb.dump();
  std::vector<GpuTelemetry> gpus = Gpus(hb);
  ASSERT_EQ(gpus.size(), 2u);
  const NodeInventory& inv = agent_->inventory();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(gpus[i].index, static_cast<int>(i));
    EXPECT_EQ(gpus[i].uuid, inv.gpu_uuids[i]);
    EXPECT_FALSE(gpus[i].lost);
    EXPECT_EQ(gpus[i].util_pct, 0);
    EXPECT_EQ(gpus[i].fb_used_mib, 0);
    EXPECT_EQ(gpus[i].fb_free_mib, 81559);
    EXPECT_EQ(gpus[i].sm_clock_mhz, 210);
  }
  EXPECT_EQ(gpus[0].xid_count, 1);
  EXPECT_EQ(gpus[0].last_xid, 79);
  EXPECT_EQ(gpus[1].xid_count, 0);
  ASSERT_EQ(agent_->running_tasks(), 1u);

  // Within the interval: no new sample, no "gpus".
  hb = Beat();
  EXPECT_FALSE(hb.contains("gpus")) << hb.dump();

  // After it: GPU 1 runs the task.
  clock_.Advance(kInterval);
  gpus = Gpus(Beat());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_GE(gpus[1].util_pct, 60);
  EXPECT_LE(gpus[1].util_pct, 100);
  EXPECT_EQ(gpus[1].fb_used_mib, 81559 * 80 / 100);
  EXPECT_EQ(gpus[1].sm_clock_mhz, 1980);
  EXPECT_GT(gpus[1].power_mw, gpus[0].power_mw);
  EXPECT_GT(gpus[1].temp_c, gpus[0].temp_c);
  EXPECT_EQ(gpus[0].util_pct, 0);
  EXPECT_EQ(gpus[0].xid_count, 1);  // counted once

  // The task ends: GPU 1 idles again.
  controller_.Answer(HeartbeatResponse{{}, {TaskStop{{7, 0, 0}, 0, 9}}, false});
  (void)Beat();
  for (int i = 0; i < 500 && agent_->running_tasks() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (void)Beat();
  }
  ASSERT_EQ(agent_->running_tasks(), 0u);
  Fault(R"({"gpu":1,"ecc_dbe":2})");
  clock_.Advance(kInterval);
  gpus = Gpus(Beat());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].util_pct, 0);
  EXPECT_EQ(gpus[1].fb_used_mib, 0);
  EXPECT_EQ(gpus[1].sm_clock_mhz, 210);
  EXPECT_EQ(gpus[1].ecc_dbe_volatile, 2);
  EXPECT_EQ(gpus[1].ecc_dbe_aggregate, 2);
}

TEST_F(AgentTelemetryTest, TheAgentTakesTheIntervalTheControllerPacesItsFleetTo) {
  Start(1'000'000);
  EXPECT_EQ(agent_->heartbeat_interval(), 1'000'000);  // the registration's answer
  HeartbeatResponse paced;
  paced.heartbeat_interval_ms = 5000;
  controller_.Answer(paced);
  Beat();
  EXPECT_EQ(agent_->heartbeat_interval(), 5'000'000);
  Beat();  // an answer without an interval (as a push has none) changes nothing
  EXPECT_EQ(agent_->heartbeat_interval(), 5'000'000);
}

TEST_F(AgentTelemetryTest, ASampleWhoseHeartbeatFailedGoesWithTheNext) {
  Start(kInterval);
  Fault(R"({"gpu":1,"xid":31})");
  controller_.FailNext();
  EXPECT_FALSE(agent_->RunOnce().ok());
  std::vector<GpuTelemetry> gpus = Gpus(Beat());  // within the interval: the kept sample
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].last_xid, 31);
  EXPECT_FALSE(Beat().contains("gpus"));  // and only once
  EXPECT_EQ(controller_.heartbeats().size(), 2u);
}

TEST_F(AgentTelemetryTest, IntervalZeroSendsNoTelemetry) {
  Start(0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Beat().contains("gpus"));
    clock_.Advance(kInterval);
  }
  EXPECT_EQ(controller_.heartbeats().size(), 3u);
}

TEST_F(AgentTelemetryTest, AFailingReadIsLoggedOnceAndHeartbeatsGoOn) {
  Start(kInterval);
  std::filesystem::create_directory(dir_ + "/fake-faults");  // unreadable as a fault file
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Beat().contains("gpus"));
    clock_.Advance(kInterval);
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(controller_.heartbeats().size(), 3u);
  const std::string message = "reading GPU telemetry";
  size_t first = err.find(message);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(message, first + 1), std::string::npos) << err;

  // Readable again: samples resume.
  std::filesystem::remove(dir_ + "/fake-faults");
  EXPECT_EQ(Gpus(Beat()).size(), 2u);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(AgentLabelsTest, TheInventoryCarriesTheLabelsAndABadOneIsRefused) {
  char dir[] = "/tmp/tessera_agent_labels_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  AgentOptions o;
  o.server_url = "http://127.0.0.1:1";  // never reached: Create only discovers
  o.token = "join-token";
  o.node_name = "n1";
  o.data_dir = dir;
  o.fake_gpus = "2xH100-80GB";
  o.use_cgroups = false;
  o.labels = {{"block", "b2"}, {"rack", "r1"}};
  auto agent = Agent::Create(o, GpuCatalog::Default());
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  EXPECT_EQ((*agent)->inventory().spec.labels, o.labels);
  EXPECT_EQ((*agent)->inventory().spec.Label("rack"), "r1");
  agent->reset();
  o.labels = {{"rack", "r 1"}};
  auto bad = Agent::Create(o, GpuCatalog::Default());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("label 'rack=r 1'"), std::string::npos);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tessera
