// The controller's side of exactly-once execution: exits reported across its own
// restarts are recorded once, a launch an agent never received is sent again rather
// than started as a new attempt, a task that ended without a known outcome is
// requeued, and tasks run as their tenant's Unix identity.
#include <gtest/gtest.h>

#include "api/job_batch.h"
#include "server/controller_fixture.h"
#include "server/testing/failing_store.h"
#include "server/testing/job_yaml.h"

namespace tessera {
namespace {

using testing::kOneGpu;

class ControllerRecoveryTest : public ControllerTest {
 protected:
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  HeartbeatResponse Beat(std::vector<TaskReport> reports) {
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, std::move(reports), {}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HeartbeatResponse{};
  }
  // A one-GPU job started, then reported lost by its agent; returns its id.
  uint64_t StartAndLoseOneJob() {
    Register();
    const uint64_t id = Submit("team-a", kOneGpu);
    std::vector<TaskLaunch> first = CycleAndTake();
    EXPECT_EQ(first.size(), 1u);
    if (first.empty()) {
      return id;
    }
    TaskReport lost = Report(first[0].key, TaskState::kLost);
    lost.message = "the agent stopped and killed it";
    running_.clear();
    Beat({lost});
    return id;
  }
  static TaskReport Report(const TaskKey& key, TaskState state, int exit_code = 0,
                           int signal = 0) {
    TaskReport t;
    t.key = key;
    t.state = state;
    t.exit_code = exit_code;
    t.signal = signal;
    return t;
  }
};

// The task exits while the controller is down: the new controller asks the agent to
// register, the registration carries the exit, and the job ends after one attempt.
TEST_F(ControllerRecoveryTest, ExitReportedAcrossARestartIsRecordedOnce) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  const TaskKey key = launches[0].key;
  EXPECT_EQ(key.attempt, 1);

  Reopen();
  // The first heartbeat to the new controller is not taken: register again.
  HeartbeatResponse hb = Beat({Report(key, TaskState::kExited, 0)});
  EXPECT_TRUE(hb.reregister);
  RegisterRequest req = Inventory();
  req.tasks = {Report(key, TaskState::kExited, 0)};
  ASSERT_TRUE(controller_->Register(req, "127.0.0.1").ok());
  running_.clear();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(CycleAndTake().empty()) << "cycle " << i << " launched the finished job again";
  }
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["attempts"], 1);
}

// The start was durable but its launch never reached the agent (the controller died
// first): the agent registers without it, and the same attempt is sent again.
TEST_F(ControllerRecoveryTest, LaunchTheAgentNeverGotIsSentAgainAsTheSameAttempt) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_TRUE(controller_->RunCycle().ok());  // durable start; nobody took the launch
  Reopen();
  running_.clear();
  Register();
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, id);
  EXPECT_EQ(launches[0].key.attempt, 1);
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["attempts"], 1);
  Exit(id);
  EXPECT_EQ(Job(id)["state"], "succeeded");
  EXPECT_EQ(Job(id)["attempts"], 1);
}

// A task whose outcome is unknown (its agent killed it, or its supervisor died) is not
// a failure: the job runs again as a new attempt. With cycles on exits (the default) the
// report itself starts it; without, it waits for the loop's cycle with the loss as its
// reason.
TEST_F(ControllerRecoveryTest, LostTaskIsRequeuedAsANewAttempt) {
  const uint64_t id = StartAndLoseOneJob();
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["attempts"], 2);
  std::vector<TaskLaunch> second = CycleAndTake();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].key.attempt, 2);
}

