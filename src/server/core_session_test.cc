// The core session (core_session.h) on its own: a submission joining its queue, the
// cycle and its invariants, the copies of itself (the wait context, the forecast's input),
// the cluster's node changes (core_session_nodes.cc), an admin's new queues and what Open
// loads.
#include "server/core_session.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sched/testing/scheduler_harness.h"
#include "server/job_rows.h"
#include "server/job_table.h"
#include "server/modules/eta_module.h"
#include "server/node_registry.h"
#include "server/testing/core_sessions.h"

namespace tessera {
namespace core_session_test {

constexpr Micros kSecond = 1'000'000;

constexpr const char* kMainQueue = R"(queues:
  - name: main
    tenant: team-a
    quota:
      gpu: 4
)";

// `core` on queue main with the FIFO policy, its lifecycle over `table`'s records.
void WithLifecycle(CoreSession& core, JobTable& table) {
  ASSERT_TRUE(core.ChoosePolicy(std::nullopt, "fifo", 0, 0).ok());
  ASSERT_TRUE(core.ApplyQueueYaml(kMainQueue).ok());
  core.MakeLifecycle(table.records(), nullptr);
}

// ... and its cluster and scheduler built on one node of 8 GPUs.
void BuiltOnOneNode(CoreSession& core, JobTable& table) {
  ASSERT_NO_FATAL_FAILURE(WithLifecycle(core, table));
  ASSERT_TRUE(core.BuildState({testing::GpuNode("n1", 8)}).ok());
  ASSERT_TRUE(core.BuildScheduler(0).ok());
  core.FinishRebuild();
}

// A pending job of queue main asking one GPU; gated ones are kept back by the lifecycle.
JobRecord& AddPending(CoreSession& core, JobTable& table, uint64_t id, bool gated) {
  LiveJob& job = table.Add(JobNumber(id));
  job.durable = true;
  job.row.id = id;
  job.row.queue = "main";
  JobRecord& rec = table.Rec(job);
  rec.spec = testing::Gang("g" + std::to_string(id), "main", {1});
  rec.queue = core.tree().FindQueue("main").value();
  rec.phase = JobPhase::kPending;
  EXPECT_TRUE(core.lifecycle()->Restore(rec).ok());
  if (gated) {
    core.lifecycle()->Gate(rec);
  }
  return rec;
}

TEST(CoreSessionSubmitTest, ANewJobJoinsItsQueuePendingAndTeachesTheLearner) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(BuiltOnOneNode(core, table));
  LiveJob& job = table.Add(JobNumber(3));
  job.durable = true;
  JobRecord& rec = table.Rec(job);
  rec.spec = testing::Gang("g", "main", {1, 1});
  const int64_t observed = core.learner().observed();
  core.Submit(rec, "main", 7 * kSecond);
  EXPECT_EQ(rec.phase, JobPhase::kPending);
  EXPECT_EQ(rec.queue, core.tree().FindQueue("main").value());
  EXPECT_EQ(rec.eligible_since, 7 * kSecond);  // the lifecycle took it
  EXPECT_EQ(core.learner().observed(), observed + 2);
  EXPECT_NE(core.WaitContextOf(table, 7 * kSecond).live, nullptr);  // it waits
}

TEST(CoreSessionCycleTest, ACycleDecidesOnlyWithNodesAndPendingJobsAndKeepsItsReservation) {
  CoreSession core = testing::BestFitSession();
  ASSERT_TRUE(core.ChoosePolicy(std::nullopt, "fifo", 0, 0).ok());
  ASSERT_TRUE(core.ApplyQueueYaml(kMainQueue).ok());
  JobTable table;
  EXPECT_TRUE(core.ReleaseDue(kSecond).empty());  // no lifecycle yet
  core.MakeLifecycle(table.records(), nullptr);
  ASSERT_TRUE(core.BuildState({testing::GpuNode("n1", 8)}).ok());
  ASSERT_TRUE(core.BuildScheduler(0).ok());
  core.FinishRebuild();
  EXPECT_FALSE(core.RunCycle(kSecond).has_value());  // no pending job
  JobRecord& first = AddPending(core, table, 7, false);
  const JobId first_id = first.id;
  core.lifecycle()->HoldUntil(first, 5 * kSecond);  // a restart's backoff
  EXPECT_FALSE(core.RunCycle(kSecond).has_value());
  EXPECT_TRUE(core.ReleaseDue(4 * kSecond).empty());
  EXPECT_EQ(core.ReleaseDue(5 * kSecond), (std::vector<JobId>{first_id}));
  core.reservation() = Reservation{first_id, 90 * kSecond, {}};
  std::optional<CycleResult> result = core.RunCycle(6 * kSecond);
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->starts.size(), 1u);
  EXPECT_EQ(result->starts[0].job, first_id);
  EXPECT_FALSE(core.reservation().has_value());  // the cycle's: none
  EXPECT_TRUE(core.CycleKeptInvariants());
}

