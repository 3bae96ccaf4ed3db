#include "sched/job_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
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

// Two blocks of two racks of one node each: n0, n1 in block b0; n2, n3 in block b1.
std::vector<NodeSpec> TwoBlocks() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 4; ++i) {
    NodeSpec n = GpuNode("n" + std::to_string(i));
    n.labels.push_back({"block", i < 2 ? "b0" : "b1"});
    n.labels.push_back({"rack", "r" + std::to_string(i)});
    nodes.push_back(std::move(n));
  }
  return nodes;
}

TEST(JobSchedulerTest, HardBlockTopologyUsesOneBlockAcrossItsRacks) {
  Harness h(TwoBlocks(), OneQueue(), SchedulerOptions{});
  JobId x = h.Submit(Gang("x", "q", {8}), 0);  // fills n0 (block b0)
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{x.value()});
  JobSpec spec = Gang("g", "q", {8, 8});
  spec.topology = TopologyPolicy{TopologyScope::kBlock, true};
  JobId g = h.Submit(spec, kSecond);
  ASSERT_EQ(Started(h.Cycle(kSecond)), std::vector<uint64_t>{g.value()});
  std::vector<uint32_t> used = h.NodesOf(g);
  std::sort(used.begin(), used.end());
  EXPECT_EQ(used, (std::vector<uint32_t>{2, 3}));  // two racks, one block
}

