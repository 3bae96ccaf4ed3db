// The controller's job lifecycle, step by step on a manual clock (no sleeps, no
// threads): preemption, its grace period and the requeue from the checkpoint; a victim
// that finishes within its grace; a gang whose task fails; a node that falls silent;
// and the invariants the lifecycle checks after every cycle.
#include <gtest/gtest.h>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

// Two single-GPU jobs of team-a (node-1 has two whole H100s): `low` and `high`.
constexpr const char* kLow =
    "name: low\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n"
    "checkpoint: {interval: 100}\n";
constexpr const char* kHigh =
    "name: high\npriority: 10\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerLifecycleTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.policy = "priority+preempt";
    o.node_timeout = node_timeout_;
  }
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  HeartbeatResponse Beat(std::vector<TaskReport> extra = {}) {
    std::vector<TaskReport> reports = Running();
    for (TaskReport& r : extra) {
      std::erase_if(reports, [&](const TaskReport& x) { return x.key == r.key; });
      reports.push_back(std::move(r));
    }
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HeartbeatResponse{};
  }
  // The task of `job` exits (the agent reports it once, then forgets it).
  void Exits(uint64_t job, int code, int signal, bool checkpointed) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.exit_code = code;
    t.signal = signal;
    t.checkpointed = checkpointed;
    running_.erase(job);
    Beat({t});
  }
  void ExpectInvariants() {
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
  }

  Micros node_timeout_ = 1000 * kHour;
};

TEST_F(ControllerLifecycleTest, PreemptionSignalsWaitsForTheGraceThenRequeuesFromTheCheckpoint) {
  Register();
  const uint64_t low = Submit("team-a", kLow);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(250 * kSecond);
  const uint64_t high = Submit("team-a", kHigh);
  ASSERT_TRUE(controller_->RunCycle().ok());
  // Signalled with the grace period; the victim still holds its GPUs, nothing starts.
  HeartbeatResponse r = Beat();
  ASSERT_EQ(r.stop.size(), 1u);
  EXPECT_EQ(r.stop[0].key, running_.at(low));
  EXPECT_EQ(r.stop[0].grace_ms, 30'000);
  EXPECT_TRUE(r.launch.empty());
  EXPECT_EQ(Job(low)["state"], "stopping");
  EXPECT_EQ(Job(low)["preemptions"], 1);
  EXPECT_EQ(Job(high)["state"], "pending");
  ExpectInvariants();

  // The victim checkpoints on its signal and exits at 270 s: it resumes from there, and
  // the preemptor starts in the same cycle.
  clock_.Advance(20 * kSecond);
  Exits(low, 0, 15, /*checkpointed=*/true);
  nlohmann::json j = Job(low);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_EQ(j["progress_seconds"], 270);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, high);
  EXPECT_EQ(Job(high)["state"], "running");
  ExpectInvariants();

  // Without a checkpoint report the periodic checkpoint is what it keeps.
  clock_.Advance(10 * kSecond);
  Exits(high, 0, 0, false);
  launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, low);
  EXPECT_EQ(launches[0].key.attempt, 2);
  ExpectInvariants();
}

// A 2-GPU job evicts two 1-GPU jobs. The first leaves while the second is in its grace:
// it is not restarted on the GPU it freed (it would be the preemptor's cheapest victim
// again) and says what it waits for; once the second leaves, the preemptor starts.
TEST_F(ControllerLifecycleTest, AnEvictedJobWaitsForItsPreemptorAndSaysSo) {
  Register();
  const char* one = "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";
  const uint64_t v1 = Submit("team-a", one);
  const uint64_t v2 = Submit("team-a", one);
  ASSERT_EQ(CycleAndTake().size(), 2u);
  clock_.Advance(10 * kSecond);
  const uint64_t high = Submit("team-a", kHigh);
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Beat().stop.size(), 2u);
  clock_.Advance(kSecond);
  Exits(v1, 0, 15, false);
  EXPECT_TRUE(CycleAndTake().empty()) << "the victim restarted into what it freed";
  EXPECT_EQ(Job(v1)["state"], "pending");
  EXPECT_EQ(Job(v1)["preemptions"], 1);
  const std::string reason = Job(v1)["reason"];
  EXPECT_NE(reason.find("waiting for job " + std::to_string(high) +
                        ", which it was preempted for, to start first"),
            std::string::npos)
      << reason;
  clock_.Advance(kSecond);
  Exits(v2, 0, 15, false);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, high);
  EXPECT_EQ(Job(v1)["preemptions"], 1);
  ExpectInvariants();
}

