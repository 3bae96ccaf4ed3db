#include "sched/job_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "sched/gpu_selection.h"
#include "sched/testing/scheduler_harness.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Catalog;
using ::tessera::testing::Model;

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

// ---------------------------------------------------------------------------------
// Order.

TEST(JobSchedulerTest, FifoStartsJobsInSubmissionOrder) {
  // Submitted (enqueued) out of order; only two of the three 4-GPU jobs fit.
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{}, SubmitOrder(false));
  JobId late = h.Submit(Gang("late", "q", {4}, 0, 30 * kSecond), 0);
  JobId first = h.Submit(Gang("first", "q", {4}, 0, 10 * kSecond), 0);
  JobId second = h.Submit(Gang("second", "q", {4}, 0, 20 * kSecond), 0);
  CycleResult r = h.Cycle(40 * kSecond);
  EXPECT_EQ(Started(r), (std::vector<uint64_t>{first.value(), second.value()}));
  EXPECT_EQ(h.job(late).phase, JobPhase::kPending);
  EXPECT_EQ(h.scheduler().pending(), 1u);
  EXPECT_EQ(r.tested, 2);  // the cluster is full: the cycle stops early
}

TEST(JobSchedulerTest, WithoutAnOrderPluginTiesBreakBySubmissionThenId) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  JobId b = h.Submit(Gang("b", "q", {8}, 0, 5 * kSecond), 0);
  JobId a = h.Submit(Gang("a", "q", {8}, 0, 1 * kSecond), 0);
  CycleResult r = h.Cycle(10 * kSecond);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{a.value()});
  EXPECT_EQ(h.job(b).phase, JobPhase::kPending);
}

TEST(JobSchedulerTest, HigherPriorityGoesFirstUnlessTheOrderIgnoresIt) {
  for (bool by_priority : {true, false}) {
    SCOPED_TRACE(by_priority);
    Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{}, SubmitOrder(by_priority));
    JobId low = h.Submit(Gang("low", "q", {8}, 0, 0), 0);
    JobId high = h.Submit(Gang("high", "q", {8}, 10, 5 * kSecond), 5 * kSecond);
    CycleResult r = h.Cycle(10 * kSecond);
    ASSERT_EQ(r.starts.size(), 1u);
    EXPECT_EQ(r.starts[0].job, by_priority ? high : low);
  }
}

TEST(JobSchedulerTest, EnqueueTwiceCountsOnceAndDequeueRemoves) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  JobId a = h.Submit(Gang("a", "q", {8}), 0);
  h.scheduler().Enqueue(h.job(a), 0);
  EXPECT_EQ(h.scheduler().pending(), 1u);
  h.scheduler().Dequeue(h.job(a));
  EXPECT_EQ(h.scheduler().pending(), 0u);
  CycleResult r = h.Cycle(kSecond);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(r.tested, 0);
}

// ---------------------------------------------------------------------------------
// Gangs and topology.

void ExpectSameUsage(const ClusterState& a, const ClusterState& b) {
  ASSERT_EQ(a.node_count(), b.node_count());
  for (size_t i = 0; i < a.node_count(); ++i) {
    EXPECT_TRUE(a.nodes()[i].SameUsage(b.nodes()[i])) << "node " << i;
  }
  EXPECT_EQ(a.allocated_gpu_milli(), b.allocated_gpu_milli());
  EXPECT_EQ(a.allocated_cpu(), b.allocated_cpu());
}

TEST(JobSchedulerTest, GangThatDoesNotFitLeavesStateAndQuotaUnchanged) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, Tree({QueueNode("q", "", {Q(kGpu, 16000)})}),
            SchedulerOptions{});
  JobId a = h.Submit(Gang("a", "q", {5}), 0);
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{a.value()});
  ASSERT_EQ(h.NodesOf(a), std::vector<uint32_t>{0});
  // 11 GPUs free (3 + 8) and the gang asks for 11: its first task fits n1, the
  // second fits nowhere, so the first must be rolled back.
  JobId gang = h.Submit(Gang("gang", "q", {5, 5, 1}), kSecond);
  const ClusterState before = h.state();
  const QuotaLedger quota_before = h.quota();
  const QueueId q = h.queue("q");
  CycleResult r = h.Cycle(kSecond);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(h.job(gang).phase, JobPhase::kPending);
  ExpectSameUsage(h.state(), before);
  EXPECT_EQ(h.state().node(NodeId(1)).free_gpu_milli().value(), 8000);
  EXPECT_EQ(h.quota().Usage(q, 0), quota_before.Usage(q, 0));
  EXPECT_EQ(h.quota().Usage(q, 0), 5000);
  EXPECT_EQ(h.scheduler().pending(), 1u);

  // Once a finishes the whole gang starts at once.
  h.Finish(a, 2 * kSecond);
  r = h.Cycle(2 * kSecond);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{gang.value()});
  EXPECT_EQ(h.job(gang).allocations.size(), 3u);
  EXPECT_EQ(h.quota().Usage(q, 0), 11000);
}

TEST(JobSchedulerTest, HardNodeTopologyWaitsRatherThanSpread) {
  for (bool hard : {true, false}) {
    SCOPED_TRACE(hard);
    Harness h({GpuNode("n0"), GpuNode("n1")}, OneQueue(), SchedulerOptions{});
    JobId x = h.Submit(Gang("x", "q", {6}), 0);
    JobId y = h.Submit(Gang("y", "q", {6}), 0);
    ASSERT_EQ(Started(h.Cycle(0)).size(), 2u);
    ASSERT_EQ(h.NodesOf(x), std::vector<uint32_t>{0});
    ASSERT_EQ(h.NodesOf(y), std::vector<uint32_t>{1});
    // 2 + 2 GPUs free: a [2, 2] gang fits only when spread over both nodes.
    JobSpec spec = Gang("g", "q", {2, 2});
    spec.topology = TopologyPolicy{TopologyScope::kNode, hard};
    JobId g = h.Submit(spec, kSecond);
    CycleResult r = h.Cycle(kSecond);
    if (hard) {
      EXPECT_TRUE(r.starts.empty());
      EXPECT_EQ(h.state().allocated_gpu_milli().value(), 12000);
    } else {
      ASSERT_EQ(Started(r), std::vector<uint64_t>{g.value()});
      EXPECT_EQ(h.NodesOf(g), (std::vector<uint32_t>{0, 1}));
    }
  }
}

