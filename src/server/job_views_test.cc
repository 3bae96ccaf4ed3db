#include "server/job_views.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <type_traits>

#include "sched/job_lifecycle.h"
#include "sched/testing/scheduler_harness.h"
#include "server/job_table.h"
#include "server/pending_reasons.h"

namespace tessera {
namespace {

// The API's job ids and the core's slots do not mix: neither converts to the other, and
// an integer becomes a JobNumber only when said so (at the store, HTTP and agent
// boundaries).
static_assert(!std::is_convertible_v<JobId, JobNumber> &&
              !std::is_constructible_v<JobNumber, JobId>);
static_assert(!std::is_convertible_v<JobNumber, JobId> &&
              !std::is_constructible_v<JobId, JobNumber>);
static_assert(!std::is_convertible_v<uint64_t, JobNumber>);

using namespace ::tessera::testing;  // NOLINT: the core's test builders

const Principal kAdmin{Role::kAdmin, "", "test"};

std::shared_ptr<const JobView> View(uint64_t id, std::string tenant, std::string state,
                                    std::string queue = "q") {
  auto v = std::make_shared<JobView>();
  v->id = JobNumber(id);
  v->tenant = std::move(tenant);
  v->queue = std::move(queue);
  v->state = std::move(state);
  v->body = "{\"id\":" + std::to_string(id);
  if (id % 2 == 0) {
    v->spec = R"({"command":["true"]})";  // spliced in by Text; none is null
  }
  v->reason = "fixed";
  return v;
}

std::vector<uint64_t> Ids(const PublishedJobs::Page& page) {
  std::vector<uint64_t> out;
  for (const auto& v : page.jobs) {
    out.push_back(v->id.value());
  }
  return out;
}

TEST(PublishedJobsTest, ListsNewestFirstAcrossStepsWithFiltersVisibilityAndPages) {
  PublishedJobs jobs(GpuCatalog::Default());
  // 1000 jobs (the walk takes the lock in steps of 256): team-a's every 7th is running.
  for (uint64_t id = 1; id <= 1000; ++id) {
    const bool a = id % 2 == 0;
    jobs.Put(View(id, a ? "team-a" : "team-b", a && id % 7 == 0 ? "running" : "pending"));
  }
  JobFilter running;
  running.states = {"running"};
  PublishedJobs::Page page = jobs.List(kAdmin, running, JobNumber(0), 3);
  EXPECT_EQ(Ids(page), (std::vector<uint64_t>{994, 980, 966}));
  EXPECT_TRUE(page.more);
  // The next page resumes below the last id; the last page says there is no more.
  page = jobs.List(kAdmin, running, JobNumber(966), 1000);
  EXPECT_EQ(page.jobs.size(), 68u);  // 71 multiples of 14 up to 994, less the first 3
  EXPECT_EQ(page.jobs.back()->id.value(), 14u);
  EXPECT_FALSE(page.more);
  // A tenant sees only its own jobs, whatever it filters by.
  const Principal b{Role::kTenant, "team-b", "t"};
  EXPECT_TRUE(jobs.List(b, running, JobNumber(0), 10).jobs.empty());
  page = jobs.List(b, JobFilter{}, JobNumber(0), 1000);
  EXPECT_EQ(page.jobs.size(), 500u);
  EXPECT_EQ(page.jobs.front()->id.value(), 999u);
  EXPECT_EQ(
      jobs.List(Principal{Role::kNode, "", "node-1"}, JobFilter{}, JobNumber(0), 10).jobs.size(),
      0u);

  jobs.Erase(JobNumber(994));
  EXPECT_EQ(jobs.Get(JobNumber(994)), nullptr);
  EXPECT_EQ(jobs.List(kAdmin, running, JobNumber(0), 1).jobs.front()->id.value(), 980u);
  EXPECT_EQ(jobs.Text(*jobs.Get(JobNumber(980))),
            R"({"id":980,"spec":{"command":["true"]},"reason":"fixed"})");
  jobs.Put(View(981, "ta", "running"));
  EXPECT_EQ(jobs.Text(*jobs.Get(JobNumber(981))), R"({"id":981,"spec":null,"reason":"fixed"})");
}

TEST(PublishedJobsTest, APendingJobsReasonIsWorkedOutFromTheLatestContext) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  PublishedJobs jobs(catalog);
  auto pending = std::make_shared<JobView>(*View(7, "team-a", "pending"));
  pending->pending = true;
  pending->reason = "";
  pending->demand = DemandOf(JobNumber(7), "q", Gang("g", "q", {2}), catalog);
  jobs.Put(pending);
  auto reason = [&] { return nlohmann::json::parse(jobs.Text(*jobs.Get(JobNumber(7))))["reason"]; };
  EXPECT_EQ(reason(), "waiting for the next scheduling cycle");  // no context yet

