// Idle and hung jobs through the controller on a manual clock: the agent (played by the
// test) sends telemetry and output with its heartbeats, the controller flags the job
// after its queue's window and takes the queue's action.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/time_format.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kQueues = R"(
cohorts:
  - name: cluster
queues:
  - name: team-a
    cohort: cluster
    quota: {gpu: 4}
  - name: team-b
    cohort: cluster
    quota: {gpu: 4}
    idle: {below: 5%, for: 30m, action: requeue}
  - name: team-c
    cohort: cluster
    quota: {gpu: 4}
    idle: {below: 10%, for: 1h, action: cancel}
)";
constexpr const char* kOneGpu =
    "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";
constexpr const char* kShare =
    "name: share\nresources: {gpus: 1, gpu_fraction: 0.25, gpu_model: A100-80GB}\ncommand: [x]\n";

class ControllerIdleTest : public ControllerTest {
 protected:
  // Only the test's cycles start jobs: a requeued job is seen pending before it restarts.
  void Tune(ControllerOptions& o) override { o.cycle_on_exit = false; }
  void SetUp() override {
    ControllerTest::SetUp();
    ASSERT_TRUE(controller_->SetQueues(kQueues).ok());
    Register();
  }
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  // Every GPU at `util` %.
  std::vector<GpuTelemetry> At(int util) const {
    std::vector<GpuTelemetry> t = Healthy();
    for (GpuTelemetry& g : t) {
      g.util_pct = util;
    }
    return t;
  }
  // 10 s later: a cycle, then a heartbeat with the telemetry (and a line of output for
  // `job` when `output`); returns the stops the answer carried.
  std::vector<TaskStop> Tick(int util, uint64_t output_job = 0) {
    clock_.Advance(10 * kSecond);
    EXPECT_TRUE(controller_->RunCycle().ok());
    std::vector<TaskReport> reports = Running();
    for (TaskReport& r : reports) {
      if (r.key.job == output_job) {
        r.log_offset = log_offset_;
        r.log_chunk = "step\n";
        log_offset_ += 5;
      }
    }
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, At(util)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->stop : std::vector<TaskStop>{};
  }
  // Ticks until `until` (inclusive); output every minute when `output_job`.
  std::vector<TaskStop> TickUntil(Micros until, int util, uint64_t output_job = 0) {
    std::vector<TaskStop> stops;
    while (clock_.NowMicros() + 10 * kSecond <= until) {
      const bool minute = (clock_.NowMicros() + 10 * kSecond - kT0) % kMinute == 0;
      for (const TaskStop& s : Tick(util, minute ? output_job : 0)) {
        stops.push_back(s);
      }
    }
    return stops;
  }
  void Exits(uint64_t job, bool checkpointed) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.signal = 15;
    t.checkpointed = checkpointed;
    running_.erase(job);
    std::vector<TaskReport> reports = Running();
    reports.push_back(t);
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // The value of the sample `series` in Prometheus text; -1 when absent.
  static double Sample(const std::string& metrics, const std::string& series) {
    const size_t at = metrics.find("\n" + series + " ");
    return at == std::string::npos ? -1 : std::stod(metrics.substr(at + series.size() + 2));
  }
  int64_t log_offset_ = 0;
};

// The first sample is taken at the first sweep after the start (kT0 + 10 s), so the
// 30-minute window ends at kT0 + 10 s + 30 min.
constexpr Micros kFirstSample = kT0 + 10 * kSecond;