TEST(CoreSessionCycleTest, BrokenInvariantsAreFoundEvenWithARebuildAskedFor) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(BuiltOnOneNode(core, table));
  EXPECT_TRUE(core.CycleKeptInvariants());
  Allocation stray;  // held by the cluster, by no job
  stray.node = NodeId(0);
  stray.cpu = MilliCpu(1000);
  ASSERT_TRUE(core.state()->Allocate(stray).ok());
  EXPECT_FALSE(core.CycleKeptInvariants());
  core.RequestRebuild();
  EXPECT_TRUE(core.CheckInvariants().empty());  // not while rebuilding
  EXPECT_FALSE(core.CycleKeptInvariants());
}

TEST(CoreSessionCopiesTest, TheWaitContextAndTheForecastLeaveOutGatedJobsAndMarkTheReserved) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(WithLifecycle(core, table));
  ForecastInput unbuilt;
  EXPECT_FALSE(core.CopyForForecast(kSecond, unbuilt));
  EXPECT_FALSE(unbuilt.state.has_value());
  EXPECT_FALSE(core.WaitContextOf(table, kSecond).built);

  ASSERT_TRUE(core.BuildState({testing::GpuNode("n1", 8)}).ok());
  ASSERT_TRUE(core.BuildScheduler(0).ok());
  AddPending(core, table, 7, false);
  AddPending(core, table, 8, true);
  const JobId reserved = AddPending(core, table, 9, false).id;  // records move as they grow
  AddPending(core, table, 10, true);
  LiveJob& done = table.Add(JobNumber(11));  // finished (a fresh slot's record)
  done.durable = true;
  table.Add(JobNumber(12));  // not durable yet
  core.FinishRebuild();
  core.reservation() = Reservation{reserved, 90 * kSecond, {}};

  const WaitContext c = core.WaitContextOf(table, kSecond);
  EXPECT_TRUE(c.built);
  EXPECT_EQ(c.nodes_up, 1u);
  EXPECT_EQ(c.reserved_job, JobNumber(9));
  EXPECT_EQ(c.reserved_start, 90 * kSecond);
  EXPECT_EQ(c.tree, core.shared_tree());
  EXPECT_NE(c.live, nullptr);  // jobs wait
  EXPECT_TRUE(c.borrowers.empty());

  EtaSnapshot snap;
  ASSERT_TRUE(core.CopyForForecast(kSecond, snap.in));
  EXPECT_EQ(snap.in.now, kSecond);
  EXPECT_EQ(snap.in.tree, core.shared_tree());
  ASSERT_TRUE(snap.in.state.has_value());
  EXPECT_EQ(snap.in.state->node_count(), 1u);
  EXPECT_EQ(snap.in.placement, "bestfit");
  EXPECT_EQ(snap.in.policy.name, core.policy().name);
  EXPECT_TRUE(snap.in.usage.has_value());
  core.CopyForecastJobs(
      table,
      [](const LiveJob& job) {
        return job.id() == JobNumber(8) ? std::string("held by its user") : std::string();
      },
      snap);
  EXPECT_EQ(snap.ids, (std::vector<JobNumber>{JobNumber(7), JobNumber(9)}));
  ASSERT_EQ(snap.in.jobs.size(), 2u);
  EXPECT_EQ(snap.in.reserved, 1);
  EXPECT_EQ(snap.in.jobs[1].record.id, reserved);
  EXPECT_EQ(snap.gated.size(), 2u);
  EXPECT_EQ(snap.gated[8], "held by its user");
  EXPECT_EQ(snap.gated[10], "waiting for the next scheduling cycle");
  EXPECT_EQ(snap.core_predicted.size(), core.policy().uses_predictor ? 2u : 0u);
}

// ---- the cluster's nodes (core_session_nodes.cc) ----

