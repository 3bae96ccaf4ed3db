// A job's attempts as `show` reads them: each ended attempt (start, end, where, how it
// ended) is stored with the transition that ended it, a finished job keeps where it
// ran, and run time counts from the current attempt's start.
#include <gtest/gtest.h>

#include "base/time_format.h"
#include "sched/testing/scheduler_harness.h"
#include "server/controller_fixture.h"
#include "server/job_attempts.h"
#include "server/task_reports.h"
#include "server/testing/failing_store.h"

namespace tessera {
namespace {

constexpr const char* kLow =
    "name: low\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n"
    "checkpoint: {interval: 100}\n";
constexpr const char* kHigh =
    "name: high\npriority: 10\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerAttemptsTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.policy = "priority+preempt";
    o.node_timeout = node_timeout_;
  }
  Micros node_timeout_ = 1000 * kHour;
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  void Exits(uint64_t job, int code, int signal, bool checkpointed) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.exit_code = code;
    t.signal = signal;
    t.checkpointed = checkpointed;
    running_.erase(job);
    std::vector<TaskReport> reports = Running();
    reports.push_back(t);
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
};

TEST_F(ControllerAttemptsTest, EachAttemptIsShownAndAFinishedJobKeepsItsPlacement) {
  Register();
  const uint64_t low = Submit("team-a", kLow);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  EXPECT_EQ(Job(low)["attempt_start_time"], FormatRfc3339(kT0));
  EXPECT_TRUE(Job(low)["attempt_history"].empty());

  // Preempted at 250 s; it checkpoints and exits on its signal at 270 s.
  clock_.Advance(250 * kSecond);
  const uint64_t high = Submit("team-a", kHigh);
  ASSERT_TRUE(controller_->RunCycle().ok());
  clock_.Advance(20 * kSecond);
  Exits(low, 0, 15, /*checkpointed=*/true);
  nlohmann::json j = Job(low);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_TRUE(j["attempt_start_time"].is_null());
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  const nlohmann::json& first = j["attempt_history"][0];
  EXPECT_EQ(first["attempt"], 1);
  EXPECT_EQ(first["ended"], "preempted");
  EXPECT_EQ(first["start_time"], FormatRfc3339(kT0));
  EXPECT_EQ(first["end_time"], FormatRfc3339(kT0 + 270 * kSecond));
  EXPECT_EQ(first["run_seconds"], 270.0);
  EXPECT_EQ(first["signal"], 15);
  ASSERT_EQ(first["tasks"].size(), 1u);
  EXPECT_EQ(first["tasks"][0]["node"], "node-1");
  ASSERT_EQ(first["tasks"][0]["gpus"].size(), 2u);
  EXPECT_EQ(first["tasks"][0]["gpus"][0]["model"], "H100-80GB");
  EXPECT_EQ(first["tasks"][0]["gpus"][0]["uuid"], "GPU-0");
  EXPECT_EQ(first["tasks"][0]["gpus"][1]["uuid"], "GPU-1");
  EXPECT_EQ(j["ended_attempts_run_seconds"], 270.0);

  // The preemptor runs 10 s; the second attempt starts at 280 s.
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(10 * kSecond);
  Exits(high, 0, 0, false);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  j = Job(low);
  EXPECT_EQ(j["start_time"], FormatRfc3339(kT0));  // the first start, as before
  EXPECT_EQ(j["attempt_start_time"], FormatRfc3339(kT0 + 280 * kSecond));
  EXPECT_EQ(j["attempts"], 2);

  // It ends at 380 s: a finished job keeps where it ran, and both attempts.
  clock_.Advance(100 * kSecond);
  Exits(low, 0, 0, false);
  j = Job(low);
  EXPECT_EQ(j["state"], "succeeded");
  ASSERT_EQ(j["tasks"].size(), 1u);
  EXPECT_EQ(j["tasks"][0]["node"], "node-1");
  EXPECT_EQ(j["tasks"][0]["gpus"].size(), 2u);
  ASSERT_EQ(j["attempt_history"].size(), 2u);
  EXPECT_EQ(j["attempt_history"][1]["attempt"], 2);
  EXPECT_EQ(j["attempt_history"][1]["ended"], "succeeded");
  EXPECT_EQ(j["attempt_history"][1]["run_seconds"], 100.0);
  EXPECT_EQ(j["ended_attempts_run_seconds"], 370.0);
  EXPECT_EQ(Job(high)["attempt_history"][0]["ended"], "succeeded");

  // Durable: the same after a restart.
  const nlohmann::json before = j;
  Reopen();
  j = Job(low);
  EXPECT_EQ(j["attempt_history"], before["attempt_history"]);
  EXPECT_EQ(j["tasks"][0]["gpus"].size(), 2u);
  EXPECT_EQ(j["tasks"][0]["node"], "node-1");
}