TEST(JobSchedulerTest, HardNodeTopologyPutsTheGangOnTheTightestNodeThatHoldsIt) {
  Harness h({GpuNode("n0"), GpuNode("n1"), GpuNode("n2")}, OneQueue(), SchedulerOptions{});
  JobId x = h.Submit(Gang("x", "q", {6}), 0);  // n0: 2 free
  JobId y = h.Submit(Gang("y", "q", {4}), 0);  // n1: 4 free
  ASSERT_EQ(Started(h.Cycle(0)).size(), 2u);
  ASSERT_EQ(h.NodesOf(x), std::vector<uint32_t>{0});
  ASSERT_EQ(h.NodesOf(y), std::vector<uint32_t>{1});
  JobSpec spec = Gang("g", "q", {2, 2});
  spec.topology = TopologyPolicy{TopologyScope::kNode, true};
  JobId g = h.Submit(spec, kSecond);
  ASSERT_EQ(Started(h.Cycle(kSecond)), std::vector<uint64_t>{g.value()});
  EXPECT_EQ(h.NodesOf(g), (std::vector<uint32_t>{1, 1}));  // n1 (4 free), not n2 (8)
}

TEST(JobSchedulerTest, HardRackTopologyUsesOneRack) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 4; ++i) {
    NodeSpec n = GpuNode("n" + std::to_string(i));
    n.labels.push_back({"rack", i < 2 ? "r0" : "r1"});
    nodes.push_back(std::move(n));
  }
  Harness h(std::move(nodes), OneQueue(), SchedulerOptions{});
  JobId x = h.Submit(Gang("x", "q", {8}), 0);  // fills n0 (rack r0)
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{x.value()});
  // [8, 8] in one rack: only r1 has both nodes free.
  JobSpec spec = Gang("g", "q", {8, 8});
  spec.topology = TopologyPolicy{TopologyScope::kRack, true};
  JobId g = h.Submit(spec, kSecond);
  ASSERT_EQ(Started(h.Cycle(kSecond)), std::vector<uint64_t>{g.value()});
  std::vector<uint32_t> used = h.NodesOf(g);
  std::sort(used.begin(), used.end());
  EXPECT_EQ(used, (std::vector<uint32_t>{2, 3}));
}

// ---------------------------------------------------------------------------------
// Quota.

TEST(JobSchedulerTest, QuotaBlocksWithoutBorrowingAndAllowsWithIt) {
  for (bool borrowing : {false, true}) {
    SCOPED_TRACE(borrowing);
    SchedulerOptions o;
    o.borrowing = borrowing;
    Harness h({GpuNode("n0"), GpuNode("n1")}, TwoQueueCohort(8000, 8000), o);
    const QueueId a = h.queue("a");
    JobId small = h.Submit(Gang("small", "a", {2}), 0);
    JobId big = h.Submit(Gang("big", "a", {8, 4}), 0);  // 2 + 12 > nominal 8
    CycleResult r = h.Cycle(0);
    ASSERT_FALSE(r.starts.empty());
    EXPECT_EQ(r.starts[0].job, small);
    EXPECT_FALSE(r.starts[0].borrowing);
    if (borrowing) {
      ASSERT_EQ(Started(r), (std::vector<uint64_t>{small.value(), big.value()}));
      EXPECT_TRUE(r.starts[1].borrowing);
      EXPECT_EQ(h.quota().Usage(a, 0), 14000);
      EXPECT_TRUE(h.quota().IsBorrowing(a));
    } else {
      EXPECT_EQ(Started(r), std::vector<uint64_t>{small.value()});
      EXPECT_EQ(h.job(big).phase, JobPhase::kPending);
      EXPECT_EQ(h.quota().Usage(a, 0), 2000);
      EXPECT_EQ(h.state().allocated_gpu_milli().value(), 2000);
    }
  }
}

TEST(JobSchedulerTest, QueueWithoutQuotaCannotBorrowMoreThanTheCohortHas) {
  // b has no quota of its own and may only borrow what a does not use.
  Harness h({GpuNode("n0"), GpuNode("n1")},
            Tree({CohortNode("c"), QueueNode("a", "c", {Q(kGpu, 6000)}), QueueNode("b", "c")}),
            SchedulerOptions{});
  JobId b1 = h.Submit(Gang("b1", "b", {4}), 0);
  JobId b2 = h.Submit(Gang("b2", "b", {4}), 0);
  CycleResult r = h.Cycle(0);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{b1.value()});
  EXPECT_TRUE(r.starts[0].borrowing);
  EXPECT_EQ(h.job(b2).phase, JobPhase::kPending);
}

// ---------------------------------------------------------------------------------
// Preemption.

// A borrower's job started at t=0 with `gpus` GPUs and a checkpoint interval.
JobSpec Borrower(std::string name, int gpus, Micros interval) {
  JobSpec s = Gang(std::move(name), "b", {gpus});
  s.checkpoint_interval = interval;
  return s;
}