// A core of queue main (4 GPUs of quota) over `nodes`, the lifecycle on `table`'s records,
// built once (its up nodes); no module holds a node unless `held` names it.
struct NodesCore {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  NodeRegistry nodes;
  std::string held;
  CoreSession::NodeHold hold = [this](const std::string& name) { return name == held; };
  std::vector<std::pair<JobNumber, std::string>> misfits;
  CoreSession::MisfitSink misfit = [this](LiveJob& job, const std::string& why) {
    misfits.emplace_back(job.id(), why);
  };

  NodesCore() {
    EXPECT_TRUE(core.ChoosePolicy(std::nullopt, "fifo", 0, 0).ok());
    EXPECT_TRUE(core.ApplyQueueYaml(kMainQueue).ok());
    core.MakeLifecycle(table.records(), nullptr);
  }
  NodeInfo& Up(const std::string& name, int gpus) {
    NodeInfo& node = nodes.FindOrAdd(name);
    node.inventory.spec = testing::GpuNode(name, gpus);
    node.up = true;
    return node;
  }
  Status Rebuild() { return core.Rebuild(nodes, table, hold, kSecond, misfit); }
  // A module's job holding the whole of `node`, its task placed there.
  LiveJob& NodeJobOn(const std::string& node) {
    NodeJob request;
    request.name = "check-" + node;
    request.queue = "main";
    request.command = "true";
    StatusOr<LiveJob*> job = core.AddNodeJob(table, node, request, kSecond);
    EXPECT_TRUE(job.ok()) << job.status().message();
    job.value()->tasks = {TaskRun{node, 0}};
    table.Rec(*job.value()).attempt.tasks.resize(1);  // launched (StartJob), not exited
    return *job.value();
  }
  const NodeLedger& Ledger(const std::string& node) const {
    return core.state()->node(core.state()->FindNode(node).value());
  }
};

TEST(CoreSessionNodesTest, ARebuildTakesTheUpNodesInTheirOrderDrainedAndPutsJobsBack) {
  NodesCore c;
  c.Up("b", 4);
  c.Up("a", 4).drain = DrainInfo{"broken", "admin", "admin", 0};
  c.Up("c", 4).gpu_drains[1] = DrainInfo{"hot", "health", "thermal", 0};
  c.Up("d", 4).up = false;
  c.held = "c";
  c.nodes.respec().insert("b");
  ASSERT_TRUE(c.Rebuild().ok());
  EXPECT_FALSE(c.core.rebuild_pending());
  ASSERT_EQ(c.core.state()->node_count(), 3u);
  EXPECT_EQ(c.core.state()->spec(NodeId(0)).name, "b");  // the order they became known
  EXPECT_EQ(c.core.state()->spec(NodeId(1)).name, "a");
  EXPECT_TRUE(c.Ledger("a").drained());
  EXPECT_TRUE(c.Ledger("b").drained());  // awaited a respec while the drains were applied
  EXPECT_TRUE(c.Ledger("c").drained());  // held by a module
  EXPECT_TRUE(c.Ledger("c").gpus()[1].drained());
  EXPECT_FALSE(c.Ledger("c").gpus()[0].drained());
  EXPECT_TRUE(c.nodes.respec().empty());

  // Jobs are put back: one on a node still up is held; one whose node came back smaller
  // goes to the sink, after the rebuild finished.
  c.nodes.respec().clear();
  c.held.clear();
  c.Up("a", 4).drain.reset();
  LiveJob& on_b = c.NodeJobOn("b");
  LiveJob& on_a = c.NodeJobOn("a");
  c.Up("a", 2);
  ASSERT_TRUE(c.Rebuild().ok());
  EXPECT_EQ(c.table.Rec(on_b).held, (std::vector<uint8_t>{1}));
  EXPECT_EQ(c.Ledger("b").gpus()[0].drained(), false);
  ASSERT_EQ(c.misfits.size(), 1u);
  EXPECT_EQ(c.misfits[0].first, on_a.id());
  EXPECT_EQ(c.core.rebuilds(), 2u);

  // A job in a queue the tree lacks: Internal, the rebuild left pending.
  c.table.all().at(on_b.id()).row.queue = "gone";
  EXPECT_EQ(c.Rebuild().code(), StatusCode::kInternal);
  EXPECT_EQ(c.core.rebuilds(), 2u);
}