TEST_F(ControllerIdleTest, NotifyFlagsAfterTheWindowNotBeforeAndClearsOnRecovery) {
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake(At(0)).size(), 1u);
  EXPECT_TRUE(TickUntil(kFirstSample + 30 * kMinute - 10 * kSecond, 1, id).empty());
  nlohmann::json j = Job(id);
  EXPECT_TRUE(j["idle_since"].is_null()) << j.dump();
  EXPECT_EQ(j["utilisation_window"]["mean_pct"], 1.0);
  EXPECT_EQ(j["utilisation_window"]["window"], "30m");

  EXPECT_TRUE(TickUntil(kFirstSample + 30 * kMinute, 1, id).empty());
  j = Job(id);
  EXPECT_EQ(j["idle_since"], FormatRfc3339(kFirstSample + 30 * kMinute));
  EXPECT_EQ(j["hung"], false);  // it writes output every minute
  EXPECT_EQ(j["state"], "running");  // notify: nothing else happens
  const std::string metrics = Views().Metrics();
  EXPECT_NE(metrics.find("tessera_jobs_idle{queue=\"team-a\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("tessera_jobs_hung{queue=\"team-a\"} 0"), std::string::npos);
  // 1 % but for the first sample's 10 s at 0 %.
  EXPECT_NEAR(Sample(metrics, "tessera_flagged_job_gpu_utilisation_ratio{job_id=\"" +
                                  std::to_string(id) +
                                  "\",tenant=\"team-a\",queue=\"team-a\",state=\"idle\"}"),
              0.01, 0.0001);
  EXPECT_NEAR(Sample(metrics, "tessera_queue_gpu_utilisation_ratio{queue=\"team-a\"}"), 0.01, 0.0001);
  EXPECT_NEAR(Sample(metrics, "tessera_cluster_gpu_utilisation_ratio"), 0.01, 0.0001);
  // The new families pass promtool's lint (where promtool is installed, as in CI).
  if (std::filesystem::exists("/usr/bin/promtool")) {
    const std::string file = dir_ + "/metrics.txt";
    std::ofstream(file) << metrics;
    EXPECT_EQ(std::system(("/usr/bin/promtool check metrics < " + file + " > " + file + ".out 2>&1").c_str()), 0)
        << std::ifstream(file + ".out").rdbuf();
  }

  // Busy again: cleared within a minute (the window's last thirtieth).
  TickUntil(clock_.NowMicros() + kMinute, 90, id);
  j = Job(id);
  EXPECT_TRUE(j["idle_since"].is_null()) << j.dump();
  EXPECT_NE(Views().Metrics().find("tessera_jobs_idle{queue=\"team-a\"} 0"), std::string::npos);
  // GET /v1/queues shows the policies, defaults where the file has none.
  for (const auto& q : Views().Queues()["queues"]) {
    if (q["name"] == "team-a") {
      EXPECT_EQ(q["idle"]["text"], "below 5% for 30m: notify");
    } else if (q["name"] == "team-c") {
      EXPECT_EQ(q["idle"]["text"], "below 10% for 1h: cancel");
    } else if (q["name"] == "cluster") {
      EXPECT_TRUE(q["idle"].is_null());
    }
  }
}

TEST_F(ControllerIdleTest, SilentAndIdleIsHungButSilentAndBusyIsNot) {
  const uint64_t idle = Submit("team-a", kOneGpu);
  const uint64_t busy = Submit("team-a", kShare);
  ASSERT_EQ(CycleAndTake(At(0)).size(), 2u);
  // GPU 0 idle, the share's card busy at 20 % (80 % of its 25 % share): neither writes.
  auto telemetry = [&]() {
    std::vector<GpuTelemetry> t = At(0);
    t[3].util_pct = 20;
    return t;
  };
  while (clock_.NowMicros() < kFirstSample + 30 * kMinute) {
    clock_.Advance(10 * kSecond);
    ASSERT_TRUE(controller_->RunCycle().ok());
    ASSERT_TRUE(
        controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, Running(), telemetry()}).ok());
  }
  nlohmann::json j = Job(idle);
  EXPECT_EQ(j["idle_since"], FormatRfc3339(kFirstSample + 30 * kMinute));
  EXPECT_EQ(j["hung"], true);
  j = Job(busy);
  EXPECT_TRUE(j["idle_since"].is_null());
  EXPECT_EQ(j["hung"], false);
  // 80 % of its share, but for the first sample's 10 s at 0 %.
  EXPECT_NEAR(j["utilisation_window"]["mean_pct"].get<double>(), 80.0, 0.5);
  const std::string metrics = Views().Metrics();
  EXPECT_NE(metrics.find("tessera_jobs_hung{queue=\"team-a\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("state=\"hung\""), std::string::npos);
}

TEST_F(ControllerIdleTest, RequeueActionStopsWithGraceAndTheJobResumesFromItsCheckpoint) {
  const uint64_t id = Submit("team-b", kOneGpu);
  ASSERT_EQ(CycleAndTake(At(0)).size(), 1u);
  EXPECT_TRUE(TickUntil(kFirstSample + 30 * kMinute - 10 * kSecond, 0, id).empty());
  std::vector<TaskStop> stops = TickUntil(kFirstSample + 30 * kMinute, 0, id);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].key.job, id);
  EXPECT_EQ(stops[0].signal, 15);
  EXPECT_EQ(stops[0].grace_ms, 30'000);  // time to checkpoint, as a preemption
  EXPECT_EQ(Job(id)["state"], "stopping");
  // Until its task exits the stop is sent again; the job stays stopping.
  const int first = running_.at(id).attempt;
  for (const TaskStop& again : Tick(0, id)) {
    EXPECT_EQ(again.key.attempt, first);
  }
  EXPECT_EQ(Job(id)["state"], "stopping");

  Exits(id, /*checkpointed=*/true);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_EQ(j["reason"].get<std::string>().rfind("requeued: idle: GPU utilisation below 5% for 30m", 0),
            0u)
      << j["reason"];
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  // Recorded as what it was, with what the policy saw (not as a preemption).
  EXPECT_EQ(j["attempt_history"][0]["ended"], "idle");
  EXPECT_EQ(j["attempt_history"][0]["detail"], "GPU utilisation below 5% for 30m");
  // It starts again, with the same checkpoint directory, and is watched afresh.
  std::vector<TaskLaunch> again = CycleAndTake(At(0));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].key.attempt, first + 1);
  EXPECT_EQ(again[0].checkpoint_dir, j["checkpoint_dir"]);
  TickUntil(clock_.NowMicros() + 5 * kMinute, 0, id);
  j = Job(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_TRUE(j["idle_since"].is_null());
}