// b (nominal 4) borrows a's idle quota and fills the 8-GPU node with four 2-GPU jobs;
// a then asks for 2 GPUs of its nominal 8. Preempted at 1970 s with a 30 s grace, the
// victims have run 2000 s when evicted; with checkpoints every 0 / 600 / 700 / 1500 s
// they lose 2000 / 200 / 600 / 500 s of 2 GPUs: 4000 / 400 / 1200 / 1000 GPU-s.
void ExpectReclaimTakesCheapestBorrower(int64_t a_nominal_milli) {
  SchedulerOptions o;
  o.preempt_reclaim = true;
  ASSERT_EQ(o.grace, 30 * kSecond);
  Harness h({GpuNode("n0")}, TwoQueueCohort(a_nominal_milli, 4000), o);
  JobId v1 = h.Submit(Borrower("v1", 2, 0), 0);
  JobId v2 = h.Submit(Borrower("v2", 2, 600 * kSecond), 0);
  JobId v3 = h.Submit(Borrower("v3", 2, 700 * kSecond), 0);
  JobId v4 = h.Submit(Borrower("v4", 2, 1500 * kSecond), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 4u);
  ASSERT_TRUE(h.quota().IsBorrowing(h.queue("b")));
  const Micros now = 1970 * kSecond;
  JobId p = h.Submit(Gang("p", "a", {2}, 0, now), now);
  CycleResult r = h.Cycle(now);
  EXPECT_TRUE(r.starts.empty());
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].victim, v2);
  EXPECT_EQ(r.preemptions[0].preemptor, p);
  EXPECT_DOUBLE_EQ(r.preemptions[0].lost_gpu_seconds, 400.0);
  EXPECT_EQ(r.preemptions[0].evict_at, now + o.grace);
  EXPECT_EQ(h.job(v2).SavedProgress(now + o.grace, false), 1800 * kSecond);
  EXPECT_EQ(h.job(v1).phase, JobPhase::kRunning);
  EXPECT_EQ(h.job(v3).phase, JobPhase::kRunning);
  EXPECT_EQ(h.job(v4).phase, JobPhase::kRunning);
  // Deciding changed nothing: the victim still holds its GPUs and charge.
  EXPECT_EQ(h.state().allocated_gpu_milli().value(), 8000);
  EXPECT_EQ(h.quota().Usage(h.queue("b"), 0), 8000);

  // After the grace period the victim is evicted and the preemptor starts on its GPUs.
  h.Evict(v2, now + o.grace);
  EXPECT_EQ(h.job(v2).resumed_from, 1800 * kSecond);
  r = h.Cycle(now + o.grace);
  ASSERT_EQ(Started(r), std::vector<uint64_t>{p.value()});
  EXPECT_FALSE(r.starts[0].borrowing);
  EXPECT_TRUE(r.preemptions.empty());
}

// Cohort quota (a 8 + b 4 = 12) above the cluster's 8 GPUs: a's request fits the quota
// that is free, only the cluster is full.
TEST(JobSchedulerTest, ReclaimTakesTheBorrowerThatLosesLeastWork) {
  ExpectReclaimTakesCheapestBorrower(8000);
}

// Cohort quota equal to the cluster (a 4 + b 4 = 8 GPUs), the usual setup (the
// philly-vc preset bills exactly the cluster's GPUs): b borrows all of a's quota, so
// nothing is available to a now, yet a's request is within its nominal quota and must
// reclaim. Regression: reclaim used to be decided by QuotaLedger::Check(a, charge,
// /*allow_borrowing=*/false) == kNominal, which is kNo here (Available(a) is 0), so no
// queue ever got its lent quota back by preemption. Kueue's rule is usage + request
// <= nominal.
TEST(JobSchedulerTest, ReclaimWorksWhenTheCohortQuotaEqualsTheCluster) {
  ExpectReclaimTakesCheapestBorrower(4000);
}

TEST(JobSchedulerTest, ReclaimCountsPreemptionsInFlight) {
  // a 4 + b 4 on an 8-GPU node; b borrows everything with four 2-GPU jobs. Three 2-GPU
  // jobs of a arrive together: the first two fit a's nominal 4 GPUs and each reclaims
  // one victim; the third would take a beyond its nominal quota once the first two
  // start, so it takes nothing, and b is left exactly at its nominal quota.
  SchedulerOptions o;
  o.preempt_reclaim = true;
  Harness h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o);
  std::vector<JobId> v;
  for (int i = 0; i < 4; ++i) {
    v.push_back(h.Submit(Borrower("v" + std::to_string(i), 2, (i + 1) * 10 * kSecond), 0));
  }
  ASSERT_EQ(h.Cycle(0).starts.size(), 4u);
  const Micros now = 100 * kSecond;
  JobId p1 = h.Submit(Gang("p1", "a", {2}, 0, now), now);
  JobId p2 = h.Submit(Gang("p2", "a", {2}, 0, now), now);
  JobId p3 = h.Submit(Gang("p3", "a", {2}, 0, now), now);
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(r.preemptions.size(), 2u);
  EXPECT_EQ(r.preemptions[0].preemptor, p1);
  EXPECT_EQ(r.preemptions[1].preemptor, p2);
  EXPECT_NE(r.preemptions[0].victim, r.preemptions[1].victim);
  // Still nothing for p3 while the victims stop.
  r = h.Cycle(now + 10 * kSecond);
  EXPECT_TRUE(r.preemptions.empty());
  for (JobId id : v) {
    if (h.job(id).phase == JobPhase::kStopping) {
      h.Evict(id, now + o.grace);
    }
  }
  r = h.Cycle(now + o.grace);
  EXPECT_EQ(Started(r), (std::vector<uint64_t>{p1.value(), p2.value()}));
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(h.job(p3).phase, JobPhase::kPending);
  EXPECT_EQ(h.quota().Usage(h.queue("a"), 0), 4000);
  EXPECT_EQ(h.quota().Usage(h.queue("b"), 0), 4000);
  EXPECT_FALSE(h.quota().IsBorrowing(h.queue("b")));
}

