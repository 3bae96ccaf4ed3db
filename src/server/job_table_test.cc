// The JobTable on its own: a stored job read back at Open (Restore, RestoreRestarts),
// what the core's record says of each stored state, a job started at once (AddStarted),
// and what an agent's reports mean for the table's tasks.
#include "server/job_table.h"

#include <gtest/gtest.h>

#include "sched/testing/scheduler_harness.h"
#include "server/job_attempts.h"
#include "server/job_rows.h"
#include "server/modules/controller_module.h"
#include "server/modules/validation.h"
#include "server/testing/queue_trees.h"
#include "server/testing/stored_rows.h"

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
  JobRow row = testing::StoredJobRow(
      id, state,
      "name: two\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\nreplicas: 2\n"
      "restart: {max: 5, on: [failure], backoff: 1m}\n");
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

TEST(JobTableReportsTest, AReportCountsOnlyForACurrentTaskOfTheReportingNode) {
  Reconciling r;
  LiveJob* two = r.table.Find(JobNumber(2));
  EXPECT_EQ(r.table.CurrentTaskOn({2, 0, 1}, "n1"), two);
  EXPECT_EQ(r.table.CurrentTaskOn({2, 1, 1}, "n2"), two);
  EXPECT_EQ(r.table.CurrentTaskOn({2, 0, 1}, "n2"), nullptr);  // placed on n1
  EXPECT_EQ(r.table.CurrentTaskOn({2, 0, 0}, "n1"), nullptr);  // another attempt
  EXPECT_EQ(r.table.CurrentTaskOn({2, 2, 1}, "n1"), nullptr);  // no such task
  EXPECT_EQ(r.table.CurrentTaskOn({2, -1, 1}, "n1"), nullptr);
  EXPECT_EQ(r.table.CurrentTaskOn({99, 0, 1}, "n1"), nullptr);
  EXPECT_EQ(r.table.CurrentTaskOn({3, 1, 1}, "n2"), r.table.Find(JobNumber(3)));  // stopping
  // An exited task's late report still counts (the machine ignores a second exit).
  EXPECT_EQ(r.table.CurrentTaskOn({1, 1, 1}, "n1"), r.table.Find(JobNumber(1)));
  r.table.Rec(*two).phase = JobPhase::kFinished;
  EXPECT_EQ(r.table.CurrentTaskOn({2, 0, 1}, "n1"), nullptr);
}

TEST(JobTableReportsTest, OnlyTheOutputNotReceivedYetIsAppended) {
  Reconciling r;
  LiveJob& job = *r.table.Find(JobNumber(2));
  std::optional<LogAppend> first = r.table.ReceiveLog(job, 1, 0, "hello");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->job, JobNumber(2));
  EXPECT_EQ(first->task, 1);
  EXPECT_EQ(first->data, "hello");
  EXPECT_EQ(job.tasks[1].log_received, 5);
  EXPECT_FALSE(r.table.ReceiveLog(job, 1, 0, "hello").has_value());  // resent
  EXPECT_FALSE(r.table.ReceiveLog(job, 1, 2, "llo").has_value());
  EXPECT_EQ(r.table.ReceiveLog(job, 1, 3, "lo wor")->data, " wor");  // overlaps
  EXPECT_EQ(job.tasks[1].log_received, 9);
  EXPECT_FALSE(r.table.ReceiveLog(job, 1, 9, "").has_value());
  EXPECT_EQ(job.tasks[0].log_received, 0);  // per task
}