TEST_F(ControllerLifecycleTest, AVictimThatEndsOnItsOwnWithinItsGraceSucceeds) {
  Register();
  const uint64_t low = Submit("team-a", kLow);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(10 * kSecond);
  Submit("team-a", kHigh);
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Beat().stop.size(), 1u);
  // Exit 0 with no checkpoint report: its work was done, it is not run again.
  clock_.Advance(5 * kSecond);
  Exits(low, 0, 0, false);
  nlohmann::json j = Job(low);
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["attempts"], 1);
  ExpectInvariants();
}

TEST_F(ControllerLifecycleTest, AFailedTaskStopsItsGangAtOnceAndFailsTheJob) {
  Register();
  const uint64_t gang = Submit("team-a",
                               "name: gang\nreplicas: 2\nresources: {gpus: 1, gpu_model: "
                               "H100-80GB}\ncommand: [x]\n");
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 2u);
  running_.clear();
  TaskReport failed;
  failed.key = launches[0].key;
  failed.state = TaskState::kExited;
  failed.exit_code = 3;
  TaskReport alive;
  alive.key = launches[1].key;
  auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {failed, alive}, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Job(gang)["state"], "stopping");
  // The rest of the gang is stopped without grace.
  ASSERT_TRUE(controller_->RunCycle().ok());
  r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {alive}, {}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->stop.size(), 1u);
  EXPECT_EQ(r->stop[0].key, launches[1].key);
  EXPECT_EQ(r->stop[0].grace_ms, 0);
  alive.state = TaskState::kExited;
  alive.signal = 15;
  ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {alive}, {}}).ok());
  nlohmann::json j = Job(gang);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_NE(j["reason"].get<std::string>().find("task 0 exited with code 3"), std::string::npos)
      << j["reason"];
  // Nothing is held any more: another job gets both GPUs.
  Submit("team-a", kHigh);
  EXPECT_EQ(CycleAndTake().size(), 1u);
  ExpectInvariants();
}

class ControllerNodeTimeoutTest : public ControllerLifecycleTest {
 protected:
  ControllerNodeTimeoutTest() { node_timeout_ = 30 * kSecond; }
};

TEST_F(ControllerNodeTimeoutTest, ASilentNodesJobIsRequeuedAndRunsAgainWhenItReturns) {
  Register();
  const uint64_t id = Submit("team-a", kLow);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(31 * kSecond);  // no heartbeat since
  ASSERT_TRUE(controller_->RunCycle().ok());
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_NE(j["reason"].get<std::string>().find("node node-1 was lost"), std::string::npos)
      << j["reason"];
  ExpectInvariants();
  // The agent comes back without the task (it killed it when it lost the controller):
  // the job starts again as a new attempt.
  running_.clear();
  agent_id_ = "agent-2";
  Register();
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.attempt, 2);
  ExpectInvariants();
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// What the scheduler learned survives the node set changing and the controller
// restarting: fair-share usage (decayed) and the runtime predictor.
class ControllerHistoryTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override { o.history_interval = 0; }

  std::map<std::string, double> DecayedGpuHours() {
    std::map<std::string, double> out;
    const nlohmann::json queues = Views().Queues();
    for (const auto& q : queues["queues"]) {
      if (q["kind"] == "queue" && !q["fair_share"].is_null()) {
        out[q["name"].get<std::string>()] = q["fair_share"]["decayed_gpu_hours"].get<double>();
      }
    }
    return out;
  }
  // The runtime a new "train" job is predicted to take, in seconds.
  double PredictedTrain() {
    const uint64_t id = Submit("team-a", kTrain);
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok());
    auto c = Actions().Cancel(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return j.ok() && (*j)["predicted_seconds"].is_number() ? (*j)["predicted_seconds"].get<double>()
                                                            : -1;
  }

  static constexpr const char* kTrain =
      "name: train\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
};