TEST(CoreSessionNodesTest, ANodeJoinsInPlaceAndItsTasksAreAttachedAgain) {
  NodesCore c;
  NodeInfo& a = c.Up("a", 4);
  c.core.JoinNode(a, c.nodes, c.table, c.hold, c.misfit);  // not built: nothing
  EXPECT_EQ(c.core.state(), nullptr);
  ASSERT_TRUE(c.Rebuild().ok());
  NodeInfo& b = c.Up("b", 4);
  b.drain = DrainInfo{"broken", "admin", "admin", 0};
  c.core.JoinNode(b, c.nodes, c.table, c.hold, c.misfit);
  ASSERT_TRUE(c.core.state()->FindNode("b").ok());
  EXPECT_TRUE(c.Ledger("b").drained());
  b.drain.reset();

  // Only its labels changed: relabelled, no respec.
  b.inventory.spec.labels = {{"rack", "r2"}};
  c.core.JoinNode(b, c.nodes, c.table, c.hold, c.misfit);
  EXPECT_EQ(c.core.state()->spec(c.core.state()->FindNode("b").value()).labels,
            b.inventory.spec.labels);
  EXPECT_FALSE(c.nodes.AwaitsRespec("b"));
  EXPECT_FALSE(c.Ledger("b").drained());

  // Its tasks, detached when it left, are held again when it comes back; a node back
  // with less hands its job to the sink.
  LiveJob& on_a = c.NodeJobOn("a");
  LiveJob& on_b = c.NodeJobOn("b");
  c.core.lifecycle()->DetachTask(c.table.Rec(on_a), 0);
  c.core.lifecycle()->DetachTask(c.table.Rec(on_b), 0);
  c.core.LeaveNode("a", c.nodes);
  c.core.LeaveNode("b", c.nodes);
  EXPECT_FALSE(c.core.state()->FindNode("a").ok());
  c.core.JoinNode(a, c.nodes, c.table, c.hold, c.misfit);
  EXPECT_EQ(c.table.Rec(on_a).held, (std::vector<uint8_t>{1}));
  EXPECT_TRUE(c.misfits.empty());
  c.core.JoinNode(c.Up("b", 2), c.nodes, c.table, c.hold, c.misfit);
  ASSERT_EQ(c.misfits.size(), 1u);
  EXPECT_EQ(c.misfits[0].first, on_b.id());
  EXPECT_FALSE(c.core.rebuild_pending());
}

TEST(CoreSessionNodesTest, ANewSpecWaitsUntilTheNodeHoldsNothing) {
  NodesCore c;
  c.Up("a", 4);
  ASSERT_TRUE(c.Rebuild().ok());
  LiveJob& job = c.NodeJobOn("a");
  NodeInfo& a = c.Up("a", 8);
  c.core.JoinNode(a, c.nodes, c.table, c.hold, c.misfit);
  EXPECT_TRUE(c.nodes.AwaitsRespec("a"));
  EXPECT_TRUE(c.Ledger("a").drained());
  c.core.ApplyRespecs(c.nodes, c.hold);  // still holds the job
  EXPECT_TRUE(c.nodes.AwaitsRespec("a"));
  EXPECT_EQ(c.Ledger("a").gpus().size(), 4u);

  c.core.lifecycle()->DetachTask(c.table.Rec(job), 0);
  c.core.ApplyRespecs(c.nodes, c.hold);
  EXPECT_FALSE(c.nodes.AwaitsRespec("a"));
  EXPECT_EQ(c.Ledger("a").gpus().size(), 8u);
  EXPECT_FALSE(c.Ledger("a").drained());

  // A node no longer up leaves the respecs; one that leaves the core leaves them too.
  c.nodes.respec().insert("a");
  a.up = false;
  c.core.ApplyRespecs(c.nodes, c.hold);
  EXPECT_FALSE(c.nodes.AwaitsRespec("a"));
  c.nodes.respec().insert("a");
  c.core.LeaveNode("a", c.nodes);
  EXPECT_FALSE(c.nodes.AwaitsRespec("a"));
  EXPECT_EQ(c.core.state()->present_count(), 0u);
}