TEST(JobTableStagedTest, AStagedJobIsFoundByItsKeyAndByIdOnceAcknowledged) {
  JobTable table;
  JobRow row = Row(7, "pending");
  row.idempotency_key = "k1";
  StatusOr<JobSubmission> sub = ParseJobJson(row.spec_json.str(), GpuCatalog::Default());
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  table.AddStaged(row, *sub);
  EXPECT_EQ(table.Find(JobNumber(7)), nullptr);  // not durable yet
  EXPECT_TRUE(table.InFlight(JobNumber(7)));
  EXPECT_EQ(table.FindKey("team-a", "k1"), JobNumber(7));
  EXPECT_EQ(table.all().at(JobNumber(7)).row.name, "two");
  EXPECT_TRUE(table.StateOf(table.all().at(JobNumber(7))) == JobState::kPending);

  LiveJob& job = table.Acknowledge(JobNumber(7), true, GpuCatalog::Default());
  EXPECT_EQ(table.Find(JobNumber(7)), &job);
  EXPECT_FALSE(table.InFlight(JobNumber(7)));
  EXPECT_EQ(job.spec_text_ok, 1);
  EXPECT_EQ(table.Rec(job).spec.name, "two");
  EXPECT_EQ(table.Rec(job).spec.tasks.size(), 2u);
  EXPECT_EQ(table.Rec(job).gpu_milli, 2000);
  EXPECT_EQ(table.Rec(job).attempt.policy.max, 5);

  JobRow keyless = Row(8, "pending");
  table.AddStaged(keyless, *sub);
  EXPECT_EQ(table.Acknowledge(JobNumber(8), false, GpuCatalog::Default()).spec_text_ok, -1);
  EXPECT_FALSE(table.FindKey("team-a", "").has_value());
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

TEST(JobTableReportsTest, ForeignReportsNameATaskOfTheCurrentAttemptPlacedElsewhere) {
  Reconciling r;
  const std::vector<TaskReport> reports = {
      Report(2, 0, 1),                       // placed on n1
      Report(2, 1, 1),                       // placed here
      Report(2, 0, 0),                       // another attempt: stale
      Report(99, 0, 1),                      // unknown
      Report(2, -1, 1),                      // no such task
      Report(2, 5, 1),                       // no such task
      Report(1, 1, 1, TaskState::kExited)};  // placed on n1, exited there
  const std::vector<std::pair<TaskKey, std::string>> foreign =
      r.table.ForeignReports("n2", reports);
  ASSERT_EQ(foreign.size(), 2u);
  EXPECT_EQ(foreign[0], (std::pair<TaskKey, std::string>{{2, 0, 1}, "n1"}));
  EXPECT_EQ(foreign[1], (std::pair<TaskKey, std::string>{{1, 1, 1}, "n1"}));
  EXPECT_TRUE(r.table.ForeignReports("n1", {Report(2, 0, 1), Report(3, 0, 1)}).empty());
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

TEST(JobTableReportsTest, ALaunchAwaitsOnlyALiveTaskOfARunningAttemptOnItsNode) {
  Reconciling r;
  EXPECT_TRUE(r.table.AttemptRunning({2, 0, 1}));
  EXPECT_FALSE(r.table.AttemptRunning({2, 0, 0}));  // another attempt
  EXPECT_FALSE(r.table.AttemptRunning({3, 0, 1}));  // stopping
  EXPECT_FALSE(r.table.AttemptRunning({4, 0, 1}));  // pending
  EXPECT_FALSE(r.table.AttemptRunning({99, 0, 1}));
  EXPECT_TRUE(r.table.AwaitsLaunch("n1", {2, 0, 1}));
  EXPECT_TRUE(r.table.AwaitsLaunch("n2", {2, 1, 1}));
  EXPECT_FALSE(r.table.AwaitsLaunch("n2", {2, 0, 1}));  // placed on n1
  EXPECT_FALSE(r.table.AwaitsLaunch("n1", {1, 1, 1}));  // exited
  EXPECT_FALSE(r.table.AwaitsLaunch("n1", {2, 2, 1}));  // no such task
  EXPECT_FALSE(r.table.AwaitsLaunch("n1", {2, -1, 1}));
  EXPECT_FALSE(r.table.AwaitsLaunch("n1", {3, 0, 1}));  // its attempt is stopping
}

TEST(JobTableReportsTest, ASealedRowHoldsTheRecordsStateAndTheAttemptsPlacement) {
  Reconciling r;
  LiveJob& running = r.table.all().at(JobNumber(1));
  running.row.state = "stale";
  running.row.placement_json = "{}";
  const JobRow& row = r.table.SealRow(running);
  EXPECT_EQ(row.state, "running");
  std::vector<Allocation> allocations;
  std::vector<job_rows::StoredTask> tasks;
  Micros run_start = 0;
  std::string after;
  ASSERT_TRUE(
      job_rows::ParsePlacement(row.placement_json, &allocations, &tasks, &run_start, &after).ok());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].node, "n1");
  EXPECT_FALSE(tasks[0].exited);
  EXPECT_TRUE(tasks[1].exited);
  EXPECT_EQ(allocations.size(), 2u);
  EXPECT_EQ(run_start, 5'000);

  LiveJob& pending = r.table.all().at(JobNumber(4));
  pending.row.state = "stale";
  pending.row.placement_json = "kept";
  EXPECT_EQ(r.table.SealRow(pending).state, "pending");
  EXPECT_EQ(pending.row.placement_json, "kept");  // no attempt holds a placement
  LiveJob& stopping = r.table.all().at(JobNumber(5));
  EXPECT_EQ(r.table.SealRow(stopping).state, "stopping");
}

// What the modules' and services' step reads and does of the jobs (JobFacts, the
// running jobs, a node's jobs, a signal's stops, a pending job cancelled).
TEST(JobTableStepTest, FactsAreTheJobsRowRecordAndTasks) {
  Reconciling r;
  r.table.Find(JobNumber(1))->row.tenant = kValidationTenant;
  const LiveJob& job = *r.table.Find(JobNumber(1));
  const JobFacts facts = r.table.FactsOf(job, nullptr);
  EXPECT_EQ(facts.id, JobNumber(1));
  EXPECT_EQ(&facts.tenant, &job.row.tenant);
  EXPECT_EQ(facts.queue, "main");
  EXPECT_EQ(facts.attempt, 1);
  EXPECT_EQ(facts.state, JobState::kRunning);
  EXPECT_EQ(facts.record, &r.table.Rec(job));
  EXPECT_EQ(&facts.submission, &job.submission);
  EXPECT_TRUE(facts.internal);
  EXPECT_EQ(facts.tasks, 2u);
  EXPECT_EQ(facts.task_node(1), "n1");
  EXPECT_EQ(facts.stored_restarts, 0);
  EXPECT_EQ(facts.held_until, 0);
  EXPECT_FALSE(r.table.FactsOf(*r.table.Find(JobNumber(2)), nullptr).internal);

  // A pending job held back by a restart's backoff: when the lifecycle lets it go.
  const QueueTree tree = Tree();
  JobLifecycle lifecycle(r.table.records(), &tree, nullptr, {});
  const LiveJob& pending = *r.table.Find(JobNumber(4));
  EXPECT_EQ(r.table.FactsOf(pending, &lifecycle).held_until, 0);
  lifecycle.HoldUntil(r.table.Rec(pending), 77'000);
  EXPECT_EQ(r.table.FactsOf(pending, &lifecycle).held_until, 77'000);
  EXPECT_EQ(r.table.FactsOf(pending, nullptr).held_until, 0);

  // An archived job, read back from the store: no record, its stored attempts' restarts.
  LiveJob archived;
  archived.row = Row(9, "failed");
  archived.row.placement_json = AppendAttempt("", {{"attempt", 1}, {"restarts", 3}});
  archived.slot = JobTable::kArchived;
  const JobFacts old = r.table.FactsOf(archived, &lifecycle);
  EXPECT_EQ(old.record, nullptr);
  EXPECT_EQ(old.state, JobState::kFailed);
  EXPECT_EQ(old.stored_restarts, 3);
}

std::vector<JobNumber> Visited(const JobTable& table, bool running_only) {
  std::vector<JobNumber> ids;
  table.VisitFacts(running_only, nullptr, [&](const JobFacts& job) { ids.push_back(job.id); });
  return ids;
}

TEST(JobTableStepTest, VisitsAreOfAcknowledgedJobsRunningOnesOrAll) {
  Reconciling r;
  r.table.Add(JobNumber(6));  // not acknowledged yet: never visited
  const std::vector<JobNumber> running = {JobNumber(1), JobNumber(2), JobNumber(3), JobNumber(5)};
  EXPECT_EQ(Visited(r.table, /*running_only=*/true), running);
  EXPECT_EQ(Visited(r.table, /*running_only=*/false),
            (std::vector<JobNumber>{JobNumber(1), JobNumber(2), JobNumber(3), JobNumber(4),
                                    JobNumber(5)}));
  EXPECT_EQ(r.table.FindRunning(JobNumber(3)), r.table.Find(JobNumber(3)));  // stopping
  EXPECT_EQ(r.table.FindRunning(JobNumber(4)), nullptr);                     // pending
  EXPECT_EQ(r.table.FindRunning(JobNumber(6)), nullptr);
  EXPECT_EQ(r.table.FindRunning(JobNumber(99)), nullptr);
}

TEST(JobTableStepTest, ANodesJobsAreThoseWithATaskStillOnIt) {
  Reconciling r;
  r.Add(6, "running", {{"n3", true, 0, 0}, {"n1", false, 0, 0}});  // exited on n3
  EXPECT_EQ(r.table.JobsOnNode("n1"),
            (std::vector<JobNumber>{JobNumber(1), JobNumber(2), JobNumber(3), JobNumber(6)}));
  EXPECT_EQ(r.table.JobsOnNode("n2"),
            (std::vector<JobNumber>{JobNumber(2), JobNumber(3), JobNumber(5)}));
  EXPECT_TRUE(r.table.JobsOnNode("n3").empty());
}

TEST(JobTableStepTest, ASignalStopsTheTasksNotExited) {
  Reconciling r;
  std::vector<std::pair<std::string, TaskStop>> stops;
  r.table.SignalStops(*r.table.Find(JobNumber(1)), 10, 1'500, stops);  // task 1 exited
  r.table.SignalStops(*r.table.Find(JobNumber(4)), 10, 1'500, stops);  // pending: no tasks
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].first, "n1");
  EXPECT_EQ(stops[0].second.key, (TaskKey{1, 0, 1}));
  EXPECT_EQ(stops[0].second.grace_ms, 2);  // rounded up
  EXPECT_EQ(stops[0].second.signal, 10);
  r.table.SignalStops(*r.table.Find(JobNumber(2)), 15, 0, stops);
  ASSERT_EQ(stops.size(), 3u);
  EXPECT_EQ(stops[2].first, "n2");
  EXPECT_EQ(stops[2].second.key, (TaskKey{2, 1, 1}));
  EXPECT_EQ(stops[2].second.grace_ms, 0);
}

TEST(JobTableStepTest, OnlyAPendingJobIsCancelledAtOnce) {
  Reconciling r;
  const QueueTree tree = Tree();
  JobLifecycle lifecycle(r.table.records(), &tree, nullptr, {});
  EXPECT_FALSE(r.table.CancelPending(JobNumber(1), "no", &lifecycle, 50));  // running
  EXPECT_FALSE(r.table.CancelPending(JobNumber(99), "no", &lifecycle, 50));
  EXPECT_EQ(r.table.Find(JobNumber(1))->row.reason, "");
  LiveJob& job = *r.table.Find(JobNumber(4));
  job.row.reason = "held";
  EXPECT_TRUE(r.table.CancelPending(JobNumber(4), "", &lifecycle, 60));
  EXPECT_EQ(r.table.StateOf(job), JobState::kCancelled);
  EXPECT_EQ(job.row.reason, "held");  // kept: none given
  EXPECT_EQ(job.row.end_us, 60);
  EXPECT_FALSE(r.table.CancelPending(JobNumber(4), "again", &lifecycle, 70));  // finished
  EXPECT_EQ(job.row.end_us, 60);

  Reconciling other;
  JobLifecycle second(other.table.records(), &tree, nullptr, {});
  EXPECT_TRUE(other.table.CancelPending(JobNumber(4), "dependency failed", &second, 80));
  EXPECT_EQ(other.table.Find(JobNumber(4))->row.reason, "dependency failed");
}

TEST(JobTableStepTest, APendingJobIsGatedAndUngatedAndItsReasonRead) {
  Reconciling r;
  const QueueTree tree = Tree();
  JobLifecycle lifecycle(r.table.records(), &tree, nullptr, {});
  r.table.Gate(JobNumber(4), lifecycle);
  EXPECT_TRUE(r.table.Gated(JobNumber(4), lifecycle));
  r.table.Gate(JobNumber(2), lifecycle);  // running: not gated
  EXPECT_FALSE(r.table.Gated(JobNumber(2), lifecycle));
  r.table.Gate(JobNumber(99), lifecycle);  // unknown: nothing
  EXPECT_FALSE(r.table.Gated(JobNumber(99), lifecycle));
  r.table.Ungate(JobNumber(4), lifecycle, 20);
  EXPECT_FALSE(r.table.Gated(JobNumber(4), lifecycle));
  EXPECT_EQ(r.table.Rec(*r.table.Find(JobNumber(4))).eligible_since, 20);
  r.table.Find(JobNumber(4))->row.reason = "held by alice";
  EXPECT_EQ(r.table.ReasonOf(JobNumber(4)), "held by alice");
  EXPECT_EQ(r.table.ReasonOf(JobNumber(99)), "");
}

// What the core's decisions and a lost node do to a job's row and tasks.
TEST(JobTableDecisionsTest, AStartedAttemptPlacesItsTasksAndCountsInTheRow) {
  Reconciling r;
  StatusOr<ClusterState> state =
      ClusterState::Create({testing::GpuNode("n1"), testing::GpuNode("n2")}, GpuCatalog::Default());
  ASSERT_TRUE(state.ok()) << state.status().message();
  LiveJob& job = *r.table.Find(JobNumber(4));
  Allocation a;
  a.node = NodeId(1);
  Allocation b;
  b.node = NodeId(0);
  r.table.Rec(job).allocations = {a, b};
  r.table.StartAttempt(job, *state, /*backfilled=*/true, 70);
  ASSERT_EQ(job.tasks.size(), 2u);
  EXPECT_EQ(job.tasks[0].node, "n2");
  EXPECT_EQ(job.tasks[1].node, "n1");
  EXPECT_EQ(job.row.start_us, 70);
  EXPECT_EQ(job.row.attempts, 2);
  EXPECT_EQ(job.row.reason, "backfilled");
  job.tasks[0].log_received = 5;
  r.table.StartAttempt(job, *state, /*backfilled=*/false, 90);
  EXPECT_EQ(job.row.start_us, 70);  // its first start
  EXPECT_EQ(job.row.attempts, 3);
  EXPECT_EQ(job.row.reason, "");
  EXPECT_EQ(job.tasks[0].log_received, 0);  // a new attempt's output
}

TEST(JobTableDecisionsTest, ATenantsJobsAreAllButTheOneExcepted) {
  Reconciling r;
  r.table.Find(JobNumber(3))->row.tenant = "team-b";
  LiveJob& staged = r.table.Add(JobNumber(6));  // not acknowledged yet: counted
  staged.row.id = 6;
  staged.row.tenant = "team-a";
  std::vector<uint64_t> ids;
  for (const LiveJob* job : r.table.TenantJobs("team-a", JobNumber(2))) {
    ids.push_back(job->row.id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 4, 5, 6}));
  EXPECT_EQ(r.table.TenantJobs("team-b", JobNumber(3)).size(), 0u);
}

TEST(JobTableDecisionsTest, EffectsSetTheRowAndStopTheirTasks) {
  Reconciling r;
  LiveJob& job = *r.table.Find(JobNumber(2));
  job.row.reason = "kept";
  job.row.exit_code = 7;
  std::vector<std::pair<std::string, TaskStop>> stops;
  AttemptEffects none;
  none.stop = {1};
  JobTable::ApplyEffects(job, none, stops);
  EXPECT_EQ(job.row.reason, "kept");
  EXPECT_EQ(job.row.exit_code, 7);
  AttemptEffects fx;
  fx.reason = "failed";
  fx.exit_code = 3;
  fx.stop = {0, 1};
  fx.grace = 1'500;
  JobTable::ApplyEffects(job, fx, stops);
  EXPECT_EQ(job.row.reason, "failed");
  EXPECT_EQ(job.row.exit_code, 3);
  ASSERT_EQ(stops.size(), 3u);
  EXPECT_EQ(stops[0].first, "n2");
  EXPECT_EQ(stops[0].second.grace_ms, 0);
  EXPECT_EQ(stops[1].first, "n1");
  EXPECT_EQ(stops[1].second.key, (TaskKey{2, 0, 1}));
  EXPECT_EQ(stops[1].second.grace_ms, 2);  // rounded up
  EXPECT_EQ(stops[1].second.signal, 15);
  EXPECT_EQ(stops[2].second.key, (TaskKey{2, 1, 1}));
}

TEST(JobTableDecisionsTest, AnEndedAttemptIsStoredAndTheJobResumesOrEnds) {
  Reconciling r;
  LiveJob& requeued = *r.table.Find(JobNumber(2));
  r.table.Rec(requeued).resumed_from = 1'234;
  EndedAttempt ended;
  ended.requeued = true;
  ended.run_start = 5'000;
  r.table.EndAttempt(requeued, ended, {{"attempt", 1}}, 9'000);
  EXPECT_EQ(StoredAttempts(requeued.row.placement_json).size(), 1u);
  EXPECT_EQ(requeued.row.progress_us, 1'234);
  EXPECT_TRUE(requeued.tasks.empty());
  EXPECT_EQ(requeued.row.end_us, 0);

  LiveJob& finished = *r.table.Find(JobNumber(3));
  finished.row.placement_json = AppendAttempt("", {{"attempt", 1}});
  EndedAttempt never_ran;  // it never ran: nothing stored of it, the earlier ones kept
  r.table.EndAttempt(finished, never_ran, {{"attempt", 2}}, 9'500);
  EXPECT_EQ(StoredAttempts(finished.row.placement_json).size(), 1u);
  EXPECT_EQ(finished.row.end_us, 9'500);
  EXPECT_EQ(finished.tasks.size(), 2u);
}

TEST(JobTableDecisionsTest, APreemptedVictimIsCountedAndRequeuedAfterItsGrace) {
  Reconciling r;
  LiveJob& victim = *r.table.Find(JobNumber(2));
  PreemptDecision d;
  d.preemptor = JobId(r.table.Find(JobNumber(4))->slot);
  d.evict_at = 1'500;
  StopRequest request = r.table.Preempted(victim, d, 1'000);
  EXPECT_EQ(victim.row.preemptions, 1);
  EXPECT_EQ(request.after, AttemptEnd::kRequeue);
  EXPECT_EQ(request.cause, RequeueCause::kPreempted);
  EXPECT_EQ(request.grace, 500);
  EXPECT_EQ(request.reason, "preempted by job 4");
  EXPECT_EQ(r.table.Preempted(victim, d, 2'000).grace, 0);  // past its grace
  EXPECT_EQ(victim.row.preemptions, 2);
}

TEST(JobTableDecisionsTest, ALostNodesTasksAreDetachedAndTheLiveOnesLost) {
  Reconciling r;
  r.Add(6, "running", {{"n1", true, 0, 0}, {"n2", false, 0, 0}});  // exited on n1
  for (uint64_t id : {1, 2, 3, 5, 6}) {
    r.table.Rec(*r.table.Find(JobNumber(id))).held = {1, 1};
  }
  const QueueTree tree = Tree();
  JobLifecycle lifecycle(r.table.records(), &tree, nullptr, {});
  std::vector<std::pair<uint64_t, std::vector<size_t>>> lost;
  r.table.LoseNode("n1", &lifecycle, [&](LiveJob& job, const std::vector<size_t>& tasks) {
    lost.emplace_back(job.row.id, tasks);
  });
  EXPECT_EQ(lost,
            (std::vector<std::pair<uint64_t, std::vector<size_t>>>{{1, {0}}, {2, {0}}, {3, {0}}}));
  EXPECT_EQ(r.table.Rec(*r.table.Find(JobNumber(1))).held, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(r.table.Rec(*r.table.Find(JobNumber(2))).held, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(r.table.Rec(*r.table.Find(JobNumber(5))).held, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(r.table.Rec(*r.table.Find(JobNumber(6))).held, (std::vector<uint8_t>{0, 1}));
}

TEST(JobTableArchiveTest, AnArchivedRowReadsBackAsADurableJobWithItsSubmission) {
  LiveJob job = JobTable::FromArchive(Row(9, "succeeded"), GpuCatalog::Default());
  EXPECT_EQ(job.id(), JobNumber(9));
  EXPECT_TRUE(job.durable);
  EXPECT_EQ(job.slot, JobTable::kArchived);
  EXPECT_EQ(job.submission.spec.name, "two");
  EXPECT_EQ(job.submission.spec.tasks.size(), 2u);
  JobTable table;
  EXPECT_EQ(table.StateOf(job), JobState::kSucceeded);  // the row's
  EXPECT_TRUE(table.TaskExited(job, 0));

  JobRow unreadable = Row(10, "failed");
  unreadable.spec_json = std::string("{not json");
  job = JobTable::FromArchive(unreadable, GpuCatalog::Default());
  EXPECT_TRUE(job.durable);
  EXPECT_EQ(job.row.id, 10u);
  EXPECT_TRUE(job.submission.spec.tasks.empty());  // left empty
}

// Every row's id is noted before any is restored: an unreadable row is left out and
// reported, and its id is never given to a new job.
TEST(JobTableRestoreTest, RestoreAllQuarantinesUnreadableRowsAndKeepsTheirIds) {
  JobTable table;
  const QueueTree tree = Tree();
  std::vector<JobRow> rows;
  rows.push_back(Row(3, "running"));
  rows.back().placement_json = RunningPlacement("");
  rows.push_back(Row(9, "exploded"));  // the highest id, unreadable
  rows.push_back(Row(5, "pending"));
  std::vector<std::string> nodes;
  std::vector<JobTable::Quarantined> quarantined =
      table.RestoreAll(std::move(rows), GpuCatalog::Default(), tree,
                       [&](const std::string& n) { nodes.push_back(n); });
  ASSERT_EQ(quarantined.size(), 1u);
  EXPECT_EQ(quarantined[0].id, 9u);
  EXPECT_NE(quarantined[0].why.find("exploded"), std::string::npos) << quarantined[0].why;
  EXPECT_EQ(nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_NE(table.Find(JobNumber(3)), nullptr);
  EXPECT_NE(table.Find(JobNumber(5)), nullptr);
  EXPECT_EQ(table.Find(JobNumber(9)), nullptr);
  EXPECT_EQ(table.TakeId(), JobNumber(10));
}

TEST(JobTableRestoreTest, ListenersHearTheJobsIdsNotTheirSlots) {
  JobTable table;
  const QueueTree tree = Tree();
  ASSERT_TRUE(table.Restore(Row(7, "pending"), GpuCatalog::Default(), tree).ok());
  ASSERT_TRUE(table.Restore(Row(12, "pending"), GpuCatalog::Default(), tree).ok());
  const uint32_t slot7 = table.Find(JobNumber(7))->slot, slot12 = table.Find(JobNumber(12))->slot;
  LifecycleEvent preempted;
  preempted.job = JobId(slot7);
  preempted.by = JobId(slot12);
  const LifecycleEvent heard = table.WithJobIds(preempted);
  EXPECT_EQ(heard.job, JobId(7));
  EXPECT_EQ(heard.by, JobId(12));
  LifecycleEvent alone;
  alone.job = JobId(slot12);
  EXPECT_EQ(table.WithJobIds(alone).job, JobId(12));
  EXPECT_FALSE(table.WithJobIds(alone).by.valid());
}

}  // namespace job_table_test
}  // namespace tessera