TEST_F(ControllerHistoryTest, FairShareAndPredictionsSurviveNodeFlapsAndARestart) {
  Register();
  // Six 10-minute jobs of team-a, one after the other: an hour of 2 GPUs.
  for (int i = 0; i < 6; ++i) {
    const uint64_t id = Submit("team-a", kTrain);
    ASSERT_EQ(CycleAndTake().size(), 1u);
    clock_.Advance(10 * kMinute);
    Exit(id);
  }
  ASSERT_TRUE(controller_->RunCycle().ok());
  const std::map<std::string, double> usage = DecayedGpuHours();
  ASSERT_GT(usage.at("team-a"), 1.5);  // 2 GPU-hours, less a little decay
  EXPECT_EQ(usage.at("team-b"), 0.0);
  const double predicted = PredictedTrain();
  EXPECT_NEAR(predicted, 600, 600 * 0.1);  // within a histogram bin of 10 minutes

  // The node leaves and comes back 100 times (each time a new agent).
  for (int flap = 0; flap < 100; ++flap) {
    ASSERT_TRUE(NodeAdmin().FenceNode("node-1", "flap").ok());
    ASSERT_TRUE(controller_->RunCycle().ok());
    agent_id_ = "agent-flap-" + std::to_string(flap);
    Register();
    ASSERT_TRUE(controller_->RunCycle().ok());
  }
  EXPECT_EQ(DecayedGpuHours(), usage);
  EXPECT_EQ(PredictedTrain(), predicted);

  // And a restart.
  ASSERT_TRUE(controller_->RunCycle().ok());
  Reopen();
  Register();
  ASSERT_TRUE(controller_->RunCycle().ok());
  const std::map<std::string, double> after = DecayedGpuHours();
  EXPECT_NEAR(after.at("team-a"), usage.at("team-a"), 1e-9);
  EXPECT_EQ(after.at("team-b"), 0.0);
  EXPECT_EQ(PredictedTrain(), predicted);
}

// The user level of fair share (policy feature fair-users) is stored with the queues':
// after a restart the less-served user of a queue still goes first.
class ControllerUserShareTest : public ControllerHistoryTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.history_interval = 0;
    o.policy = "fifo+fair-users";
  }
  static constexpr const char* kBoth =
      "queue: team-a\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
};

TEST_F(ControllerUserShareTest, AUsersShareSurvivesARestart) {
  Register();
  for (int i = 0; i < 3; ++i) {  // ana uses both GPUs for half an hour
    const uint64_t id = Submit("team-a", std::string(kBoth) + "user: ana\n");
    ASSERT_EQ(CycleAndTake().size(), 1u);
    clock_.Advance(10 * kMinute);
    Exit(id);
  }
  ASSERT_TRUE(controller_->RunCycle().ok());
  Reopen();
  Register();
  // ana asks first, bo second; only one fits: bo, who has used nothing, goes first.
  const uint64_t ana = Submit("team-a", std::string(kBoth) + "user: ana\n");
  const uint64_t bo = Submit("team-a", std::string(kBoth) + "user: bo\n");
  std::vector<TaskLaunch> started = CycleAndTake();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].key.job, bo);
  EXPECT_NE(started[0].key.job, ana);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Finished jobs beyond the newest few leave memory; the store still answers for them.
class ControllerArchiveTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override { o.finished_in_memory = 2; }
  const Principal admin_{Role::kAdmin, "", "test"};
};