TEST(CoreSessionNodesTest, DrainsFollowTheNodeItsRespecAndTheModulesHold) {
  NodesCore c;
  NodeInfo& a = c.Up("a", 4);
  c.core.ApplyDrains(a, c.nodes, c.hold);  // not built: nothing
  ASSERT_TRUE(c.Rebuild().ok());
  a.gpu_drains[3] = DrainInfo{"hot", "health", "thermal", 0};
  c.core.ApplyDrains(a, c.nodes, c.hold);
  EXPECT_FALSE(c.Ledger("a").drained());
  EXPECT_TRUE(c.Ledger("a").gpus()[3].drained());
  c.held = "a";
  c.core.ApplyDrains(a, c.nodes, c.hold);
  EXPECT_TRUE(c.Ledger("a").drained());
  c.held.clear();
  a.gpu_drains.clear();
  c.core.ApplyDrains(a, c.nodes, c.hold);
  EXPECT_FALSE(c.Ledger("a").drained());
  EXPECT_FALSE(c.Ledger("a").gpus()[3].drained());
}

TEST(CoreSessionNodesTest, ANodeJobIsAddedRunningOnlyWhenTheWholeNodeIsFree) {
  NodesCore c;
  c.Up("a", 4);
  NodeJob request;
  request.queue = "main";
  request.command = "true";
  EXPECT_EQ(c.core.AddNodeJob(c.table, "a", request, kSecond).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Rebuild().ok());
  EXPECT_EQ(c.core.AddNodeJob(c.table, "z", request, kSecond).status().code(),
            StatusCode::kNotFound);
  StatusOr<LiveJob*> job = c.core.AddNodeJob(c.table, "a", request, 2 * kSecond);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(c.table.Rec(*job.value()).phase, JobPhase::kRunning);
  EXPECT_EQ(c.table.Rec(*job.value()).run_start, 2 * kSecond);
  EXPECT_EQ(c.Ledger("a").gpus()[0].free_milli(), MilliGpu(0));
  EXPECT_FALSE(c.core.AddNodeJob(c.table, "a", request, 3 * kSecond).ok());  // no room
  EXPECT_EQ(c.table.all().size(), 1u);
}


// A store whose commits fail while `down`.
class FlakyStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Commit(WriteBatch batch) override {
    return down ? UnavailableError("store down") : ForwardingStore::Commit(std::move(batch));
  }
  bool down = false;
};

TEST(CoreSessionQueuesTest, AReplacementKeepsEveryUnfinishedJobsQueueAndIsStoredOrUndone) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(BuiltOnOneNode(core, table));
  const ManualClock clock(5 * kSecond);
  InMemoryStore memory;
  FlakyStore store(&memory);
  LiveJob& waiting = table.Add(JobNumber(1));
  waiting.durable = true;
  waiting.row.queue = "main";
  table.Rec(waiting).phase = JobPhase::kPending;
  LiveJob& done = table.Add(JobNumber(2));  // finished (a fresh slot's record): may lose it
  done.durable = true;
  done.row.queue = "gone";
  LiveJob& unacked = table.Add(JobNumber(3));  // not durable yet: not looked at
  unacked.row.queue = "gone";
  table.Rec(unacked).phase = JobPhase::kPending;
  auto stored = [&] { return memory.GetKv(job_rows::kQueuesKey).value(); };

  const std::string other = "queues:\n  - name: other\n    tenant: team-a\n";
  Status s = core.ReplaceQueues(other, table, store, clock);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "queue 'main' has unfinished jobs (job 1)");
  EXPECT_FALSE(core.ReplaceQueues("queues: [", table, store, clock).ok());
  EXPECT_FALSE(stored().has_value());
  EXPECT_EQ(core.queues_yaml(), kMainQueue);
  EXPECT_TRUE(core.tree().FindQueue("main").ok());
  EXPECT_NE(core.scheduler(), nullptr);

  const std::string both = std::string(kMainQueue) + "  - name: other\n    tenant: team-a\n";
  store.down = true;
  EXPECT_EQ(core.ReplaceQueues(both, table, store, clock).message(), "store down");
  EXPECT_EQ(core.queues_yaml(), kMainQueue);
  EXPECT_FALSE(core.tree().FindQueue("other").ok());
  EXPECT_NE(core.scheduler(), nullptr);
  store.down = false;
  ASSERT_TRUE(core.ReplaceQueues(both, table, store, clock).ok());
  EXPECT_EQ(stored(), both);
  EXPECT_EQ(core.queues_yaml(), both);
  EXPECT_TRUE(core.tree().FindQueue("other").ok());
  // Stored: the scheduler is dropped, its fair share carried over as of the clock.
  EXPECT_EQ(core.scheduler(), nullptr);
  ASSERT_TRUE(core.carried_usage().has_value());
  EXPECT_EQ(core.carried_usage()->at, 5 * kSecond);
}