// A launch that failed before any program ran (here: a MIG instance the driver would not
// make) fails the job with the agent's reason, and no made-up exit code (not 127).
TEST_F(ControllerRecoveryTest, LaunchThatFailedToStartRecordsItsReasonNotAnExitCode) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  std::vector<TaskLaunch> first = CycleAndTake();
  ASSERT_EQ(first.size(), 1u);
  TaskReport failed = Report(first[0].key, TaskState::kFailedToStart);
  failed.message = "MIG instance 1g.10gb at slot 0 on GPU 0 could not be created: Unknown Error";
  running_.clear();
  Beat({failed});
  const nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 0);
  const std::string reason = "task 0 failed to start: " + failed.message;
  EXPECT_EQ(j["reason"], reason);
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  EXPECT_EQ(j["attempt_history"][0]["ended"], "failed");
  EXPECT_EQ(j["attempt_history"][0]["exit_code"], 0);
  EXPECT_EQ(j["attempt_history"][0]["detail"], reason);
}

// The report of an exit decides what takes the freed GPUs: the next job's launch is
// durable and pushed before the report's answer returns, with no loop cycle between.
TEST_F(ControllerRecoveryTest, AnExitStartsTheNextJobBeforeItsAnswerReturns) {
  Register();
  const char* both = "name: two\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
  const uint64_t a = Submit("team-a", both);
  const uint64_t b = Submit("team-a", both);
  std::vector<TaskLaunch> first = CycleAndTake();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].key.job, a);
  EXPECT_EQ(Job(b)["state"], "pending");
  std::vector<TaskLaunch> pushed;
  controller_->SetPushSink([&](const std::string& node, const HeartbeatResponse& commands) {
    EXPECT_EQ(node, "node-1");
    pushed.insert(pushed.end(), commands.launch.begin(), commands.launch.end());
  });
  running_.clear();
  Beat({Report(first[0].key, TaskState::kExited, 0)});
  EXPECT_EQ(Job(a)["state"], "succeeded");
  EXPECT_EQ(Job(b)["state"], "running");
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].key.job, b);
  EXPECT_EQ(pushed[0].key.attempt, 1);
  controller_->SetPushSink(nullptr);
}

class ControllerRecoveryWithoutExitCyclesTest : public ControllerRecoveryTest {
  void Tune(ControllerOptions& options) override { options.cycle_on_exit = false; }
};

TEST_F(ControllerRecoveryWithoutExitCyclesTest, LostTaskWaitsForTheLoopWithItsReason) {
  const uint64_t id = StartAndLoseOneJob();
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_NE(j["reason"].get<std::string>().find("was lost (the agent stopped"), std::string::npos)
      << j["reason"];
  std::vector<TaskLaunch> second = CycleAndTake();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].key.attempt, 2);
}

// The registration answer tells the agent when it would be declared lost, so that it
// can fence its tasks before then.
TEST_F(ControllerRecoveryTest, RegistrationCarriesTheNodeTimeout) {
  auto r = controller_->Register(Inventory(), "127.0.0.1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_timeout_ms, 1000 * kHour / 1000);
}

// One task of a gang exited and the controller acknowledged it, then crashed: the
// restarted controller must know that task is done, not send it again.
TEST_F(ControllerRecoveryTest, AnAcknowledgedExitOfAGangTaskSurvivesARestart) {
  Register();
  const uint64_t id =
      Submit("team-a", "name: g\nreplicas: 2\nresources: {gpus: 1, gpu_model: H100-80GB}\n"
                       "command: [x]\n");
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 2u);
  TaskKey first = launches[0].key.task == 0 ? launches[0].key : launches[1].key;
  TaskKey second = launches[0].key.task == 0 ? launches[1].key : launches[0].key;
  running_.clear();
  running_[1000] = second;  // the test's agent now runs only task 1
  Beat({Report(first, TaskState::kExited, 0), Report(second, TaskState::kRunning)});
  Reopen();
  Register();  // reports only task 1: task 0's record is gone at the agent
  std::vector<TaskLaunch> again = CycleAndTake();
  EXPECT_TRUE(again.empty()) << "task " << again[0].key.task << " was launched again";
  Beat({Report(second, TaskState::kExited, 0)});
  nlohmann::json j = Job(id);
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["attempts"], 1);
}