TEST(JobSchedulerTest, ReclaimChoosesAMinimalVictimSet) {
  // Quota a 12 + b 2 (cohort above the 8-GPU node). b runs c1 (1 GPU), c2 (1 GPU), c3
  // (4 GPUs) and a non-preemptible 2-GPU job. At t=1000 s with no grace, c1 / c2 / c3
  // lose 100 / 200 / 4000 GPU-s. a's 4-GPU job needs c3's 4 GPUs, and only c3:
  // c1 and c2 are taken first (cheapest) and must then be given back.
  SchedulerOptions o;
  o.preempt_reclaim = true;
  o.grace = 0;
  Harness h({GpuNode("n0")}, TwoQueueCohort(12000, 2000), o);
  JobId c1 = h.Submit(Borrower("c1", 1, 900 * kSecond), 0);
  JobId c2 = h.Submit(Borrower("c2", 1, 800 * kSecond), 0);
  JobId c3 = h.Submit(Borrower("c3", 4, 0), 0);
  JobSpec keep = Borrower("keep", 2, 0);
  keep.preemptible = false;
  h.Submit(keep, 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 4u);
  const Micros now = 1000 * kSecond;
  JobId p = h.Submit(Gang("p", "a", {4}, 0, now), now);
  const ClusterState before = h.state();
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{c3.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, p);
  EXPECT_DOUBLE_EQ(r.preemptions[0].lost_gpu_seconds, 4000.0);
  EXPECT_EQ(h.job(c1).phase, JobPhase::kRunning);
  EXPECT_EQ(h.job(c2).phase, JobPhase::kRunning);
  ExpectSameUsage(h.state(), before);
  EXPECT_EQ(h.quota().Usage(h.queue("b"), 0), 8000);
}