TEST_F(ControllerAttemptsTest, AFailedAttemptKeepsItsExitCode) {
  Register();
  const uint64_t job = Submit("team-a", kHigh);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(30 * kSecond);
  Exits(job, 3, 0, false);
  nlohmann::json j = Job(job);
  EXPECT_EQ(j["state"], "failed");
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  EXPECT_EQ(j["attempt_history"][0]["ended"], "failed");
  EXPECT_EQ(j["attempt_history"][0]["exit_code"], 3);
  EXPECT_EQ(j["attempt_history"][0]["run_seconds"], 30.0);
  EXPECT_EQ(j["tasks"][0]["exit_code"], 3);
}

TEST(JobAttemptsTest, StoredWithThePlacementAndCappedAt64) {
  EXPECT_EQ(WithStoredAttempts(nlohmann::json::object(), ""), "");
  EXPECT_TRUE(StoredAttempts("").empty());
  EXPECT_TRUE(StoredAttempts("not json \"attempts\"").empty());
  std::string stored;
  for (int i = 1; i <= 70; ++i) {
    stored =
        AppendAttempt(stored, {{"attempt", i}, {"start", i * kSecond}, {"end", (i + 1) * kSecond}});
  }
  nlohmann::json attempts = StoredAttempts(stored);
  ASSERT_EQ(attempts.size(), kMaxStoredAttempts);
  EXPECT_EQ(attempts.front()["attempt"], 7);  // the oldest dropped
  EXPECT_EQ(StoredRunSeconds(attempts), 64.0);
  // A running attempt's placement carries them; its own keys are kept as they are.
  const nlohmann::json placement =
      nlohmann::json::parse(WithStoredAttempts({{"run_start", 5}, {"tasks", {}}}, stored));
  EXPECT_EQ(placement["run_start"], 5);
  EXPECT_EQ(placement["attempts"].size(), kMaxStoredAttempts);
  EXPECT_EQ(AttemptsView(attempts)[0]["run_seconds"], 1.0);
}

TEST(JobAttemptsTest, TheRestartsCountedAreTheNewestRequeuedAttempts) {
  EXPECT_EQ(StoredRestarts(nlohmann::json::array()), 0);
  nlohmann::json attempts = {{{"attempt", 1}, {"ended", "preempted"}, {"restarts", 0}},
                             {{"attempt", 2}, {"ended", "failed"}, {"restarts", 1}},
                             {{"attempt", 3}, {"ended", "node lost"}, {"restarts", 2}}};
  EXPECT_EQ(StoredRestarts(attempts), 2);
  // The attempt that finished the job stores no count: the one before it stands.
  attempts.push_back({{"attempt", 4}, {"ended", "succeeded"}});
  EXPECT_EQ(StoredRestarts(attempts), 2);
  EXPECT_EQ(StoredRestarts(nlohmann::json::array({{{"attempt", 1}, {"ended", "failed"}}})), 0);
}

TEST_F(ControllerAttemptsTest, ALostNodeEndsTheAttemptAsNodeLost) {
  node_timeout_ = 30 * kSecond;
  Reopen();
  Register();
  const uint64_t job = Submit("team-a", kLow);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(40 * kSecond);  // silent since: lost
  ASSERT_TRUE(controller_->RunCycle().ok());
  nlohmann::json j = Job(job);
  EXPECT_EQ(j["state"], "pending");
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  EXPECT_EQ(j["attempt_history"][0]["ended"], "node lost");
  EXPECT_EQ(j["attempt_history"][0]["run_seconds"], 40.0);
  EXPECT_EQ(j["attempt_history"][0]["tasks"][0]["node"], "node-1");
  EXPECT_EQ(j["attempt_history"][0]["tasks"][0]["gpus"].size(), 2u);
}

using testing::FailingStore;

// The attempt is written with the transition that ends it: when that write fails, a
// restarted controller has neither (the job still runs, no attempt), and the agent's
// report, sent again, records it once.
TEST_F(ControllerAttemptsTest, AnAttemptIsDurableExactlyWithItsEnd) {
  FailingStore failing(store_.get());
  controller_.reset();
  ControllerOptions options;
  options.data_dir = dir_;
  options.node_timeout = 1000 * kHour;
  options.policy = "priority+preempt";
  auto opened = Controller::Open(options, &failing, catalog(), clock_, DefaultQueuesYaml());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  controller_ = std::move(opened).value();
  Register();
  const uint64_t job = Submit("team-a", kHigh);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  clock_.Advance(60 * kSecond);
  TaskReport exited;
  exited.key = running_.at(job);
  exited.state = TaskState::kExited;
  failing.fail = true;
  EXPECT_FALSE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {exited}, {}}).ok());

  Reopen();  // on the real store: the crash lost the failed write
  nlohmann::json j = Job(job);
  EXPECT_EQ(j["state"], "running");
  EXPECT_TRUE(j["attempt_history"].empty());
  running_.clear();
  RegisterRequest again = Inventory();
  again.tasks = {exited};  // the agent kept the report and sends it again
  ASSERT_TRUE(controller_->Register(again, "127.0.0.1").ok());
  j = Job(job);
  EXPECT_EQ(j["state"], "succeeded");
  ASSERT_EQ(j["attempt_history"].size(), 1u);
  EXPECT_EQ(j["attempt_history"][0]["ended"], "succeeded");
  Reopen();
  EXPECT_EQ(Job(job)["attempt_history"].size(), 1u);
}

}  // namespace

