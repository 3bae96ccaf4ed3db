// GPU faults and the restart policy on the live controller, step by step on a manual
// clock: a failing task restarted exactly `max` times after its backoff (also across a
// controller restart), a gang restarted whole, an XID 79 on a held GPU requeuing the
// job from its checkpoint onto another GPU, and the findings that only drain.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/time_format.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kRetried =
    "name: retried\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n"
    "restart: {max: 2, on: [failure], backoff: 10s}\n";
constexpr const char* kCheckpointed =
    "name: ckpt\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n"
    "checkpoint: {on_signal: true}\n";

class ControllerRestartsTest : public ControllerTest {
 protected:
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  HeartbeatResponse Beat(std::vector<TaskReport> reports, std::vector<GpuTelemetry> gpus = {}) {
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, std::move(reports),
                                                     std::move(gpus)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HeartbeatResponse{};
  }
  // The single task of `job` exits with `code` (reported once, then forgotten).
  void Fails(uint64_t job, int code) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.exit_code = code;
    running_.erase(job);
    std::vector<TaskReport> reports = Running();
    reports.push_back(t);
    Beat(reports);
  }
  void ExpectInvariants() {
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
  }
};

TEST_F(ControllerRestartsTest, AFailingTaskWithMaxTwoRunsThreeTimesAfterItsBackoffThenFails) {
  Register();
  const uint64_t id = Submit("team-a", kRetried);
  int launches = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<TaskLaunch> l = CycleAndTake();
    ASSERT_EQ(l.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(l[0].key.attempt, attempt);
    ++launches;
    clock_.Advance(5 * kSecond);
    Fails(id, 3);
    if (attempt == 3) {
      break;
    }
    nlohmann::json j = Job(id);
    EXPECT_EQ(j["state"], "pending");
    EXPECT_EQ(j["reason"], "restarting after failure (attempt " + std::to_string(attempt + 1) +
                               " of 3) in 10s");
    EXPECT_EQ(j["restart"]["used"], attempt);
    EXPECT_EQ(j["restart"]["left"], 2 - attempt);
    // The backoff's end: the lifecycle's hold, 10 s from the failure.
    EXPECT_EQ(j["restart"]["restart_at"], FormatRfc3339(clock_.NowMicros() + 10 * kSecond));
    // Not before its backoff: nothing starts at 9 s, it starts at 10 s.
    clock_.Advance(9 * kSecond);
    EXPECT_TRUE(CycleAndTake().empty()) << "attempt " << attempt;
    EXPECT_EQ(Job(id)["reason"], "restarting after failure (attempt " +
                                     std::to_string(attempt + 1) + " of 3) in 1s");
    clock_.Advance(1 * kSecond);
  }
  // The third failure is the last: no more launches, ever.
  clock_.Advance(1 * kHour);
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(launches, 3);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["reason"], "task 0 exited with code 3 (no restarts left: 2 of 2 used)");
  EXPECT_EQ(j["attempts"], 3);
  ASSERT_EQ(j["attempt_history"].size(), 3u);
  for (const auto& a : j["attempt_history"]) {
    EXPECT_EQ(a["ended"], "failed");
    EXPECT_EQ(a["exit_code"], 3);
  }
  EXPECT_EQ(j["restart"]["used"], 2);
  EXPECT_EQ(j["restart"]["left"], 0);
  EXPECT_NE(Views().Metrics().find("tessera_job_restarts_total{cause=\"failure\"} 2"),
            std::string::npos);
  ExpectInvariants();
}

TEST_F(ControllerRestartsTest, AControllerRestartDuringTheBackoffRestartsOnTimeAndOnce) {
  Register();
  const uint64_t id = Submit("team-a", kRetried);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Fails(id, 1);
  clock_.Advance(4 * kSecond);
  Reopen();
  Register();
  EXPECT_EQ(Job(id)["reason"], "restarting after failure (attempt 2 of 3) in 6s");
  EXPECT_EQ(Job(id)["restart"]["restart_at"], FormatRfc3339(clock_.NowMicros() + 6 * kSecond));
  EXPECT_TRUE(CycleAndTake().empty()) << "the backoff holds across the restart";
  clock_.Advance(6 * kSecond);
  std::vector<TaskLaunch> l = CycleAndTake();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].key.attempt, 2);
  EXPECT_TRUE(CycleAndTake().empty()) << "one launch for the attempt";
  EXPECT_EQ(Job(id)["restart"]["used"], 1);
  EXPECT_TRUE(Job(id)["restart"]["restart_at"].is_null()) << "running: no backoff";
  ExpectInvariants();
}