// A cancel decided just before a crash is still a cancel after the restart, and the
// stop reaches the agent again.
TEST_F(ControllerRecoveryTest, ACancelInFlightSurvivesARestart) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_TRUE(Actions().Cancel(Principal{Role::kAdmin, "", "test"}, JobNumber(id)).ok());
  Reopen();
  RegisterRequest req = Inventory();
  req.tasks = {Report(launches[0].key, TaskState::kRunning)};
  ASSERT_TRUE(controller_->Register(req, "127.0.0.1").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  HeartbeatResponse hb = Beat({Report(launches[0].key, TaskState::kRunning)});
  ASSERT_EQ(hb.stop.size(), 1u) << "the stop was not sent again";
  EXPECT_EQ(hb.stop[0].key, launches[0].key);
  Beat({Report(launches[0].key, TaskState::kExited, 0, 15)});
  EXPECT_EQ(Job(id)["state"], "cancelled");
}

using testing::FailingStore;

// The commit of an exit report fails: the controller's memory is then ahead of its
// store, so it must take no report at all until it restarts on a working store (the
// agent keeps them); otherwise the exit would be acknowledged without being durable
// and the task run again after a restart.
TEST_F(ControllerRecoveryTest, AfterAFailedCommitNoReportIsTakenUntilARestart) {
  FailingStore failing(store_.get());
  controller_.reset();
  ControllerOptions options;
  options.data_dir = dir_;
  options.node_timeout = 1000 * kHour;
  auto opened = Controller::Open(options, &failing, catalog(), clock_, DefaultQueuesYaml());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  controller_ = std::move(opened).value();
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  const TaskReport exited = Report(launches[0].key, TaskState::kExited, 0);
  failing.fail = true;
  auto first = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {exited}, {}});
  EXPECT_FALSE(first.ok()) << "answered a report it could not make durable";
  failing.fail = false;  // the disk has room again
  auto again = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {exited}, {}});
  ASSERT_FALSE(again.ok()) << "took a report after its store had failed";
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);

  Reopen();  // on the working store: the job is still running there
  running_.clear();
  RegisterRequest req = Inventory();
  req.tasks = {exited};
  ASSERT_TRUE(controller_->Register(req, "127.0.0.1").ok());
  EXPECT_TRUE(CycleAndTake().empty()) << "the finished task was launched again";
  EXPECT_EQ(Job(id)["state"], "succeeded");
  EXPECT_EQ(Job(id)["attempts"], 1);
}

// A batch of jobs: the jobs of one POST /v1/jobs/batch, parsed as the server does.
std::vector<JobSubmission> Batch(int n, const std::string& gpus = "1") {
  std::string text = R"({"jobs": [)";
  for (int i = 0; i < n; ++i) {
    text += std::string(i > 0 ? "," : "") + R"({"name": "b)" + std::to_string(i) +
            R"(", "command": ["x"], "resources": {"gpus": )" + gpus +
            R"(, "gpu_model": "H100-80GB"}})";
  }
  StatusOr<std::vector<JobSubmission>> jobs =
      ParseJobBatch(text + "]}", BatchFormat::kJson, GpuCatalog::Default());
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? *jobs : std::vector<JobSubmission>{};
}

std::vector<uint64_t> Ids(const StatusOr<JobIntake::Submitted>& out) {
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  std::vector<uint64_t> ids;
  for (JobNumber id : out.ok() ? out->jobs : std::vector<JobNumber>{}) {
    ids.push_back(id.value());
  }
  return ids;
}