// What one task report means for its attempt (task_reports.h), on the scheduler's own
// harness: a gang of two 8-GPU tasks, one on each node, started at 0.
namespace controller_attempts_test {

class TaskReportsTest : public ::testing::Test {
 protected:
  TaskReportsTest()
      : h_({testing::GpuNode("n0"), testing::GpuNode("n1")},
           testing::Tree({testing::QueueNode("q", "", {testing::Q(testing::kGpu, 64'000)})}),
           SchedulerOptions{}) {
    id_ = h_.Submit(testing::Gang("g", "q", {8, 8}), 0);
    EXPECT_EQ(testing::Started(h_.Cycle(0)), std::vector<uint64_t>{id_.value()});
    Machine().Started(h_.job(id_));
  }
  AttemptMachine Machine() { return AttemptMachine(&h_.lifecycle()); }
  AttemptEffects Apply(TaskState state, int task, int exit_code = 0, int signal = 0,
                       bool checkpointed = false) {
    TaskReport r;
    r.key = TaskKey{id_.value(), task, 1};
    r.state = state;
    r.exit_code = exit_code;
    r.signal = signal;
    r.checkpointed = checkpointed;
    r.message = "why";
    return ApplyTaskReport(Machine(), h_.job(id_), r, "n1", 100);
  }

  testing::Harness h_;
  JobId id_;
};

TEST_F(TaskReportsTest, ARunningTaskChangesNothingButItsCheckpoint) {
  EXPECT_FALSE(Apply(TaskState::kRunning, 0).changed);
  EXPECT_FALSE(h_.job(id_).attempt.checkpointed);
  EXPECT_FALSE(Apply(TaskState::kRunning, 0, 0, 0, /*checkpointed=*/true).changed);
  EXPECT_TRUE(h_.job(id_).attempt.checkpointed);
  EXPECT_EQ(h_.job(id_).phase, JobPhase::kRunning);
}

TEST_F(TaskReportsTest, AnExitIsTheTasksWithItsCodeAndSignal) {
  const AttemptEffects fx = Apply(TaskState::kExited, 1, 3, 9);
  EXPECT_TRUE(fx.changed);
  EXPECT_EQ(fx.stop, std::vector<size_t>{0});  // a failure stops the gang at once
  const TaskOutcome& t = h_.job(id_).attempt.tasks[1];
  EXPECT_TRUE(t.exited);
  EXPECT_EQ(t.exit_code, 3);
  EXPECT_EQ(t.signal, 9);
}

TEST_F(TaskReportsTest, AFailedStartFailsTheJobSayingWhy) {
  const AttemptEffects fx = Apply(TaskState::kFailedToStart, 1, 127);
  EXPECT_EQ(fx.reason, "task 1 failed to start: why");
  EXPECT_EQ(fx.stop, std::vector<size_t>{0});
  EXPECT_EQ(h_.job(id_).attempt.after, AttemptEnd::kFail);
  EXPECT_EQ(h_.job(id_).attempt.tasks[1].exit_code, 127);
}

TEST_F(TaskReportsTest, ALostTaskRequeuesTheJobNamingItsNode) {
  const AttemptEffects fx = Apply(TaskState::kLost, 0);
  EXPECT_EQ(fx.reason, "requeued: task 0 on n1 was lost (why)");
  EXPECT_EQ(fx.stop, std::vector<size_t>{1});
  EXPECT_EQ(h_.job(id_).attempt.after, AttemptEnd::kRequeue);
  EXPECT_EQ(h_.job(id_).attempt.cause, RequeueCause::kTaskLost);
}

TEST(TaskReportsListTest, ReportsEndSomethingUnlessEveryTaskStillRuns) {
  std::vector<TaskReport> reports(2);
  EXPECT_FALSE(AnyTaskEnded(reports));
  EXPECT_FALSE(AnyTaskEnded({}));
  for (TaskState ended : {TaskState::kExited, TaskState::kFailedToStart, TaskState::kLost}) {
    reports[1].state = ended;
    EXPECT_TRUE(AnyTaskEnded(reports));
  }
}

}  // namespace controller_attempts_test
}  // namespace tessera