  auto tree = std::make_shared<QueueTree>(
      QueueTree::Create(Tree({QueueNode("q", "", {Q(kGpu, 2000)})}), catalog).value());
  auto quota = std::make_shared<QuotaLedger>(*tree);
  // One node of `gpus` H100s, `busy` of them taken.
  auto context = [&](int gpus, int busy = 0) {
    ClusterState state = ClusterState::Create({GpuNode("n1", gpus)}, catalog).value();
    for (int g = 0; g < busy; ++g) {
      Allocation a;
      a.node = NodeId(0);
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
      EXPECT_TRUE(state.Allocate(a).ok());
    }
    auto c = std::make_shared<WaitContext>();
    c->built = true;
    c->nodes_up = gpus > 0 ? 1 : 0;
    c->fit = std::make_shared<const FitCache>(state);
    c->live = std::make_shared<const LiveCache>(state);
    c->tree = tree;
    c->quota = quota;
    c->charge = ChargeIndex::Of(*tree, catalog);
    return c;
  };
  auto none = context(8);
  none->nodes_up = 0;
  jobs.SetContext(none);
  EXPECT_EQ(reason(), "no node is up");
  jobs.SetContext(context(1));
  EXPECT_EQ(reason(),
            "never fits: a task asks 2 GPUs on one node; a schedulable node has at most 1");
  jobs.SetContext(context(8, 7));
  EXPECT_EQ(reason(),
            "waiting for resources: a task needs 2 free GPUs on one node; the most on a "
            "schedulable node is 1 (1 in all); jobs ahead of it or running hold them");
  jobs.SetContext(context(8));
  EXPECT_EQ(reason(),
            "waiting for its turn: it fits the free resources now; jobs ahead of it go first (at "
            "the next scheduling cycle)");
  // The queue's quota is used up (by another job's 1 GPU of its 2).
  quota->Add(tree->FindQueue("q").value(), ResourceVector{1000});
  EXPECT_EQ(reason(),
            "waiting for quota: the job asks 2 GPUs; queue q uses 1 GPU of its nominal 2 GPUs and "
            "has 1 GPU left");
  auto reserved = context(8);
  reserved->reserved_job = JobNumber(7);
  reserved->reserved_start = 1'800'000'000LL * 1'000'000;
  jobs.SetContext(reserved);
  EXPECT_EQ(reason().get<std::string>().rfind("next to start: resources are reserved", 0), 0u);

  // A requeued job says why, then why it waits.
  auto requeued = std::make_shared<JobView>(*pending);
  requeued->reason = "requeued: node n1 was lost";
  jobs.Put(requeued);
  EXPECT_EQ(reason().get<std::string>().rfind("requeued: node n1 was lost; next to start", 0), 0u);
}

// What is short on the live nodes, by resource.
TEST(PendingReasonsTest, LiveReasonsNameTheShortResource) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  ClusterState state =
      ClusterState::Create({GpuNode("n1", 8), GpuNode("n2", 8)}, catalog).value();
  auto take = [&](uint32_t node, int gpus, int64_t cpu) {
    Allocation a;
    a.node = NodeId(node);
    a.cpu = MilliCpu(cpu);
    for (int g = 0; g < gpus; ++g) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
    ASSERT_TRUE(state.Allocate(a).ok());
  };
  take(0, 6, 121000);  // n1: 2 GPUs and 7 CPUs free
  take(1, 6, 120000);  // n2: 2 GPUs and 8 CPUs free
  const TopologyPolicy any;
  EXPECT_EQ(LiveCache(state).Short({Whole(4)}, any),
            "waiting for resources: a task needs 4 free GPUs on one node; the most on a "
            "schedulable node is 2 (4 in all); jobs ahead of it or running hold them");
  TaskRequest cpu_heavy = Whole(1, 8000);
  EXPECT_EQ(LiveCache(state).Short({cpu_heavy}, any), "");  // n2 has the CPUs
  take(1, 0, 1000);
  EXPECT_EQ(LiveCache(state).Short({cpu_heavy}, any),
            "waiting for resources: a task needs 8 free CPUs on one node; the most free on a "
            "schedulable node is 7; jobs ahead of it or running hold them");
  // Each task fits alone, not the gang within one node.
  EXPECT_EQ(LiveCache(state).Short({Whole(2), Whole(2)}, {TopologyScope::kNode, true}),
            "waiting for resources: the gang's 2 tasks (4 GPUs) do not fit together within one "
            "node now; jobs ahead of it or running hold the rest");
  EXPECT_EQ(LiveCache(state).Short({Whole(2), Whole(2)}, any), "");
  // A drained node with room.
  ClusterState drained =
      ClusterState::Create({GpuNode("n1", 8), GpuNode("n2", 8)}, catalog).value();
  Allocation all;
  all.node = NodeId(0);
  for (int g = 0; g < 8; ++g) {
    all.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
  }
  ASSERT_TRUE(drained.Allocate(all).ok());
  ASSERT_TRUE(drained.SetNodeDrained(NodeId(1), true).ok());
  EXPECT_EQ(LiveCache(drained).Short({Whole(1)}, any),
            "held by a drain: drained node n2 would hold a task now; the schedulable nodes are "
            "busy");
}