TEST(JobSchedulerTest, ReclaimNeverTakesFromAQueueWithinItsQuota) {
  // b uses exactly its nominal 4 and a asks beyond its own nominal 4: no victim.
  SchedulerOptions o;
  o.preempt_reclaim = true;
  Harness h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o);
  h.Submit(Gang("a1", "a", {4}), 0);
  h.Submit(Gang("b1", "b", {4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  h.Submit(Gang("a2", "a", {2}), kSecond);
  CycleResult r = h.Cycle(kSecond);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_TRUE(r.preemptions.empty());
}

TEST(JobSchedulerTest, PriorityPreemptionNeverPicksAJobAlreadyStopping) {
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  // l1 is the cheaper victim (checkpointed recently), l2 the costlier.
  JobSpec s1 = Gang("l1", "q", {4});
  s1.checkpoint_interval = 100 * kSecond;
  JobId l1 = h.Submit(s1, 0);
  JobId l2 = h.Submit(Gang("l2", "q", {4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  JobId h1 = h.Submit(Gang("h1", "q", {4}, 10, 100 * kSecond), 100 * kSecond);
  CycleResult r = h.Cycle(100 * kSecond);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{l1.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, h1);
  // l1 is stopping (still holding its GPUs); h2 must take l2, not l1 again, and h1
  // (victims in flight) must not look for more.
  JobId h2 = h.Submit(Gang("h2", "q", {4}, 10, 110 * kSecond), 110 * kSecond);
  r = h.Cycle(110 * kSecond);
  EXPECT_TRUE(r.starts.empty());
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{l2.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, h2);
  // Nothing left to preempt: both low jobs are stopping.
  h.Submit(Gang("h3", "q", {4}, 10, 120 * kSecond), 120 * kSecond);
  r = h.Cycle(120 * kSecond);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_TRUE(r.starts.empty());
  // The victims leave; their preemptors start, first come first.
  h.Evict(l1, 130 * kSecond);
  h.Evict(l2, 130 * kSecond);
  r = h.Cycle(130 * kSecond);
  EXPECT_EQ(Started(r), (std::vector<uint64_t>{h1.value(), h2.value()}));
}

TEST(JobSchedulerTest, OneCycleNeverPicksTheSameVictimTwice) {
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId l1 = h.Submit(Gang("l1", "q", {4}), 0);
  JobId l2 = h.Submit(Gang("l2", "q", {4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  h.Submit(Gang("h1", "q", {4}, 10, kSecond), kSecond);
  h.Submit(Gang("h2", "q", {4}, 10, kSecond), kSecond);
  CycleResult r = h.Cycle(kSecond);
  std::vector<uint64_t> v = Victims(r);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<uint64_t>{l1.value(), l2.value()}));
}

TEST(JobSchedulerTest, PriorityPreemptionStaysWithinTheQueue) {
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("n0")}, Tree({QueueNode("a"), QueueNode("b")}), o);
  JobId low = h.Submit(Gang("low", "b", {8}, 0), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // Another queue's high-priority job cannot preempt it.
  h.Submit(Gang("other", "a", {8}, 100, kSecond), kSecond);
  CycleResult r = h.Cycle(kSecond);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(h.job(low).phase, JobPhase::kRunning);
  // Its own queue's can.
  JobId same = h.Submit(Gang("same", "b", {8}, 1, 2 * kSecond), 2 * kSecond);
  r = h.Cycle(2 * kSecond);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{low.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, same);
}

TEST(JobSchedulerTest, EqualPriorityDoesNotPreempt) {
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  h.Submit(Gang("a", "q", {8}, 5), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.Submit(Gang("b", "q", {8}, 5, kSecond), kSecond);
  EXPECT_TRUE(h.Cycle(kSecond).preemptions.empty());
}

TEST(JobSchedulerTest, MinRunBeforePreemptionProtectsYoungJobs) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.min_run_before_preemption = 60 * kSecond;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId low = h.Submit(Gang("low", "q", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.Submit(Gang("high", "q", {8}, 10, 59 * kSecond), 59 * kSecond);
  EXPECT_TRUE(h.Cycle(59 * kSecond).preemptions.empty());
  EXPECT_EQ(Victims(h.Cycle(60 * kSecond)), std::vector<uint64_t>{low.value()});
}

TEST(JobSchedulerTest, MinRunBeforeReclaimSparesPriorityPreemption) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.preempt_las = true;
  o.min_run_before_reclaim = 3600 * kSecond;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId low = h.Submit(Gang("low", "q", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // 8 GPUs x 500 s of service make it a LAS victim, but it is younger than the bound.
  h.Submit(Gang("same", "q", {8}, 0, 500 * kSecond), 500 * kSecond);
  EXPECT_TRUE(h.Cycle(500 * kSecond).preemptions.empty());
  // A higher priority is not held back by it.
  h.Submit(Gang("high", "q", {8}, 10, 510 * kSecond), 510 * kSecond);
  EXPECT_EQ(Victims(h.Cycle(510 * kSecond)), std::vector<uint64_t>{low.value()});
}

TEST(JobSchedulerTest, LasLevelsFollowTheThresholds) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  ASSERT_EQ(h.scheduler().options().las_thresholds, (std::vector<double>{3200.0, 32000.0}));
  JobRecord r;
  r.gpu_milli = 4000;
  for (const auto& [attained, level] : std::vector<std::pair<double, int>>{
           {0, 0}, {3199.9, 0}, {3200, 1}, {31999, 1}, {32000, 2}, {1e9, 2}}) {
    r.attained_gpu_seconds = attained;
    EXPECT_EQ(h.scheduler().LasLevel(r, 0), level) << attained;
  }
  // A running job's current attempt counts: 4 GPUs x 800 s = 3200 GPU-s.
  r.attained_gpu_seconds = 0;
  r.phase = JobPhase::kRunning;
  r.run_start = 1000 * kSecond;
  EXPECT_EQ(h.scheduler().LasLevel(r, 1799 * kSecond), 0);
  EXPECT_EQ(h.scheduler().LasLevel(r, 1800 * kSecond), 1);
  r.attained_gpu_seconds = 28800;  // + 3200 = 32000
  EXPECT_EQ(h.scheduler().LasLevel(r, 1800 * kSecond), 2);
  r.phase = JobPhase::kPending;  // a pending job: attained only
  EXPECT_EQ(h.scheduler().LasLevel(r, 1800 * kSecond), 1);

  SchedulerOptions custom;
  custom.las_thresholds = {10.0};
  Harness h2({GpuNode("n0")}, OneQueue(), custom);
  r.attained_gpu_seconds = 9.99;
  EXPECT_EQ(h2.scheduler().LasLevel(r, 0), 0);
  r.attained_gpu_seconds = 10;
  EXPECT_EQ(h2.scheduler().LasLevel(r, 0), 1);
}

TEST(JobSchedulerTest, LasPreemptsAJobOnlyOnceItReachesAHigherLevel) {
  SchedulerOptions o;
  o.preempt_las = true;
  Harness h({GpuNode("n0")}, Tree({QueueNode("a"), QueueNode("b")}), o);
  JobId old = h.Submit(Gang("old", "a", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // 8 GPUs x 300 s = 2400 GPU-s: level 0, like the newcomer.
  JobId fresh = h.Submit(Gang("fresh", "b", {8}, 0, 300 * kSecond), 300 * kSecond);
  EXPECT_TRUE(h.Cycle(300 * kSecond).preemptions.empty());
  // 8 x 400 = 3200: level 1; LAS preempts across queues.
  CycleResult r = h.Cycle(400 * kSecond);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{old.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, fresh);
}

TEST(JobSchedulerTest, SrtfPreemptsTheJobWithMoreTimeLeft) {
  SchedulerOptions o;
  o.preempt_srtf = true;
  o.runtime_source = RuntimeSource::kOracle;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId lng = h.Submit(Gang("long", "q", {8}), 0, 0, 1000 * kSecond);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // At 100 s long has 900 s left: a 950 s job does not preempt it, a 500 s job does.
  h.Submit(Gang("mid", "q", {8}, 0, 100 * kSecond), 100 * kSecond, 0, 950 * kSecond);
  EXPECT_TRUE(h.Cycle(100 * kSecond).preemptions.empty());
  JobId shrt = h.Submit(Gang("short", "q", {8}, 0, 101 * kSecond), 101 * kSecond, 0, 500 * kSecond);
  CycleResult r = h.Cycle(101 * kSecond);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{lng.value()});
  EXPECT_EQ(r.preemptions[0].preemptor, shrt);
}

// ---------------------------------------------------------------------------------
// Reservation and backfill.

// One 8-GPU node: r1 (4 GPUs, predicted 100 s) and r2 (2 GPUs, 200 s) run from t=0.
// At t=10 s big (6 GPUs) is blocked: its reservation starts when r1 ends, at 100 s.
// s1 (2 GPUs, 150 s) would end after that and is held back; s2 (2 GPUs, 50 s) ends
// before and is backfilled.
TEST(JobSchedulerTest, EasyReservesAtTheEndThatFreesEnoughAndBackfillsShortJobs) {
  for (Backfill backfill : {Backfill::kEasy, Backfill::kNone}) {
    SCOPED_TRACE(static_cast<int>(backfill));
    SchedulerOptions o;
    o.backfill = backfill;
    o.runtime_source = RuntimeSource::kPredicted;
    Harness h({GpuNode("n0")}, OneQueue(), o, SubmitOrder(true));
    h.Submit(Gang("r1", "q", {4}), 0, 100 * kSecond);
    h.Submit(Gang("r2", "q", {2}), 0, 200 * kSecond);
    ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
    const Micros now = 10 * kSecond;
    JobId big = h.Submit(Gang("big", "q", {6}, 0, 1 * kSecond), now, 1000 * kSecond);
    JobId s1 = h.Submit(Gang("s1", "q", {2}, 0, 2 * kSecond), now, 150 * kSecond);
    JobId s2 = h.Submit(Gang("s2", "q", {2}, 0, 3 * kSecond), now, 50 * kSecond);
    CycleResult r = h.Cycle(now);
    if (backfill == Backfill::kEasy) {
      ASSERT_TRUE(r.reservation.has_value());
      EXPECT_EQ(r.reservation->job, big);
      EXPECT_EQ(r.reservation->start, 100 * kSecond);
      EXPECT_EQ(r.reservation->nodes, std::vector<NodeId>{NodeId(0)});
      ASSERT_EQ(Started(r), std::vector<uint64_t>{s2.value()});
      EXPECT_TRUE(r.starts[0].backfilled);
      EXPECT_EQ(h.job(s1).phase, JobPhase::kPending);
    } else {
      EXPECT_FALSE(r.reservation.has_value());
      ASSERT_EQ(Started(r), std::vector<uint64_t>{s1.value()});
      EXPECT_FALSE(r.starts[0].backfilled);
    }
  }
}

TEST(JobSchedulerTest, EasyReservationCountsFromTheRunningJobsCheckpoint) {
  // A resumed job's estimated end is run_start + (estimate - resumed_from).
  SchedulerOptions o;
  o.backfill = Backfill::kEasy;
  o.runtime_source = RuntimeSource::kUserLimit;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobSpec spec = Gang("r", "q", {6});  // leaves 2 GPUs: a full cluster ends the cycle early
  spec.runtime_limit = 1000 * kSecond;
  JobId r0 = h.Submit(spec, 0);
  h.job(r0).resumed_from = 400 * kSecond;
  ASSERT_EQ(h.Cycle(50 * kSecond).starts.size(), 1u);
  JobSpec big = Gang("big", "q", {8}, 0, 60 * kSecond);
  big.runtime_limit = kHour;
  h.Submit(big, 60 * kSecond);
  CycleResult r = h.Cycle(60 * kSecond);
  ASSERT_TRUE(r.reservation.has_value());
  EXPECT_EQ(r.reservation->start, 650 * kSecond);  // 50 + (1000 - 400)
}

TEST(JobSchedulerTest, BackfillMayUseNodesTheReservationDoesNotNeed) {
  // n0 busy until 100 s (estimate), n1 holds 6 GPUs until 1000 s. big wants 8 GPUs on
  // one node: reserved on n0 at 100 s. A long 2-GPU job may still start on n1.
  SchedulerOptions o;
  o.backfill = Backfill::kEasy;
  Harness h({GpuNode("n0"), GpuNode("n1")}, OneQueue(), o);
  h.Submit(Gang("r0", "q", {8}), 0, 100 * kSecond);
  h.Submit(Gang("r1", "q", {6}), 0, 1000 * kSecond);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  JobId big = h.Submit(Gang("big", "q", {8}, 0, 10 * kSecond), 10 * kSecond, 500 * kSecond);
  JobId lng = h.Submit(Gang("long", "q", {2}, 0, 11 * kSecond), 10 * kSecond, 5000 * kSecond);
  CycleResult r = h.Cycle(10 * kSecond);
  ASSERT_TRUE(r.reservation.has_value());
  EXPECT_EQ(r.reservation->job, big);
  EXPECT_EQ(r.reservation->start, 100 * kSecond);
  EXPECT_EQ(r.reservation->nodes, std::vector<NodeId>{NodeId(0)});
  ASSERT_EQ(Started(r), std::vector<uint64_t>{lng.value()});
  EXPECT_TRUE(r.starts[0].backfilled);
  EXPECT_EQ(h.NodesOf(lng), std::vector<uint32_t>{1});
}

TEST(JobSchedulerTest, StrictFifoBlocksOnlyTheBlockedQueue) {
  for (bool strict : {true, false}) {
    SCOPED_TRACE(strict);
    SchedulerOptions o;
    o.strict_fifo = strict;
    Harness h({GpuNode("n0")}, Tree({QueueNode("a"), QueueNode("b")}), o, SubmitOrder(false));
    h.Submit(Gang("run", "a", {4}), 0);
    ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
    h.Submit(Gang("big", "a", {8}, 0, 1 * kSecond), kSecond);
    JobId small = h.Submit(Gang("small", "a", {1}, 0, 2 * kSecond), kSecond);
    JobId other = h.Submit(Gang("other", "b", {1}, 0, 3 * kSecond), kSecond);
    CycleResult r = h.Cycle(kSecond);
    if (strict) {
      EXPECT_EQ(Started(r), std::vector<uint64_t>{other.value()});
      EXPECT_EQ(h.job(small).phase, JobPhase::kPending);
    } else {
      EXPECT_EQ(Started(r), (std::vector<uint64_t>{small.value(), other.value()}));
    }
  }
}

TEST(JobSchedulerTest, StarvationLimitPutsTheOldestJobFirst) {
  for (Micros limit : {Micros{0}, kHour}) {
    SCOPED_TRACE(limit);
    SchedulerOptions o;
    o.starvation_limit = limit;
    Harness h({GpuNode("n0")}, OneQueue(), o, SubmitOrder(true));
    JobId blocker = h.Submit(Gang("blocker", "q", {8}), 0);
    ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
    JobId old = h.Submit(Gang("old", "q", {8}, 0, kSecond), kSecond);
    JobId high = h.Submit(Gang("high", "q", {8}, 10, 90 * 60 * kSecond), 90 * 60 * kSecond);
    EXPECT_TRUE(h.Cycle(90 * 60 * kSecond).starts.empty());
    h.Finish(blocker, 2 * kHour);
    CycleResult r = h.Cycle(2 * kHour);
    ASSERT_EQ(r.starts.size(), 1u);
    EXPECT_EQ(r.starts[0].job, limit > 0 ? old : high);
  }
}

TEST(JobSchedulerTest, StarvationLimitWaitsForTheLimit) {
  SchedulerOptions o;
  o.starvation_limit = kHour;
  Harness h({GpuNode("n0")}, OneQueue(), o, SubmitOrder(true));
  h.Submit(Gang("old", "q", {8}, 0, 0), 0);
  JobId high = h.Submit(Gang("high", "q", {8}, 10, 0), 0);
  CycleResult r = h.Cycle(kHour - 1);  // not yet starving
  EXPECT_EQ(Started(r), std::vector<uint64_t>{high.value()});
}

// ---------------------------------------------------------------------------------
// Charges, estimates, bounds.

size_t IndexOf(const QueueTree& tree, ResourceName r) {
  const auto& rs = tree.resources();
  auto it = std::find(rs.begin(), rs.end(), r);
  EXPECT_NE(it, rs.end());
  return static_cast<size_t>(it - rs.begin());
}

TEST(JobSchedulerTest, ChargeOfCountsEachModelFlavor) {
  const ResourceName h100{ResourceKind::kGpu, Model("H100-80GB")};
  const ResourceName a100{ResourceKind::kGpu, Model("A100-80GB")};
  Harness h({GpuNode("h", 2, "H100-80GB"), GpuNode("a", 2, "A100-80GB")},
            Tree({QueueNode("q", "",
                            {Q(kGpu, 100000), Q(h100, 100000), Q(a100, 100000), Q(kCpu, 1000000),
                             Q(kMemory, 1 << 30), Q(kGpuMemory, 1 << 30)})}),
            SchedulerOptions{});
  const QueueTree& tree = h.tree();
  ASSERT_EQ(tree.resources().size(), 6u);
  const size_t gpu = IndexOf(tree, kGpu), gh = IndexOf(tree, h100), ga = IndexOf(tree, a100),
               cpu = IndexOf(tree, kCpu), mem = IndexOf(tree, kMemory),
               gmem = IndexOf(tree, kGpuMemory);

  JobRecord job;
  job.spec = Gang("j", "q", {2, 1});
  job.spec.tasks[0].memory = MiB(4096);
  job.spec.tasks[0].gpu_memory = MiB(1000);
  job.gpu_milli = 3000;
  // Before placement: any-GPU, CPU, memory and requested GPU memory; no flavor.
  ResourceVector pre = h.scheduler().ChargeOf(job, nullptr, h.state());
  ASSERT_EQ(pre.size(), 6u);
  EXPECT_EQ(pre[gpu], 3000);
  EXPECT_EQ(pre[gh], 0);
  EXPECT_EQ(pre[ga], 0);
  EXPECT_EQ(pre[cpu], 2000);
  EXPECT_EQ(pre[mem], 4096);
  EXPECT_EQ(pre[gmem], 2000);

  // Placed: two H100s on node h and one A100 on node a.
  std::vector<Allocation> allocations = {
      {NodeId(0), MilliCpu(1000), MiB(4096),
       {{0, kWholeGpu, MiB(81559)}, {1, kWholeGpu, MiB(81559)}}},
      {NodeId(1), MilliCpu(1000), MiB(0), {{1, kWholeGpu, MiB(81920)}}},
  };
  ResourceVector placed = h.scheduler().ChargeOf(job, &allocations, h.state());
  EXPECT_EQ(placed[gpu], 3000);
  EXPECT_EQ(placed[gh], 2000);
  EXPECT_EQ(placed[ga], 1000);
  EXPECT_EQ(placed[cpu], 2000);
  EXPECT_EQ(placed[mem], 4096);
  EXPECT_EQ(placed[gmem], 2 * 81559 + 81920);
}

TEST(JobSchedulerTest, StartChargesTheFlavorItLandedOn) {
  const ResourceName h100{ResourceKind::kGpu, Model("H100-80GB")};
  const ResourceName a100{ResourceKind::kGpu, Model("A100-80GB")};
  Harness h({GpuNode("h", 2, "H100-80GB"), GpuNode("a", 4, "A100-80GB")},
            Tree({QueueNode("q", "", {Q(kGpu, 100000), Q(h100, 100000), Q(a100, 100000)})}),
            SchedulerOptions{});
  JobId j = h.Submit(Gang("j", "q", {4}), 0);  // only the A100 node has 4 GPUs
  CycleResult r = h.Cycle(0);
  ASSERT_EQ(Started(r), std::vector<uint64_t>{j.value()});
  EXPECT_EQ(h.NodesOf(j), std::vector<uint32_t>{1});
  const size_t gpu = IndexOf(h.tree(), kGpu), gh = IndexOf(h.tree(), h100),
               ga = IndexOf(h.tree(), a100);
  EXPECT_EQ(r.starts[0].charge[gpu], 4000);
  EXPECT_EQ(r.starts[0].charge[gh], 0);
  EXPECT_EQ(r.starts[0].charge[ga], 4000);
  EXPECT_EQ(h.quota().Usage(h.queue("q"), ga), 4000);
}

TEST(JobSchedulerTest, ChargeOfIsEmptyWithoutQuotaResources) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  JobRecord job;
  job.spec = Gang("j", "q", {2});
  job.gpu_milli = 2000;
  EXPECT_TRUE(h.scheduler().ChargeOf(job, nullptr, h.state()).empty());
}

TEST(JobSchedulerTest, RuntimeEstimateFollowsTheSource) {
  JobRecord job;
  job.spec.runtime_limit = 3 * kHour;
  job.predicted_runtime = 2 * kHour;
  job.oracle_runtime = kHour;
  auto estimate = [&job](RuntimeSource source) {
    SchedulerOptions o;
    o.runtime_source = source;
    Harness h({GpuNode("n0")}, OneQueue(), o);
    return h.scheduler().RuntimeEstimate(job);
  };
  EXPECT_EQ(estimate(RuntimeSource::kUserLimit), 3 * kHour);
  EXPECT_EQ(estimate(RuntimeSource::kPredicted), 2 * kHour);
  EXPECT_EQ(estimate(RuntimeSource::kOracle), kHour);
  job.oracle_runtime = -1;
  job.predicted_runtime = 0;
  EXPECT_EQ(estimate(RuntimeSource::kOracle), 3 * kHour);  // falls back to the limit
  EXPECT_EQ(estimate(RuntimeSource::kPredicted), 3 * kHour);
  job.spec.runtime_limit = 0;
  EXPECT_EQ(estimate(RuntimeSource::kUserLimit), kHour);  // nothing known: one hour
}

TEST(JobSchedulerTest, MaxJobsTestedBoundsTheCycle) {
  for (int bound : {3, 100}) {
    SCOPED_TRACE(bound);
    SchedulerOptions o;
    o.max_jobs_tested = bound;
    Harness h({GpuNode("n0")}, OneQueue(), o);
    // Ten jobs that never fit (16 GPUs on an 8-GPU node) and a small one behind them.
    for (int i = 0; i < 10; ++i) {
      h.Submit(Gang("big" + std::to_string(i), "q", {8, 8}, 0, i * kSecond), 0);
    }
    JobId small = h.Submit(Gang("small", "q", {1}, 0, 20 * kSecond), 0);
    CycleResult r = h.Cycle(30 * kSecond);
    if (bound == 3) {
      EXPECT_EQ(r.tested, 3);
      EXPECT_TRUE(r.starts.empty());
      EXPECT_EQ(h.job(small).phase, JobPhase::kPending);
    } else {
      EXPECT_EQ(r.tested, 11);
      EXPECT_EQ(Started(r), std::vector<uint64_t>{small.value()});
    }
  }
}

TEST(JobSchedulerTest, MaxSkipsPerQueueBlocksTheQueue) {
  SchedulerOptions o;
  o.max_skips_per_queue = 2;
  Harness h({GpuNode("n0")}, Tree({QueueNode("a"), QueueNode("b")}), o, SubmitOrder(false));
  for (int i = 0; i < 5; ++i) {
    h.Submit(Gang("big" + std::to_string(i), "a", {8, 8}, 0, i * kSecond), 0);
  }
  JobId small = h.Submit(Gang("small", "a", {1}, 0, 10 * kSecond), 0);
  JobId other = h.Submit(Gang("other", "b", {1}, 0, 11 * kSecond), 0);
  CycleResult r = h.Cycle(20 * kSecond);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{other.value()});
  EXPECT_EQ(h.job(small).phase, JobPhase::kPending);
  EXPECT_EQ(r.tested, 3);  // two skips in a, then b's job
}

TEST(JobSchedulerTest, MaxPreemptionSearchesBoundsVictimSearches) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.max_preemption_searches = 1;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  h.Submit(Gang("l1", "q", {4}), 0);
  h.Submit(Gang("l2", "q", {4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  h.Submit(Gang("h1", "q", {4}, 10, kSecond), kSecond);
  h.Submit(Gang("h2", "q", {4}, 10, kSecond), kSecond);
  EXPECT_EQ(h.Cycle(kSecond).preemptions.size(), 1u);
}

// ---------------------------------------------------------------------------------
// Checkpoint arithmetic of JobRecord (what preemption costs are computed from).

TEST(JobSchedulerCheckpointTest, ProgressAndSavedProgress) {
  JobRecord r;
  r.spec.checkpoint_interval = 600 * kSecond;
  r.resumed_from = 100 * kSecond;
  EXPECT_EQ(r.Progress(5000 * kSecond), 100 * kSecond);  // pending: no progress
  r.phase = JobPhase::kRunning;
  r.run_start = 1000 * kSecond;
  EXPECT_EQ(r.Progress(2000 * kSecond), 1100 * kSecond);
  // Periodic checkpoints at multiples of the interval of total progress.
  EXPECT_EQ(r.SavedProgress(2000 * kSecond, false), 600 * kSecond);
  EXPECT_EQ(r.SavedProgress(2000 * kSecond, true), 1100 * kSecond);
  // Before the next multiple, the checkpoint it resumed from is kept.
  EXPECT_EQ(r.SavedProgress(1200 * kSecond, false), 100 * kSecond);
  r.spec.checkpoint_interval = 0;
  EXPECT_EQ(r.SavedProgress(2000 * kSecond, false), 100 * kSecond);
  EXPECT_EQ(r.RemainingBy(1500 * kSecond, 2000 * kSecond), 400 * kSecond);
  EXPECT_EQ(r.RemainingBy(1000 * kSecond, 2000 * kSecond), 0);
  r.phase = JobPhase::kStopping;  // still running through its grace period
  EXPECT_EQ(r.Progress(2000 * kSecond), 1100 * kSecond);
}

}  // namespace
}  // namespace tessera