TEST_F(ControllerIdleTest, MigJobsAreNotMeasuredSoNeverFlagged) {
  // NVML reports no utilisation in MIG mode (the agent sends 0): not a measurement.
  const uint64_t id = Submit("team-c", "name: nb\nresources: {mig: 3g.40gb, gpu_model: A100-80GB}\n"
                                       "command: [x]\n");
  ASSERT_EQ(CycleAndTake(At(0)).size(), 1u);
  EXPECT_TRUE(TickUntil(kFirstSample + 2 * kHour, 0, 0).empty());
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_TRUE(j["idle_since"].is_null());
  EXPECT_TRUE(j["utilisation_window"].is_null());
}

TEST_F(ControllerIdleTest, CancelActionCancelsWithTheReason) {
  const uint64_t id = Submit("team-c", kOneGpu);
  ASSERT_EQ(CycleAndTake(At(0)).size(), 1u);
  // below 10 % for 1 h: 8 % is idle, only after the hour.
  EXPECT_TRUE(TickUntil(kFirstSample + 60 * kMinute - 10 * kSecond, 8, id).empty());
  std::vector<TaskStop> stops = TickUntil(kFirstSample + 60 * kMinute, 8, id);
  ASSERT_EQ(stops.size(), 1u);
  Exits(id, /*checkpointed=*/false);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "cancelled");
  EXPECT_EQ(j["reason"], "idle: GPU utilisation below 10% for 1h");
}

TEST_F(ControllerIdleTest, EfficiencyIsStoredWithUsageAndSurvivesARestart) {
  const uint64_t whole = Submit("team-a", kOneGpu);
  const uint64_t share = Submit("team-a", kShare);
  ASSERT_EQ(CycleAndTake(At(0)).size(), 2u);
  // GPU 0 at 50 %, the share's card at 25 % (all of its share), for an hour.
  std::vector<GpuTelemetry> t = At(0);
  t[0].util_pct = 50;
  t[1].util_pct = 50;
  t[3].util_pct = 25;
  while (clock_.NowMicros() < kT0 + kHour) {
    clock_.Advance(10 * kSecond);
    ASSERT_TRUE(controller_->RunCycle().ok());
    ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, Running(), t}).ok());
  }
  Exit(whole);
  Exit(share);
  auto u = Views().Usage(kT0, kT0 + kHour, "job");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ((*u)["rows"].size(), 2u);
  // Utilisation is measured from the first sample (10 s in); the first 10 s count at the
  // first sample's value, so the whole hour is weighted.
  EXPECT_NEAR((*u)["rows"][0]["gpu_hours"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR((*u)["rows"][0]["efficiency"].get<double>(), 0.5, 0.01);
  EXPECT_NEAR((*u)["rows"][0]["used_gpu_hours"].get<double>(), 0.5, 0.01);
  EXPECT_NEAR((*u)["rows"][1]["gpu_hours"].get<double>(), 0.25, 1e-9);
  EXPECT_NEAR((*u)["rows"][1]["efficiency"].get<double>(), 1.0, 0.01);
  const std::string before = Views().Metrics();
  EXPECT_NE(before.find("tessera_tenant_gpu_seconds_used_total{tenant=\"team-a\"}"),
            std::string::npos);

  Reopen();
  u = Views().Usage(kT0, kT0 + kHour, "tenant");
  ASSERT_TRUE(u.ok());
  ASSERT_EQ((*u)["rows"].size(), 1u);
  EXPECT_NEAR((*u)["rows"][0]["used_gpu_hours"].get<double>(), 0.75, 0.01);
  EXPECT_NEAR((*u)["rows"][0]["efficiency"].get<double>(), 0.6, 0.01);  // 0.75 / 1.25
  const std::string after = Views().Metrics();
  const std::string family = "tessera_tenant_gpu_seconds_used_total{tenant=\"team-a\"} ";
  ASSERT_NE(after.find(family), std::string::npos);
  const double seconds = std::stod(after.substr(after.find(family) + family.size()));
  EXPECT_NEAR(seconds, 0.75 * 3600, 40);
}

}  // namespace
}  // namespace tessera