TEST(PendingReasonsTest, QuotaBeyondNominalSaysWhatTheCohortCanLend) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  auto tree = std::make_shared<QueueTree>(
      QueueTree::Create(TwoQueueCohort(8000, 8000), catalog).value());
  auto quota = std::make_shared<QuotaLedger>(*tree);
  quota->Add(tree->FindQueue("a").value(), ResourceVector{6000});
  quota->Add(tree->FindQueue("b").value(), ResourceVector{8000});
  auto c = std::make_shared<WaitContext>();
  c->built = true;
  c->nodes_up = 1;
  c->tree = tree;
  c->quota = quota;
  c->charge = ChargeIndex::Of(*tree, catalog);
  PendingDemand d = DemandOf(JobNumber(7), "a", Gang("g", "a", {4}), catalog);
  EXPECT_EQ(PendingReasonOf(d, *c, catalog),
            "waiting for quota: the job asks 4 GPUs; queue a of cohort c uses 6 GPUs of its "
            "nominal 8 GPUs and can borrow only 2 GPUs more from its cohort now");
}

// A queue under its nominal quota whose lent quota a borrower holds: the reason names
// the borrower, its job and when reclaim may take it back.
TEST(PublishedJobsTest, QuotaReasonNamesTheBorrowerAndReclaim) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  auto tree = std::make_shared<QueueTree>(
      QueueTree::Create(TwoQueueCohort(8000, 0), catalog).value());
  auto quota = std::make_shared<QuotaLedger>(*tree);
  quota->Add(tree->FindQueue("b").value(), ResourceVector{8000});
  auto c = std::make_shared<WaitContext>();
  c->built = true;
  c->nodes_up = 1;
  c->tree = tree;
  c->quota = quota;
  c->charge = ChargeIndex::Of(*tree, catalog);
  c->borrowers.push_back({"b", JobNumber(12), 1'800'000'000LL * 1'000'000});
  PendingDemand d = DemandOf(JobNumber(7), "a", Gang("g", "a", {8}), catalog);
  EXPECT_EQ(PendingReasonOf(d, *c, catalog),
            "waiting for quota: the job asks 8 GPUs; queue a of cohort c uses 0 GPUs of its "
            "nominal 8 GPUs; the rest of its quota is lent to queue b (job 12); reclaim is off in "
            "the policy: it waits for them to finish");
  c->reclaim = true;
  c->min_run_before_reclaim = 600'000'000;
  EXPECT_EQ(PendingReasonOf(d, *c, catalog),
            "waiting for quota: the job asks 8 GPUs; queue a of cohort c uses 0 GPUs of its "
            "nominal 8 GPUs; the rest of its quota is lent to queue b (job 12); reclaim is on: "
            "they are preempted to give it back once they have run 10m (from "
            "2027-01-15T08:10:00Z)");
  c->borrowers.front().preemptible = false;
  EXPECT_EQ(PendingReasonOf(d, *c, catalog),
            "waiting for quota: the job asks 8 GPUs; queue a of cohort c uses 0 GPUs of its "
            "nominal 8 GPUs; the rest of its quota is lent to queue b (job 12); reclaim is on, "
            "but they are not preemptible: it waits for them to finish");
}

}  // namespace