TEST(JobSchedulerTest, BlockScopeHardWaitsAndSoftSpreads) {
  for (bool hard : {true, false}) {
    SCOPED_TRACE(hard);
    // n0 and n2 have 4 GPUs: the only two 8-GPU nodes (n1, n3) lie in different blocks.
    std::vector<NodeSpec> nodes = TwoBlocks();
    for (int i : {0, 2}) {
      NodeSpec small = GpuNode(nodes[i].name, 4);
      small.labels = nodes[i].labels;
      nodes[i] = std::move(small);
    }
    Harness h(std::move(nodes), OneQueue(), SchedulerOptions{});
    JobSpec spec = Gang("g", "q", {8, 8});
    spec.topology = TopologyPolicy{TopologyScope::kBlock, hard};
    JobId g = h.Submit(spec, 0);
    std::vector<uint64_t> started = Started(h.Cycle(0));
    if (hard) {
      EXPECT_TRUE(started.empty());
      EXPECT_EQ(h.job(g).phase, JobPhase::kPending);
    } else {
      ASSERT_EQ(started, std::vector<uint64_t>{g.value()});
      std::vector<uint32_t> used = h.NodesOf(g);
      std::sort(used.begin(), used.end());
      EXPECT_EQ(used, (std::vector<uint32_t>{1, 3}));
    }
  }
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

// Reserve looks, at each release, only at the nodes that could newly fit a one-place job
// and counts how many like tasks the nodes hold for a gang: the reservation must be the
// one a scan of every node at every release gives (computed here from the jobs' ends).
TEST(JobSchedulerTest, ReservationIsWhatAFullScanAtEveryReleaseFinds) {
  struct Free {
    int64_t gpus, cpu;
  };
  int blocked = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&rng](int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    };
    SchedulerOptions o;
    o.backfill = Backfill::kEasy;
    o.runtime_source = RuntimeSource::kPredicted;
    std::vector<NodeSpec> nodes;
    const int64_t node_count = pick(2, 6);
    for (int64_t i = 0; i < node_count; ++i) {
      // Some nodes short of CPU, so that CPU, not GPUs, can be what a job waits for.
      nodes.push_back(MakeUniformNode("n" + std::to_string(i),
                                      MilliCpu(pick(0, 2) == 0 ? 6000 : 64000), MiB(1 << 20),
                                      Model("H100-80GB"), 8, SharingMode::kExclusive));
    }
    Harness h(nodes, OneQueue(), o, SubmitOrder(true));
    std::vector<JobId> running;
    for (int k = 0; k < 14; ++k) {
      JobSpec r = Gang("r" + std::to_string(k), "q",
                       pick(0, 3) == 0 ? std::vector<int>{static_cast<int>(pick(1, 4)),
                                                          static_cast<int>(pick(1, 4))}
                                       : std::vector<int>{static_cast<int>(pick(1, 4))});
      for (TaskRequest& t : r.tasks) {
        t.cpu = MilliCpu(pick(1, 3) * 1000);
      }
      running.push_back(h.Submit(r, 0, pick(1, 8) * 10 * kSecond));
    }
    h.Cycle(0);
    for (JobId r : running) {
      if (h.job(r).phase == JobPhase::kPending) {
        h.scheduler().Dequeue(h.job(r));  // only big is tried next
      }
    }
    // The blocked job: one task, like tasks, unlike tasks, or all on one node.
    const int64_t shape = pick(0, 3);
    std::vector<int> gpus;
    if (shape == 0) {
      gpus = {static_cast<int>(pick(5, 8))};
    } else if (shape == 1) {
      gpus.assign(static_cast<size_t>(pick(2, 4)), static_cast<int>(pick(3, 8)));
    } else {
      gpus = {static_cast<int>(pick(2, 8)), static_cast<int>(pick(2, 8))};
    }
    JobSpec big = Gang("big", "q", gpus, 0, kSecond);
    for (TaskRequest& t : big.tasks) {
      t.cpu = MilliCpu(pick(1, 4) * 1000);
    }
    if (shape == 3) {
      big.topology.scope = TopologyScope::kNode;
    }
    const JobId id = h.Submit(big, kSecond, kHour);
    // What a full scan finds, from the state before the cycle.
    std::vector<Free> free(static_cast<size_t>(node_count));
    for (size_t i = 0; i < free.size(); ++i) {
      const NodeLedger& n = h.state().nodes()[i];
      int64_t idle = 0;
      for (const GpuLedger& g : n.gpus()) {
        idle += g.idle() ? 1 : 0;
      }
      free[i] = {idle, n.free_cpu().value()};
    }
    std::vector<std::pair<Micros, uint64_t>> ends;
    for (JobId r : running) {
      if (h.job(r).phase == JobPhase::kRunning) {
        ends.emplace_back(h.job(r).run_start + h.job(r).predicted_runtime, r.value());
      }
    }
    std::sort(ends.begin(), ends.end());
    auto scan = [&](std::vector<NodeId>* out) {
      std::vector<Free> left = free;
      out->clear();
      if (big.topology.scope == TopologyScope::kNode) {
        int64_t g = 0, c = 0;
        for (const TaskRequest& t : big.tasks) {
          g += t.gpu_count;
          c += t.cpu.value();
        }
        for (size_t i = 0; i < left.size(); ++i) {
          if (left[i].gpus >= g && left[i].cpu >= c) {
            out->push_back(NodeId(static_cast<uint32_t>(i)));
            return true;
          }
        }
        return false;
      }
      for (const TaskRequest& t : big.tasks) {
        size_t best = left.size();
        for (size_t i = 0; i < left.size(); ++i) {
          if (left[i].gpus >= t.gpu_count && left[i].cpu >= t.cpu.value() &&
              (best == left.size() || left[i].gpus < left[best].gpus)) {
            best = i;
          }
        }
        if (best == left.size()) {
          return false;
        }
        left[best].gpus -= t.gpu_count;
        left[best].cpu -= t.cpu.value();
        out->push_back(NodeId(static_cast<uint32_t>(best)));
      }
      return true;
    };
    std::optional<Reservation> want;
    std::vector<NodeId> at;
    for (const auto& [end, job] : ends) {
      for (const Allocation& a : h.jobs()[job].allocations) {
        free[a.node.value()].gpus += static_cast<int64_t>(a.gpus.size());
        free[a.node.value()].cpu += a.cpu.value();
      }
      if (scan(&at)) {
        std::sort(at.begin(), at.end());
        at.erase(std::unique(at.begin(), at.end()), at.end());
        want = Reservation{id, std::max(end, kSecond), at};
        break;
      }
    }
    CycleResult r = h.Cycle(kSecond);
    if (h.job(id).phase != JobPhase::kPending || r.tested == 0) {
      continue;  // it fitted at once, or a full cluster ended the cycle before it
    }
    ++blocked;
    ASSERT_EQ(r.reservation.has_value(), want.has_value());
    if (want) {
      EXPECT_EQ(r.reservation->start, want->start);
      EXPECT_EQ(r.reservation->nodes, want->nodes);
    }
  }
  EXPECT_GT(blocked, 150);  // most draws are blocked, so the comparison has teeth
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
  // Before placement: any-GPU, CPU, memory and requested GPU memory; no flavor for
  // tasks any model may serve.
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

  // A task held to one model is charged to that flavor before placement too, as its
  // placement will be; PendingCharge (the pending reasons' charge) is the same.
  job.spec.tasks[0].models.Add(Model("H100-80GB"));
  pre = h.scheduler().ChargeOf(job, nullptr, h.state());
  EXPECT_EQ(pre[gpu], 3000);
  EXPECT_EQ(pre[gh], 2000);
  EXPECT_EQ(pre[ga], 0);
  EXPECT_EQ(pre, PendingCharge(h.scheduler().charge_index(), job.gpu_milli, job.spec.tasks,
                               h.state().catalog()));
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