TEST_F(ControllerArchiveTest, OldFinishedJobsAreReadFromTheStoreAndTheirSlotsReused) {
  Register();
  constexpr const char* kJob =
      "name: short\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";
  std::vector<uint64_t> ids;
  auto keyed = controller_->intake().Submit(Principal{Role::kTenant, "team-a", "test"},
                                            ParseJobYaml(kJob, catalog()).value(), "key-1");
  ASSERT_TRUE(keyed.ok() && !keyed->replayed);
  ids.push_back(keyed->jobs.at(0).value());
  for (int i = 0; i < 5; ++i) {
    ids.push_back(Submit("team-a", kJob));
  }
  // Six jobs, two GPUs: three rounds of two.
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(CycleAndTake().size(), 2u) << round;
    clock_.Advance(kMinute);
    for (uint64_t id : std::vector<uint64_t>(ids.begin() + 2 * round, ids.begin() + 2 * round + 2)) {
      Exit(id);
    }
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
  }
  // Only the two newest finished jobs are listed (listings cover what is in memory).
  JobReads::JobPage page = Reads().ListJobIds(admin_, JobFilter{}, JobNumber(0), 100);
  EXPECT_EQ(page.ids(), (std::vector<JobNumber>{JobNumber(ids[5]), JobNumber(ids[4])}));
  // The others answer from the store, as they were.
  for (uint64_t id : ids) {
    auto j = Reads().GetJob(admin_, JobNumber(id));
    ASSERT_TRUE(j.ok()) << id << ": " << j.status().ToString();
    EXPECT_EQ((*j)["state"], "succeeded") << id;
    EXPECT_EQ((*j)["attempts"], 1) << id;
    EXPECT_EQ((*j)["gpus"], 1) << id;
  }
  EXPECT_EQ(Reads().GetJob(admin_, JobNumber(ids.back() + 1)).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Actions().Cancel(admin_, JobNumber(ids[0])).status().code(),
            StatusCode::kFailedPrecondition);
  // Another tenant still cannot see it.
  EXPECT_EQ(Reads().GetJob(Principal{Role::kTenant, "team-b", "t"}, JobNumber(ids[0]))
                .status()
                .code(),
            StatusCode::kNotFound);
  // A retry with the archived job's key returns that job, not a new one.
  auto retry = controller_->intake().Submit(Principal{Role::kTenant, "team-a", "test"},
                                            ParseJobYaml(kJob, catalog()).value(), "key-1");
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->jobs, std::vector<JobNumber>{JobNumber(ids[0])});
  EXPECT_EQ(retry->job_view["state"], "succeeded");  // as it is now, read from the store

  // New jobs run on reused slots; a restart keeps the same view.
  const uint64_t next = Submit("team-a", kJob);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Exit(next);
  Reopen();
  page = Reads().ListJobIds(admin_, JobFilter{}, JobNumber(0), 100);
  EXPECT_EQ(page.ids(), (std::vector<JobNumber>{JobNumber(next), JobNumber(ids[5])}));
  auto j = Reads().GetJob(admin_, JobNumber(ids[1]));
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["state"], "succeeded");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A starting task's note (its image's pull) is its job's reason, in the job and in the
// listing, until it reports none (it started); a later note replaces an earlier one.
TEST_F(ControllerLifecycleTest, AStartingTasksNoteIsItsJobsReasonUntilItStarts) {
  Register();
  const uint64_t id = Submit("team-a", kHigh);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  auto listed = [&] {
    JobReads::JobPage page =
        Reads().ListJobIds(Principal{Role::kAdmin, "", "test"}, JobFilter{}, JobNumber(0), 100);
    return page.jobs.empty() ? nlohmann::json()
                             : nlohmann::json::parse(Reads().JobText(*page.jobs[0]));
  };
  TaskReport pulling;
  pulling.key = running_.at(id);
  pulling.message = "pulling image r/i:1: 1.2 of 4.8 GB";
  Beat({pulling});
  EXPECT_EQ(Job(id)["state"], "running");
  EXPECT_EQ(Job(id)["reason"], "task 0: pulling image r/i:1: 1.2 of 4.8 GB");
  EXPECT_EQ(listed()["reason"], "task 0: pulling image r/i:1: 1.2 of 4.8 GB");
  pulling.message = "pulling image r/i:1: unpacking (4.8 GB)";
  Beat({pulling});
  EXPECT_EQ(listed()["reason"], "task 0: pulling image r/i:1: unpacking (4.8 GB)");
  Beat();  // started: no note
  EXPECT_EQ(Job(id)["reason"].get<std::string>().find("pulling"), std::string::npos)
      << Job(id)["reason"];
  EXPECT_EQ(listed()["reason"].get<std::string>().find("pulling"), std::string::npos);
  ExpectInvariants();
}

}  // namespace
}  // namespace tessera