namespace job_views_test {

using namespace ::tessera::testing;  // NOLINT: the core's test builders

// A durable job of queue q asking one task of 2 GPUs.
LiveJob& AddJob(JobTable& table, uint64_t id, JobPhase phase, std::string reason,
                const QueueTree& tree) {
  LiveJob& job = table.Add(JobNumber(id));
  job.durable = true;
  job.row.id = id;
  job.row.queue = "q";
  job.row.reason = std::move(reason);
  JobRecord& rec = table.Rec(job);
  rec.spec = Gang("g", "q", {2});
  rec.queue = tree.FindQueue("q").value();
  rec.phase = phase;
  return job;
}

TEST(FillJobReasonTest, APendingJobKeepsItsDemandAndOnlyARequeuesReasonOrItsGates) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  auto tree = std::make_shared<QueueTree>(
      QueueTree::Create(Tree({QueueNode("q", "", {Q(kGpu, 2000)})}), catalog).value());
  JobTable table;
  JobLifecycle lifecycle(table.records(), tree.get(), nullptr, {});
  const LiveJob& fresh = AddJob(table, 7, JobPhase::kPending, "preemptible", *tree);
  const LiveJob& requeued = AddJob(table, 8, JobPhase::kPending, "requeued: node n1 was lost", *tree);
  LiveJob& done = AddJob(table, 9, JobPhase::kFinished, "exit code 3", *tree);
  table.Rec(done).end = JobEnd::kFailed;
  int asked = 0;
  auto open = [&] {
    ++asked;
    return std::string();
  };

  JobView view;
  FillJobReason(fresh, table, lifecycle, catalog, open, view);
  EXPECT_TRUE(view.pending);
  EXPECT_FALSE(view.gated);
  EXPECT_EQ(view.reason, "");  // a reason that is no requeue's is not shown while pending
  EXPECT_EQ(view.restart_at, 0);
  EXPECT_EQ(view.demand.job, JobNumber(7));
  EXPECT_EQ(view.demand.gpus, 2);
  EXPECT_EQ(asked, 1);
  // The reason worked out from a hand-built context: one node of 8 GPUs, 7 taken.
  ClusterState state = ClusterState::Create({GpuNode("n1", 8)}, catalog).value();
  for (int g = 0; g < 7; ++g) {
    Allocation a;
    a.node = NodeId(0);
    a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    ASSERT_TRUE(state.Allocate(a).ok());
  }
  WaitContext c;
  c.built = true;
  c.nodes_up = 1;
  c.fit = std::make_shared<const FitCache>(state);
  c.live = std::make_shared<const LiveCache>(state);
  c.tree = tree;
  c.quota = std::make_shared<const QuotaLedger>(*tree);
  c.charge = ChargeIndex::Of(*tree, catalog);
  EXPECT_EQ(PendingReasonOf(view.demand, c, catalog),
            "waiting for resources: a task needs 2 free GPUs on one node; the most on a "
            "schedulable node is 1 (1 in all); jobs ahead of it or running hold them");

  // A requeue's reason stays, with its backoff.
  lifecycle.HoldUntil(table.Rec(requeued), 5'000'000);
  JobView again;
  FillJobReason(requeued, table, lifecycle, catalog, open, again);
  EXPECT_EQ(again.reason, "requeued: node n1 was lost");
  EXPECT_EQ(again.restart_at, 5'000'000);
  EXPECT_EQ(again.demand.job, JobNumber(8));

  // A gate's reason is the whole reason.
  JobView gated;
  FillJobReason(fresh, table, lifecycle, catalog, [] { return std::string("held by its user"); },
                gated);
  EXPECT_TRUE(gated.gated);
  EXPECT_EQ(gated.reason, "held by its user");
  EXPECT_TRUE(gated.demand.tasks.empty());

  // A finished job keeps its reason, and its gates are not asked.
  asked = 0;
  JobView finished;
  FillJobReason(done, table, lifecycle, catalog, open, finished);
  EXPECT_FALSE(finished.pending);
  EXPECT_EQ(finished.reason, "exit code 3");
  EXPECT_EQ(asked, 0);
}

}  // namespace job_views_test
}  // namespace tessera
