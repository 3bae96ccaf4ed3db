// The controller driven directly: a manual clock, a SQLite store in a scratch
// directory, and a node agent played by the test through Register and Heartbeat.
// Covers accounting in GPU-hours across a restart, GPU health drains, admin drains,
// and what /metrics and /metrics/gpus say.
#include "server/controller.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "server/controller_fixture.h"
#include "server/http/server.h"
#include "server/testing/job_yaml.h"
#include "store/sqlite_store.h"

namespace tessera {
namespace {

using testing::kOneGpu;

constexpr const char* kTwoGpus = "name: train\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
constexpr const char* kShare = "name: share\nresources: {gpus: 1, gpu_fraction: 0.25, gpu_model: A100-80GB}\ncommand: [x]\n";
constexpr const char* kMig = "name: nb\nresources: {mig: 3g.40gb, gpu_model: A100-80GB}\ncommand: [x]\n";

// Known jobs over a known window: the exact GPU-hours per tenant, clipped to the
// window, with shares and MIG slices by their fraction; the same after a restart.
TEST_F(ControllerTest, UsageInGpuHoursIsExactAndSurvivesARestart) {
  Register();
  const uint64_t train = Submit("team-a", kTwoGpus);   // 2 GPUs, 30 min      -> 1.0
  const uint64_t share = Submit("team-b", kShare);     // 0.25 GPU, 2 h       -> 0.5
  const uint64_t mig = Submit("team-b", kMig);         // 3/7 GPU (428 milli), 70 min
  ASSERT_EQ(CycleAndTake().size(), 3U);
  clock_.Advance(30 * kMinute);
  Exit(train);
  clock_.Advance(40 * kMinute);  // T0 + 70 min
  Exit(mig);
  clock_.Advance(20 * kMinute);  // T0 + 90 min
  const uint64_t one = Submit("team-a", kOneGpu);  // 1 GPU from T0 + 90 min, still running
  ASSERT_EQ(CycleAndTake().size(), 1U);
  clock_.Advance(30 * kMinute);  // T0 + 2 h
  Exit(share);
  clock_.Advance(60 * kMinute);  // T0 + 3 h

  const double mig_hours = 0.428 * 70.0 / 60.0;
  std::map<std::string, double> whole = UsageByTenant(kT0, kT0 + 3 * kHour);
  EXPECT_NEAR(whole["team-a"], 1.0 + 1.5, 1e-9);
  EXPECT_NEAR(whole["team-b"], 0.5 + mig_hours, 1e-9);
  // A window that cuts every interval: [T0 + 15 min, T0 + 105 min).
  std::map<std::string, double> cut = UsageByTenant(kT0 + 15 * kMinute, kT0 + 105 * kMinute);
  EXPECT_NEAR(cut["team-a"], 2 * 0.25 + 0.25, 1e-9);
  EXPECT_NEAR(cut["team-b"], 0.25 * 1.5 + 0.428 * 55.0 / 60.0, 1e-9);

  std::string before = Views().Metrics();
  EXPECT_NE(before.find("tessera_tenant_gpu_seconds_total{tenant=\"team-a\"} 9000\n"), std::string::npos)
      << before;

  Reopen();  // a controller restart: finished intervals from the store, the running job from its row
  std::map<std::string, double> after = UsageByTenant(kT0, kT0 + 3 * kHour);
  EXPECT_NEAR(after["team-a"], 2.5, 1e-9);
  EXPECT_NEAR(after["team-b"], 0.5 + mig_hours, 1e-9);
  std::string metrics = Views().Metrics();
  EXPECT_NE(metrics.find("tessera_tenant_gpu_seconds_total{tenant=\"team-a\"} 9000\n"), std::string::npos)
      << metrics;
  (void)one;
}

TEST_F(ControllerTest, UsageSeriesAveragesGpusPerBucket) {
  Register();
  const uint64_t train = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1U);
  clock_.Advance(90 * kSecond);
  Exit(train);
  clock_.Advance(30 * kSecond);
  auto s = Views().UsageSeries(kT0, kT0 + 2 * kMinute, kMinute);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ((*s)["times"].size(), 2U);
  bool found = false;
  for (const auto& series : (*s)["series"]) {
    if (series["key"] == "team-a") {
      found = true;
      EXPECT_DOUBLE_EQ(series["gpus"][0].get<double>(), 2.0);
      EXPECT_DOUBLE_EQ(series["gpus"][1].get<double>(), 1.0);  // 30 s of 60
      EXPECT_DOUBLE_EQ(series["quota_gpus"].get<double>(), 8.0);
    }
  }
  EXPECT_TRUE(found) << s->dump();
  EXPECT_FALSE(Views().UsageSeries(kT0, kT0, kMinute).ok());
  EXPECT_FALSE(Views().UsageSeries(kT0, kT0 + kHour, 0).ok());
  EXPECT_FALSE(Views().UsageSeries(kT0, kT0 + 1000 * kHour, kMinute).ok());
}

// An XID on GPU 0 drains it: the next whole-GPU jobs land on GPU 1 and then wait.
TEST_F(ControllerTest, XidDrainsTheGpuAndNoNewWorkLandsOnIt) {
  Register();
  CycleAndTake(Healthy());  // the baseline sample
  std::vector<GpuTelemetry> bad = Healthy();
  bad[0].xid_count = 1;
  bad[0].last_xid = 79;
  CycleAndTake(bad);
  nlohmann::json nodes = Views().Nodes();
  const auto& gpu0 = nodes["nodes"][0]["gpus"][0];
  EXPECT_EQ(gpu0["health"], "drained");
  EXPECT_EQ(gpu0["drain"]["by"], "health");
  EXPECT_EQ(gpu0["drain"]["reason"], "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(nodes["nodes"][0]["gpus"][1]["health"], "ok");

  Submit("team-a", kOneGpu);
  Submit("team-a", kOneGpu);
  std::vector<TaskLaunch> launched = CycleAndTake(bad);
  ASSERT_EQ(launched.size(), 1U);
  ASSERT_EQ(launched[0].gpus.size(), 1U);
  EXPECT_EQ(launched[0].gpus[0], 1);
  EXPECT_TRUE(CycleAndTake(bad).empty()) << "GPU 0 is drained; the second job waits";

  // Metrics say so; the drain survives a restart; an admin resume lets the job start.
  EXPECT_NE(Views().Metrics().find("tessera_gpu_drained{Hostname=\"node-1\",gpu=\"0\",UUID=\"GPU-0\","
                                        "kind=\"xid\",reason=\"XID 79 (GPU has fallen off the bus)\"} 1"),
            std::string::npos);
  Reopen();
  Register();
  EXPECT_EQ(Views().Nodes()["nodes"][0]["gpus"][0]["health"], "drained");
  EXPECT_TRUE(CycleAndTake(bad).empty());
  ASSERT_TRUE(NodeAdmin().Resume("node-1", 0).ok());
  launched = CycleAndTake(bad);  // the same counters: no new XID
  ASSERT_EQ(launched.size(), 1U);
  EXPECT_EQ(launched[0].gpus[0], 0);
}

TEST_F(ControllerTest, TemperatureDrainLiftsItselfEccAndLostDoNot) {
  Register();
  CycleAndTake(Healthy());
  std::vector<GpuTelemetry> t = Healthy();
  t[1].temp_c = 93;
  t[2].ecc_dbe_volatile = 1;
  t[3].lost = true;
  CycleAndTake(t);
  nlohmann::json gpus = Views().Nodes()["nodes"][0]["gpus"];
  EXPECT_EQ(gpus[1]["drain"]["kind"], "temperature");
  EXPECT_EQ(gpus[1]["drain"]["reason"], "temperature 93 C (limit 90 C)");
  EXPECT_EQ(gpus[2]["drain"]["kind"], "ecc");
  EXPECT_EQ(gpus[3]["health"], "lost");
  t = Healthy();
  t[1].temp_c = 86;  // cooler, not yet at the resume temperature
  t[2].ecc_dbe_volatile = 1;
  CycleAndTake(t);
  EXPECT_EQ(Views().Nodes()["nodes"][0]["gpus"][1]["health"], "drained");
  t[1].temp_c = 85;
  CycleAndTake(t);
  gpus = Views().Nodes()["nodes"][0]["gpus"];
  EXPECT_EQ(gpus[1]["health"], "ok");
  EXPECT_EQ(gpus[2]["health"], "drained");
  EXPECT_EQ(gpus[3]["health"], "lost");  // until an admin resumes it
}

TEST_F(ControllerTest, AdminDrainsANodeAndChecksItsArguments) {
  Register();
  EXPECT_EQ(NodeAdmin().Drain("nope", -1, "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(NodeAdmin().Drain("node-1", 4, "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeAdmin().Drain("node-1", -1, "").status().code(), StatusCode::kInvalidArgument);
  auto node = NodeAdmin().Drain("node-1", -1, "maintenance window");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)["drain"]["reason"], "maintenance window");
  EXPECT_EQ((*node)["drain"]["by"], "admin");
  EXPECT_FALSE((*node)["schedulable"].get<bool>());
  Submit("team-a", "name: cpu\nresources: {cpu: 1}\ncommand: [x]\n");
  EXPECT_TRUE(CycleAndTake().empty()) << "not even CPU work lands on a drained node";
  ASSERT_TRUE(NodeAdmin().Resume("node-1", -1).ok());
  EXPECT_EQ(CycleAndTake().size(), 1U);
}

TEST_F(ControllerTest, GpuMetricsCarryDcgmLabelsAndTheHolders) {
  Register();
  CycleAndTake(Healthy());
  const uint64_t share = Submit("team-b", kShare);
  const uint64_t mig = Submit("team-a", kMig);
  CycleAndTake();
  std::vector<GpuTelemetry> t = Healthy();
  t[0].util_pct = 77;
  t[0].power_mw = 312'500;
  const int start = Views().Nodes()["nodes"][0]["gpus"][2]["holders"][0]["mig_start"].get<int>();
  t[2].mig = {MigTelemetry{"MIG-a", "3g.40gb", start, 2, 1000, 39000}};
  CycleAndTake(t);
  const std::string text = Views().GpuMetrics();
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia0\",modelName=\"H100-80GB\","
                      "Hostname=\"node-1\",GPU_I_PROFILE=\"\",GPU_I_ID=\"\",tenant=\"\",job_id=\"\"} 77\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia0\",modelName=\"H100-80GB\","
                      "Hostname=\"node-1\",GPU_I_PROFILE=\"\",GPU_I_ID=\"\",tenant=\"\",job_id=\"\"} 312.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED{gpu=\"2\",UUID=\"GPU-2\",device=\"nvidia2\",modelName=\"A100-80GB\","
                      "Hostname=\"node-1\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",tenant=\"team-a\",job_id=\"" +
                      std::to_string(mig) + "\"} 1000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"GPU-3\",device=\"nvidia3\",modelName=\"A100-80GB\","
                      "Hostname=\"node-1\",GPU_I_PROFILE=\"\",GPU_I_ID=\"\",tenant=\"team-b\",job_id=\"" +
                      std::to_string(share) + "\"} 40\n"),
            std::string::npos)
      << text;

  const std::string m = Views().Metrics();
  EXPECT_NE(m.find("tessera_jobs{queue=\"team-b\",tenant=\"team-b\",state=\"running\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("tessera_scheduler_decisions_total{decision=\"start\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("tessera_gpu_allocated_ratio{Hostname=\"node-1\",gpu=\"3\",UUID=\"GPU-3\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(m.find("tessera_agents{state=\"up\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("tessera_queue_quota{queue=\"team-a\",resource=\"gpu\",kind=\"nominal\"} 8\n"),
            std::string::npos);
  EXPECT_NE(m.find("tessera_queue_quota{queue=\"team-b\",resource=\"gpu\",kind=\"used\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(m.find("# TYPE tessera_scheduler_cycle_duration_seconds histogram\n"), std::string::npos);
}

}  // namespace
}  // namespace tessera