// The jobs of an acknowledged batch are durable together: after a restart every one
// is there, once, and the cycle starts those that fit.
TEST_F(ControllerRecoveryTest, AnAcknowledgedBatchSurvivesARestartAndIsScheduled) {
  const Principal a{Role::kTenant, "team-a", "test"};
  const StatusOr<JobIntake::Submitted> first =
      controller_->intake().SubmitBatch(a, Batch(3), "batch-key");
  const std::vector<uint64_t> ids = Ids(first);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_FALSE(first->replayed);
  EXPECT_EQ(ids[1], ids[0] + 1);
  EXPECT_EQ(ids[2], ids[0] + 2);
  Reopen();
  for (uint64_t id : ids) {
    EXPECT_EQ(Job(id)["state"], "pending") << id;
    EXPECT_EQ(Job(id)["queue"], "team-a") << id;
  }
  // The key survives too: the retry gets the same ids and makes nothing new.
  const StatusOr<JobIntake::Submitted> retry =
      controller_->intake().SubmitBatch(a, Batch(3), "batch-key");
  EXPECT_EQ(Ids(retry), ids);
  EXPECT_TRUE(retry.ok() && retry->replayed);
  Register();  // two whole H100s
  const std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 2u);
  int running = 0;
  for (uint64_t id : ids) {
    running += Job(id)["state"] == "running" ? 1 : 0;
  }
  EXPECT_EQ(running, 2);
  const JobReads::JobPage page = Reads().ListJobIds(a, JobFilter{}, JobNumber(), 100);
  EXPECT_EQ(page.jobs.size(), 3u) << "a job of the batch is there twice, or one is missing";
}

// The batch's one commit fails: none of its jobs is acknowledged or stays.
TEST_F(ControllerRecoveryTest, ABatchWhoseCommitFailedLeavesNoJob) {
  FailingStore failing(store_.get());
  controller_.reset();
  ControllerOptions options;
  options.data_dir = dir_;
  options.node_timeout = 1000 * kHour;
  auto opened = Controller::Open(options, &failing, catalog(), clock_, DefaultQueuesYaml());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  controller_ = std::move(opened).value();
  failing.fail = true;
  const Principal a{Role::kTenant, "team-a", "test"};
  StatusOr<JobIntake::Submitted> out = controller_->intake().SubmitBatch(a, Batch(4), "k");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Reads().ListJobIds(a, JobFilter{}, JobNumber(), 100).jobs.empty());
  Reopen();  // on the real store
  EXPECT_TRUE(Reads().ListJobIds(a, JobFilter{}, JobNumber(), 100).jobs.empty());
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_FALSE(Reads().GetJob(a, JobNumber(id)).ok()) << id;
  }
}

class ControllerIdentityTest : public ControllerRecoveryTest {
 protected:
  void Tune(ControllerOptions& options) override {
    options.identities.pool_start = 300'000;
    options.identities.pool_size = 2;
    options.identities.run_as["default"] = {4242, 4343};
  }
};

TEST_F(ControllerIdentityTest, EachTenantRunsAsItsOwnIdentityStableAcrossRestarts) {
  Register();
  const uint64_t a1 = Submit("team-a", kOneGpu);
  const uint64_t b1 = Submit("team-b", kOneGpu);
  std::map<uint64_t, TaskLaunch> by_job;
  for (const TaskLaunch& l : CycleAndTake()) {
    by_job[l.key.job] = l;
  }
  ASSERT_EQ(by_job.size(), 2u);
  const int64_t uid_a = by_job[a1].uid;
  const int64_t uid_b = by_job[b1].uid;
  EXPECT_GE(uid_a, 300'000);
  EXPECT_GE(uid_b, 300'000);
  EXPECT_NE(uid_a, uid_b);
  EXPECT_EQ(by_job[a1].gid, uid_a);
  EXPECT_EQ(Job(a1)["run_as"]["uid"], uid_a);

  // The pool has two identities, both taken now; the run_as table still works.
  Exit(a1);  // frees an H100
  const uint64_t d1 = Submit("default", kOneGpu);
  std::vector<TaskLaunch> d = CycleAndTake();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key.job, d1);
  EXPECT_EQ(d[0].uid, 4242);
  EXPECT_EQ(d[0].gid, 4343);

  Reopen();
  Register();
  const uint64_t a2 = Submit("team-a", kOneGpu);
  Exit(b1);
  std::vector<TaskLaunch> again = CycleAndTake();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].key.job, a2);
  EXPECT_EQ(again[0].uid, uid_a) << "identity not kept across a restart";
  EXPECT_EQ(Job(a1)["run_as"]["uid"], uid_a);
  EXPECT_EQ(Job(b1)["run_as"]["uid"], uid_b);
}

}  // namespace
}  // namespace tessera