// Finished jobs beyond the newest leave memory; the store still answers for them.
class ControllerRestartsArchiveTest : public ControllerRestartsTest {
 protected:
  void Tune(ControllerOptions& o) override { o.finished_in_memory = 1; }
};

TEST_F(ControllerRestartsArchiveTest, AJobReadBackFromTheStoreShowsTheRestartsItUsed) {
  Register();
  const uint64_t id = Submit("team-a", kRetried);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_EQ(CycleAndTake().size(), 1u) << "attempt " << attempt;
    Fails(id, 1);
    clock_.Advance(10 * kSecond);
  }
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Exit(id);  // its third attempt succeeds
  EXPECT_EQ(Job(id)["restart"]["used"], 2);
  Reopen();  // in memory still, its count read back from its stored attempts
  Register();
  EXPECT_EQ(Job(id)["restart"]["used"], 2);
  const uint64_t newer = Submit("team-a", kRetried);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Exit(newer);
  const JobReads::JobPage page =
      Reads().ListJobIds(Principal{Role::kAdmin, "", "test"}, JobFilter{}, JobNumber(0), 100);
  ASSERT_EQ(page.ids(), std::vector<JobNumber>{JobNumber(newer)}) << "archived";
  const nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["restart"]["used"], 2);
  EXPECT_EQ(j["restart"]["left"], 0);
  EXPECT_TRUE(j["restart"]["restart_at"].is_null());
}

TEST_F(ControllerRestartsTest, AGangRestartsWholeOnceEveryTaskOfTheAttemptHasStopped) {
  Register();
  const uint64_t gang = Submit("team-a",
                               "name: gang\nreplicas: 2\nresources: {gpus: 1, gpu_model: "
                               "H100-80GB}\ncommand: [x]\nrestart: {max: 1, on: [failure], "
                               "backoff: 0s}\n");
  std::vector<TaskLaunch> first = CycleAndTake();
  ASSERT_EQ(first.size(), 2u);
  running_.clear();
  TaskReport failed;
  failed.key = first[0].key;
  failed.state = TaskState::kExited;
  failed.exit_code = 2;
  TaskReport alive;
  alive.key = first[1].key;
  Beat({failed, alive});
  EXPECT_EQ(Job(gang)["state"], "stopping");
  // The other task is stopped at once; nothing starts while it runs.
  ASSERT_TRUE(controller_->RunCycle().ok());
  HeartbeatResponse r = Beat({alive});
  ASSERT_EQ(r.stop.size(), 1u);
  EXPECT_EQ(r.stop[0].key, first[1].key);
  EXPECT_TRUE(r.launch.empty());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_TRUE(Beat({alive}).launch.empty());
  // Once it is gone, both tasks start again as attempt 2.
  alive.state = TaskState::kExited;
  alive.signal = 15;
  Beat({alive});
  ASSERT_TRUE(controller_->RunCycle().ok());
  r = Beat({});
  ASSERT_EQ(r.launch.size(), 2u);
  EXPECT_EQ(r.launch[0].key.attempt, 2);
  EXPECT_EQ(r.launch[1].key.attempt, 2);
  EXPECT_EQ(Job(gang)["attempt_history"][0]["ended"], "failed");
  ExpectInvariants();
}

