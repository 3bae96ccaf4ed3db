// The JobTable on its own: a stored job read back at Open (Restore, RestoreRestarts),
// what the core's record says of each stored state, a job started at once (AddStarted),
// and what an agent's reports mean for the table's tasks.
#include "server/job_table.h"

#include <gtest/gtest.h>

#include "server/job_attempts.h"
#include "server/job_rows.h"
#include "server/testing/queue_trees.h"

namespace tessera {
namespace job_table_test {

constexpr const char* kQueues = R"(queues:
  - name: main
    tenant: team-a
    quota:
      gpu: 4
)";

QueueTree Tree() { return testing::TreeFromYaml(kQueues); }

JobRow Row(uint64_t id, const std::string& state) {
  StatusOr<JobSubmission> sub = ParseJobYaml(
      "name: two\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\nreplicas: 2\n"
      "restart: {max: 5, on: [failure], backoff: 1m}\n",
      GpuCatalog::Default());
  EXPECT_TRUE(sub.ok()) << sub.status().message();
  JobRow row;
  row.id = id;
  row.tenant = "team-a";
  row.queue = "main";
  row.name = "two";
  row.spec_json = JobSubmissionToJson(*sub, GpuCatalog::Default()).dump();
  row.state = state;
  row.submit_us = 1'000;
  row.attempts = 1;
  return row;
}

// Two tasks on n1 and n2; task 1 has exited with 3 before the crash.
std::string RunningPlacement(const std::string& after) {
  Allocation a;
  a.cpu = MilliCpu(1000);
  a.memory = MiB(1024);
  a.gpus.push_back(GpuGrant{});
  return job_rows::PlacementJson({a, a}, {{"n1", false, 0, 0}, {"n2", true, 3, 0}}, 5'000, after)
      .dump();
}

TEST(JobTableRestoreTest, ARunningJobComesBackWithItsTasksAndTheirExits) {
  JobTable table;
  const QueueTree tree = Tree();
  JobRow row = Row(7, "running");
  row.idempotency_key = "k1";
  row.placement_json = RunningPlacement("");
  StatusOr<std::vector<std::string>> nodes = table.Restore(row, GpuCatalog::Default(), tree);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(*nodes, (std::vector<std::string>{"n1", "n2"}));
  LiveJob* job = table.Find(JobNumber(7));
  ASSERT_NE(job, nullptr);
  const JobRecord& rec = table.Rec(*job);
  EXPECT_EQ(rec.phase, JobPhase::kRunning);
  EXPECT_EQ(rec.run_start, 5'000);
  EXPECT_EQ(rec.spec.submit_time, 1'000);
  EXPECT_EQ(rec.queue, tree.FindQueue("main").value());
  ASSERT_EQ(rec.attempt.tasks.size(), 2u);
  EXPECT_FALSE(table.TaskExited(*job, 0));
  EXPECT_TRUE(table.TaskExited(*job, 1));
  EXPECT_EQ(rec.attempt.tasks[1].exit_code, 3);
  EXPECT_EQ(rec.attempt.after, AttemptEnd::kNone);
  EXPECT_EQ(rec.attempt.policy.max, 5);
  EXPECT_EQ(rec.attempt.policy.backoff, 60'000'000);
  EXPECT_EQ(job->tasks[1].node, "n2");
  EXPECT_EQ(table.FindKey("team-a", "k1"), JobNumber(7));
  EXPECT_EQ(table.StateOf(*job), JobState::kRunning);
}

TEST(JobTableRestoreTest, StoppingAndFinishedJobsKeepWhatTheirRowsSay) {
  JobTable table;
  const QueueTree tree = Tree();
  JobRow stopping = Row(1, "stopping");
  stopping.placement_json = RunningPlacement("cancel");
  ASSERT_TRUE(table.Restore(stopping, GpuCatalog::Default(), tree).ok());
  EXPECT_EQ(table.Rec(*table.Find(JobNumber(1))).attempt.after, AttemptEnd::kCancel);
  JobRow requeue = Row(2, "stopping");
  requeue.placement_json = RunningPlacement("");  // a stopping job without a verdict requeues
  ASSERT_TRUE(table.Restore(requeue, GpuCatalog::Default(), tree).ok());
  EXPECT_EQ(table.Rec(*table.Find(JobNumber(2))).attempt.after, AttemptEnd::kRequeue);

  StatusOr<std::vector<std::string>> done =
      table.Restore(Row(3, "cancelled"), GpuCatalog::Default(), tree);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->empty());
  const LiveJob* finished = table.Find(JobNumber(3));
  EXPECT_EQ(table.Rec(*finished).phase, JobPhase::kFinished);
  EXPECT_EQ(table.StateOf(*finished), JobState::kCancelled);
  // Finished jobs are the archive's candidates: all but the newest 0 leave.
  EXPECT_EQ(table.Archive(10'000, 0), (std::vector<JobNumber>{JobNumber(3)}));
}

TEST(JobTableRestoreTest, AnUnreadableRowLeavesNothingBehind) {
  JobTable table;
  const QueueTree tree = Tree();
  JobRow bad_state = Row(4, "exploded");
  bad_state.idempotency_key = "k4";
  EXPECT_EQ(table.Restore(bad_state, GpuCatalog::Default(), tree).status().code(),
            StatusCode::kInternal);
  JobRow bad_placement = Row(5, "running");
  bad_placement.placement_json = "[1, 2";
  EXPECT_FALSE(table.Restore(bad_placement, GpuCatalog::Default(), tree).ok());
  JobRow bad_spec = Row(6, "pending");
  bad_spec.spec_json = "{";
  EXPECT_FALSE(table.Restore(bad_spec, GpuCatalog::Default(), tree).ok());
  EXPECT_TRUE(table.all().empty());
  EXPECT_FALSE(table.FindKey("team-a", "k4").has_value());
}

TEST(JobTableRestoreTest, RestartsComeBackWithTheirCountCauseAndBackoff) {
  JobTable table;
  const QueueTree tree = Tree();
  JobRow pending = Row(8, "pending");
  pending.reason = "restarting after failure (exit 1)";
  pending.placement_json =
      AppendAttempt("", {{"attempt", 1}, {"ended", "failed"}, {"restarts", 2},
                         {"restart_at", 90'000}});
  ASSERT_TRUE(table.Restore(pending, GpuCatalog::Default(), tree).ok());
  JobRow stopping = Row(9, "stopping");
  stopping.reason = "requeued: gpu-fault XID 79";
  stopping.placement_json = WithStoredAttempts(
      nlohmann::json::parse(RunningPlacement("requeue")),
      AppendAttempt("", {{"attempt", 1}, {"ended", "gpu-fault"}, {"restarts", 1}}));
  ASSERT_TRUE(table.Restore(stopping, GpuCatalog::Default(), tree).ok());
  JobRow lost = Row(10, "stopping");  // no stored attempt: nothing to restore
  lost.reason = "requeued: node n1 lost";
  lost.placement_json = RunningPlacement("requeue");
  ASSERT_TRUE(table.Restore(lost, GpuCatalog::Default(), tree).ok());

  const std::vector<std::pair<JobRecord*, Micros>> backoffs = table.RestoreRestarts();
  ASSERT_EQ(backoffs.size(), 1u);
  EXPECT_EQ(backoffs[0].first, &table.Rec(*table.Find(JobNumber(8))));
  EXPECT_EQ(backoffs[0].second, 90'000);
  EXPECT_EQ(table.Rec(*table.Find(JobNumber(8))).attempt.restarts, 2);
  const AttemptState& faulted = table.Rec(*table.Find(JobNumber(9))).attempt;
  EXPECT_EQ(faulted.restarts, 1);
  EXPECT_EQ(faulted.cause, RequeueCause::kGpuFault);  // from its reason: not stored
  EXPECT_EQ(table.Rec(*table.Find(JobNumber(10))).attempt.restarts, 0);
}

TEST(JobTableAddStartedTest, AStartedJobIsDurableAndRunningOnItsAllocation) {
  JobTable table;
  const QueueTree tree = Tree();
  table.NoteStoredId(JobNumber(4));
  JobSubmission sub;
  sub.spec.name = "check";
  sub.spec.user = "admin";
  sub.spec.queue = "main";
  TaskRequest task;
  task.gpu_count = 2;
  task.gpu_milli = kWholeGpu;
  sub.spec.tasks.push_back(task);
  sub.command = {"/bin/sh", "-c", "true"};
  Allocation a{NodeId(1), MilliCpu(8000), MiB(1024), {}};
  a.gpus = {GpuGrant{0, kWholeGpu, MiB(0), -1, -1}, GpuGrant{1, kWholeGpu, MiB(0), -1, -1}};

  LiveJob& job = table.AddStarted(sub, a, GpuCatalog::Default(), tree, 9'000);
  EXPECT_EQ(job.id(), JobNumber(5));
  EXPECT_EQ(table.Find(JobNumber(5)), &job);  // durable: found
  EXPECT_EQ(job.row.tenant, "admin");
  EXPECT_EQ(job.row.queue, "main");
  EXPECT_EQ(job.row.name, "check");
  EXPECT_EQ(job.row.submit_us, 9'000);
  StatusOr<JobSubmission> stored =
      JobSubmissionFromJson(nlohmann::json::parse(job.row.spec_json.str()), GpuCatalog::Default());
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->command, sub.command);
  const JobRecord& rec = table.Rec(job);
  EXPECT_EQ(rec.phase, JobPhase::kRunning);
  EXPECT_EQ(rec.queue, tree.FindQueue("main").value());
  EXPECT_EQ(rec.allocations, std::vector<Allocation>{a});
  EXPECT_EQ(rec.held, std::vector<uint8_t>{1});
  EXPECT_EQ(rec.run_start, 9'000);
  EXPECT_EQ(rec.eligible_since, 9'000);
  EXPECT_EQ(rec.starts, 1);
  EXPECT_EQ(rec.gpu_milli, 2000);
  EXPECT_EQ(table.StateOf(job), JobState::kRunning);
}

// What an agent's reports mean for the table's tasks (Unreported, StopsToResend,
// PruneCommands): jobs restored with two tasks of attempt 1 each.
struct Reconciling {
  JobTable table;
  // Job `id` in `state` with its two tasks as given.
  void Add(uint64_t id, const std::string& state, const std::vector<job_rows::StoredTask>& tasks) {
    JobRow row = Row(id, state);
    Allocation a;
    a.cpu = MilliCpu(1000);
    a.memory = MiB(1024);
    a.gpus.push_back(GpuGrant{});
    if (state != "pending") {
      row.placement_json = job_rows::PlacementJson({a, a}, tasks, 5'000, "").dump();
    }
    ASSERT_TRUE(table.Restore(row, GpuCatalog::Default(), Tree()).ok());
  }
  Reconciling() {
    Add(1, "running", {{"n1", false, 0, 0}, {"n1", true, 0, 0}});   // task 1 exited
    Add(2, "running", {{"n1", false, 0, 0}, {"n2", false, 0, 0}});
    Add(3, "stopping", {{"n1", false, 0, 0}, {"n2", false, 0, 0}});
    Add(4, "pending", {});
    Add(5, "stopping", {{"n2", false, 0, 0}, {"n2", true, 0, 15}});  // task 1 exited
  }
};

TaskReport Report(uint64_t job, int task, int attempt, TaskState state = TaskState::kRunning) {
  TaskReport r;
  r.key = TaskKey{job, task, attempt};
  r.state = state;
  return r;
}

TEST(JobTableReportsTest, UnreportedListsTheNodesLiveTasksItsAgentDidNotReport) {
  Reconciling r;
  // Job 2's task 0 reported; job 3's only for an older attempt, which does not count.
  const std::vector<TaskReport> reports = {Report(2, 0, 1), Report(3, 0, 0)};
  // Not job 1's exited task, nor job 2's reported one, nor the tasks on n2.
  EXPECT_EQ(r.table.Unreported("n1", reports),
            (std::vector<TaskKey>{{1, 0, 1}, {3, 0, 1}}));
  EXPECT_EQ(r.table.Unreported("n2", reports),
            (std::vector<TaskKey>{{2, 1, 1}, {3, 1, 1}, {5, 0, 1}}));
  EXPECT_TRUE(r.table.Unreported("n3", {}).empty());
}

TEST(JobTableReportsTest, StopsAreResentForTheStoppingJobsRunningTasks) {
  Reconciling r;
  const std::vector<TaskReport> reports = {
      Report(3, 0, 1),                      // resent
      Report(3, 1, 1, TaskState::kExited),  // it ended
      Report(3, 0, 0),                      // another attempt
      Report(2, 0, 1),                      // its job runs
      Report(99, 0, 1),                     // unknown
      Report(3, 5, 1),                      // no such task
      Report(5, 1, 1),                      // exited here already
      Report(5, 0, 1)};                     // resent
  EXPECT_EQ(r.table.StopsToResend(reports), (std::vector<TaskKey>{{3, 0, 1}, {5, 0, 1}}));
}

TEST(JobTableReportsTest, CommandsWithNothingLeftToDoArePruned) {
  Reconciling r;
  std::vector<TaskStop> stops;
  for (TaskKey key : std::vector<TaskKey>{{1, 0, 1}, {1, 1, 1}, {1, 0, 0}, {99, 0, 1}, {1, 7, 1},
                                          {3, 1, 1}}) {
    stops.push_back(TaskStop{key, 1000, 15});
  }
  std::vector<TaskLaunch> launches;
  for (TaskKey key : std::vector<TaskKey>{{2, 1, 1}, {3, 0, 1}, {2, 0, 0}, {99, 0, 1}}) {
    launches.emplace_back().key = key;
  }
  r.table.PruneCommands(launches, stops);
  // Kept: the stops of live tasks (a stopping job's too), the launch of a running attempt.
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_EQ(stops[0].key, (TaskKey{1, 0, 1}));
  EXPECT_EQ(stops[1].key, (TaskKey{3, 1, 1}));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key, (TaskKey{2, 1, 1}));
}

}  // namespace job_table_test
}  // namespace tessera