constexpr const char* kOtherQueue = R"(queues:
  - name: other
    tenant: team-b
    quota:
      gpu: 2
)";

// At Open: the stored configuration wins; with none, the given one is applied and stored.
TEST(CoreSessionLoadTest, TheStoredQueuesWinAndTheInitialOnesAreStoredOnce) {
  InMemoryStore store;
  CoreSession first = testing::BestFitSession();
  ASSERT_TRUE(first.LoadQueues(store, kMainQueue).ok());
  EXPECT_TRUE(first.tree().FindQueue("main").ok());
  EXPECT_EQ(store.GetKv(job_rows::kQueuesKey).value(), std::optional<std::string>(kMainQueue));
  CoreSession again = testing::BestFitSession();
  ASSERT_TRUE(again.LoadQueues(store, kOtherQueue).ok());
  EXPECT_TRUE(again.tree().FindQueue("main").ok());
  EXPECT_FALSE(again.tree().FindQueue("other").ok());
  EXPECT_EQ(store.GetKv(job_rows::kQueuesKey).value(), std::optional<std::string>(kMainQueue));
  CoreSession bad = testing::BestFitSession();
  InMemoryStore empty;
  EXPECT_FALSE(bad.LoadQueues(empty, "queues: [").ok());
  EXPECT_FALSE(empty.GetKv(job_rows::kQueuesKey).value().has_value());  // nothing stored
}

TEST(CoreSessionLoadTest, RestoredBackoffsHoldTheirJobsUntilTheyEnd) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(BuiltOnOneNode(core, table));
  AddPending(core, table, 3, false);
  AddPending(core, table, 4, false);  // not held
  JobRecord& held = table.Rec(*table.Find(JobNumber(3)));
  const JobId held_id = held.id;
  core.HoldRestarts({{&held, 5 * kSecond}});
  EXPECT_EQ(core.lifecycle()->HeldUntil(held_id), 5 * kSecond);
  EXPECT_TRUE(core.ReleaseDue(4 * kSecond).empty());
  EXPECT_EQ(core.ReleaseDue(5 * kSecond), (std::vector<JobId>{held_id}));
}

// What the modules' and views' step reads of the core: whether it is built and current,
// whether a node holds nothing, and the scheduler's figures for /metrics.
TEST(CoreSessionCopiesTest, ReadyIdleNodesAndFigures) {
  CoreSession core = testing::BestFitSession();
  JobTable table;
  ASSERT_NO_FATAL_FAILURE(WithLifecycle(core, table));
  EXPECT_FALSE(core.ready());
  EXPECT_FALSE(core.NodeIdle("n1"));  // no cluster state yet
  EXPECT_EQ(core.figures().rebuilds, 0u);

  ASSERT_TRUE(core.BuildState({testing::GpuNode("n1", 8), testing::GpuNode("n2", 8)}).ok());
  ASSERT_TRUE(core.BuildScheduler(0).ok());
  EXPECT_FALSE(core.ready());  // until the rebuild is finished
  core.FinishRebuild();
  EXPECT_TRUE(core.ready());
  EXPECT_TRUE(core.NodeIdle("n1"));
  EXPECT_FALSE(core.NodeIdle("n3"));  // unknown
  const NodeId n2 = core.state()->FindNode("n2").value();
  ASSERT_TRUE(core.state()->Allocate(Allocation{n2, MilliCpu(0), MiB(1), {}}).ok());
  EXPECT_FALSE(core.NodeIdle("n2"));  // memory only
  EXPECT_TRUE(core.NodeIdle("n1"));
  core.RequestRebuild();
  EXPECT_FALSE(core.ready());

  testing::TeachSomeWork(core);
  EXPECT_EQ(core.figures().typical_tasks, 0u);  // no model made yet
  ASSERT_TRUE(core.learner().Refresh());
  const SchedulerFigures figures = core.figures();
  EXPECT_EQ(figures.rebuilds, 1u);
  EXPECT_EQ(figures.tasks_observed, 5);
  EXPECT_EQ(figures.models_made, 1);
  EXPECT_GT(figures.typical_tasks, 0u);
  EXPECT_EQ(figures.typical_tasks, core.learner().model()->workload().tasks.size());
}

}  // namespace core_session_test
}  // namespace tessera