TEST_F(ControllerRestartsTest, AnXid79OnAHeldGpuRequeuesTheJobFromItsCheckpointOntoAnotherGpu) {
  Register();
  CycleAndTake(Healthy());  // the baseline sample
  const uint64_t id = Submit("team-a", kCheckpointed);
  std::vector<TaskLaunch> l = CycleAndTake(Healthy());
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0].gpus.size(), 1u);
  const int gpu = l[0].gpus[0];
  const std::string dir = l[0].checkpoint_dir;
  clock_.Advance(100 * kSecond);

  std::vector<GpuTelemetry> bad = Healthy();
  bad[static_cast<size_t>(gpu)].xid_count = 1;
  bad[static_cast<size_t>(gpu)].last_xid = 79;
  Beat(Running(), bad);
  // Its task gets the preemption signal with the grace to checkpoint.
  HeartbeatResponse r = Beat(Running(), bad);
  ASSERT_EQ(r.stop.size(), 1u);
  EXPECT_EQ(r.stop[0].key, l[0].key);
  EXPECT_EQ(r.stop[0].grace_ms, 30'000);
  const std::string where =
      "XID 79 (GPU has fallen off the bus) on node node-1 GPU " + std::to_string(gpu);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "stopping");
  EXPECT_EQ(j["reason"], "requeued: gpu-fault: " + where);

  // It checkpoints and exits: requeued from there, and the next start avoids the GPU.
  clock_.Advance(3 * kSecond);
  TaskReport t;
  t.key = l[0].key;
  t.state = TaskState::kExited;
  t.signal = 15;
  t.checkpointed = true;
  running_.erase(id);
  Beat({t}, bad);
  // Requeued, and started again by the cycle the exit report runs.
  j = Job(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["attempts"], 2);
  EXPECT_EQ(j["progress_seconds"], 103);
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  EXPECT_EQ(j["attempt_history"][0]["ended"], "gpu-fault");
  EXPECT_EQ(j["attempt_history"][0]["detail"], where);
  EXPECT_EQ(j["restart"]["used"], 1);
  EXPECT_EQ(j["restart"]["default"], true);
  std::vector<TaskLaunch> again = CycleAndTake(bad);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].key.attempt, 2);
  ASSERT_EQ(again[0].gpus.size(), 1u);
  EXPECT_NE(again[0].gpus[0], gpu);
  EXPECT_EQ(again[0].checkpoint_dir, dir);
  EXPECT_NE(Views().Metrics().find("tessera_job_gpu_faults_total{kind=\"xid\"} 1"),
            std::string::npos);
  ExpectInvariants();
}

TEST_F(ControllerRestartsTest, AGpuFaultTheRestartPolicyLeavesOutFailsTheJob) {
  Register();
  CycleAndTake(Healthy());
  const uint64_t id = Submit("team-a",
                             "name: strict\nresources: {gpus: 1, gpu_model: H100-80GB}\n"
                             "command: [x]\nrestart: {max: 3, on: [failure]}\n");
  std::vector<TaskLaunch> l = CycleAndTake(Healthy());
  ASSERT_EQ(l.size(), 1u);
  std::vector<GpuTelemetry> bad = Healthy();
  bad[static_cast<size_t>(l[0].gpus[0])].ecc_dbe_volatile = 2;
  Beat(Running(), bad);
  ASSERT_EQ(Beat(Running(), bad).stop.size(), 1u);
  TaskReport t;
  t.key = l[0].key;
  t.state = TaskState::kExited;
  t.signal = 15;
  running_.erase(id);
  Beat({t}, bad);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_NE(j["reason"].get<std::string>().find(
                "2 uncorrectable ECC error(s) on node node-1 GPU " +
                std::to_string(l[0].gpus[0]) +
                " (its restart policy does not restart on gpu-fault)"),
            std::string::npos)
      << j["reason"];
  EXPECT_TRUE(CycleAndTake(bad).empty());
}

TEST_F(ControllerRestartsTest, AnApplicationXidOrATemperatureDrainLeavesTheJobRunning) {
  Register();
  CycleAndTake(Healthy());
  const uint64_t a = Submit("team-a", kCheckpointed);
  const uint64_t b = Submit("team-a", kCheckpointed);
  std::vector<TaskLaunch> l = CycleAndTake(Healthy());
  ASSERT_EQ(l.size(), 2u);
  std::vector<GpuTelemetry> t = Healthy();
  t[static_cast<size_t>(l[0].gpus[0])].xid_count = 1;
  t[static_cast<size_t>(l[0].gpus[0])].last_xid = 13;  // the application's own exception
  t[static_cast<size_t>(l[1].gpus[0])].temp_c = 95;    // drained until it cools
  Beat(Running(), t);
  clock_.Advance(kSecond);
  HeartbeatResponse r = Beat(Running(), t);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(Job(a)["state"], "running");
  EXPECT_EQ(Job(b)["state"], "running");
  nlohmann::json nodes = Views().Nodes();
  EXPECT_EQ(nodes["nodes"][0]["gpus"][l[0].gpus[0]]["health"], "ok");
  EXPECT_EQ(nodes["nodes"][0]["gpus"][l[1].gpus[0]]["health"], "drained");
  EXPECT_NE(Views().Metrics().find("tessera_job_gpu_faults_total{kind=\"xid\"} 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
