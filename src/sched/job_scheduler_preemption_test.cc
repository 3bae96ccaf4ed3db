// The job scheduler's preemption: reclaim of borrowed quota, priority, LAS and SRTF,
// the victims it picks and the bounds on them. Order, placement, quota, backfill and
// charges are in job_scheduler_test.cc.
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

// With restart_amortization N, a LAS victim must have run N restart overheads in its
// current attempt (it loses no work here: it saves on the signal); priority
// preemption is not held back.
TEST(JobSchedulerTest, RestartAmortizationHoldsBackLasPreemptionOnly) {
  SchedulerOptions o;
  o.preempt_las = true;
  o.preempt_priority = true;
  o.restart_overhead = 60 * kSecond;
  o.restart_amortization = 10;  // 600 s
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobSpec old_spec = Gang("old", "q", {8});
  old_spec.checkpoint_on_signal = true;
  JobId old = h.Submit(old_spec, 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // 8 x 400 s = 3200 GPU-s: level 1 and a LAS victim, but it has run only 400 s.
  h.Submit(Gang("fresh", "q", {8}, 0, 400 * kSecond), 400 * kSecond);
  EXPECT_TRUE(h.Cycle(400 * kSecond).preemptions.empty());
  EXPECT_TRUE(h.Cycle(599 * kSecond).preemptions.empty());
  EXPECT_EQ(Victims(h.Cycle(600 * kSecond)), std::vector<uint64_t>{old.value()});

  Harness p({GpuNode("n0")}, OneQueue(), o);
  JobId low = p.Submit(Gang("low", "q", {8}), 0);
  ASSERT_EQ(p.Cycle(0).starts.size(), 1u);
  p.Submit(Gang("high", "q", {8}, 10, 100 * kSecond), 100 * kSecond);
  EXPECT_EQ(Victims(p.Cycle(100 * kSecond)), std::vector<uint64_t>{low.value()});
}

// The amortisation counts the work an eviction would lose as part of the restart: a
// victim that saves every 1,000 s (not on the signal) is taken only once it has run ten
// times the overhead plus what it would lose, which in its first hours is only just
// after a checkpoint. Under lossless preemption the overhead alone counts.
TEST(JobSchedulerTest, RestartAmortizationCountsTheWorkAnEvictionLoses) {
  for (bool lossless : {false, true}) {
    SCOPED_TRACE(lossless ? "lossless" : "lossy");
    SchedulerOptions o;
    o.preempt_las = true;
    o.restart_overhead = 60 * kSecond;
    o.restart_amortization = 10;
    o.lossless_preemption = lossless;
    ASSERT_EQ(o.grace, 30 * kSecond);
    Harness h({GpuNode("n0")}, OneQueue(), o);
    JobSpec old_spec = Gang("old", "q", {8});
    old_spec.checkpoint_interval = 1000 * kSecond;
    JobId old = h.Submit(old_spec, 0);
    ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
    h.Submit(Gang("fresh", "q", {8}, 0, 400 * kSecond), 400 * kSecond);
    // At 600 s an eviction at 630 s loses 630 s: 10 x (60 + 630) s would be needed.
    CycleResult r = h.Cycle(600 * kSecond);
    if (lossless) {
      EXPECT_EQ(Victims(r), std::vector<uint64_t>{old.value()});
      continue;
    }
    EXPECT_TRUE(r.preemptions.empty());
    // At 900 s it would lose 930 s: not yet.
    EXPECT_TRUE(h.Cycle(900 * kSecond).preemptions.empty());
    // At 1,010 s, evicted at 1,040 s, it loses 40 s: 10 x (60 + 40) s = 1,000 s <= 1,010 s.
    r = h.Cycle(1010 * kSecond);
    ASSERT_EQ(Victims(r), std::vector<uint64_t>{old.value()});
    EXPECT_DOUBLE_EQ(r.preemptions[0].lost_gpu_seconds, 8 * (60.0 + 40.0));  // with the restart
  }
  // A job that never checkpoints would lose all it ran: never a LAS victim, however long
  // it has run; a higher priority still preempts it.
  SchedulerOptions o;
  o.preempt_las = true;
  o.preempt_priority = true;
  o.restart_overhead = 60 * kSecond;
  o.restart_amortization = 10;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId old = h.Submit(Gang("old", "q", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.Submit(Gang("fresh", "q", {8}, 0, 400 * kSecond), 400 * kSecond);
  for (Micros t : {600 * kSecond, 3600 * kSecond, 24 * 3600 * kSecond}) {
    EXPECT_TRUE(h.Cycle(t).preemptions.empty()) << t;
  }
  const Micros late = 24 * 3600 * kSecond + kSecond;
  h.Submit(Gang("high", "q", {8}, 10, late), late);
  EXPECT_EQ(Victims(h.Cycle(late)), std::vector<uint64_t>{old.value()});
}

// With a checkpoint wait, a victim is evicted right after its next periodic checkpoint
// when that comes within the wait, whether or not it also checkpoints on the signal;
// otherwise when the grace ends. Its start-up after a resumption pushes the checkpoint
// back.
TEST(JobSchedulerTest, CheckpointWaitEvictsAtTheNextCheckpointOrAfterTheGrace) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.checkpoint_wait = 600 * kSecond;
  for (bool on_signal : {false, true}) {
    for (Micros interval : {300 * kSecond, 1000 * kSecond}) {
      SCOPED_TRACE(std::to_string(on_signal) + " " + std::to_string(interval));
      Harness h({GpuNode("n0")}, OneQueue(), o);
      JobSpec low = Gang("low", "q", {8});
      low.checkpoint_interval = interval;
      low.checkpoint_on_signal = on_signal;
      JobId v = h.Submit(low, 0);
      ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
      h.Submit(Gang("high", "q", {8}, 10, 100 * kSecond), 100 * kSecond);
      CycleResult r = h.Cycle(100 * kSecond);
      ASSERT_EQ(Victims(r), std::vector<uint64_t>{v.value()});
      // Every 300 s: the checkpoint at 300 s comes within 600 s. Every 1000 s: not.
      EXPECT_EQ(r.preemptions[0].evict_at, interval == 300 * kSecond
                                               ? 300 * kSecond
                                               : 100 * kSecond + o.grace);
      // It loses work only when it neither reaches a checkpoint nor saves on the signal.
      EXPECT_DOUBLE_EQ(r.preemptions[0].lost_gpu_seconds,
                       on_signal || interval == 300 * kSecond ? 0.0 : 8 * 130.0);
    }
  }
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

// The search takes running jobs grouped by queue and LAS level, and merges the groups
// it may take from: the victims must still be the cheapest across all of them, in
// victim order.
TEST(JobSchedulerTest, VictimsAreTheCheapestAcrossQueuesAndLasLevels) {
  SchedulerOptions o;
  o.preempt_las = true;
  o.las_thresholds = {500.0, 3000.0};
  Harness h({GpuNode("n0")},
            Tree({QueueNode("a"), QueueNode("b"), QueueNode("c"), QueueNode("d"), QueueNode("e")}),
            o);
  auto running = [&](std::string name, std::string queue, int gpus, Micros interval) {
    JobSpec s = Gang(std::move(name), std::move(queue), {gpus});
    s.checkpoint_interval = interval;
    return h.Submit(std::move(s), 0);
  };
  // At 1000 s: a1 has 4000 GPU-s (level 2), the others 2000 or 1000 (level 1). Evicted
  // at 1030 s they lose a1 4 x 1030, b1 2 x 1030, c1 1 x 30 and d1 1 x 330 GPU-s.
  JobId a1 = running("a1", "a", 4, 0);
  JobId b1 = running("b1", "b", 2, 0);
  JobId c1 = running("c1", "c", 1, 500 * kSecond);
  JobId d1 = running("d1", "d", 1, 700 * kSecond);
  ASSERT_EQ(h.Cycle(0).starts.size(), 4u);
  const Micros now = 1000 * kSecond;
  ASSERT_EQ(h.scheduler().LasLevel(h.job(a1), now), 2);
  ASSERT_EQ(h.scheduler().LasLevel(h.job(c1), now), 1);
  JobId p = h.Submit(Gang("p", "e", {2}, 0, now), now);
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(Victims(r), (std::vector<uint64_t>{c1.value(), d1.value()}));
  EXPECT_DOUBLE_EQ(r.preemptions[0].lost_gpu_seconds, 30.0);
  EXPECT_DOUBLE_EQ(r.preemptions[1].lost_gpu_seconds, 330.0);
  EXPECT_EQ(r.preemptions[0].preemptor, p);
  EXPECT_EQ(h.job(a1).phase, JobPhase::kRunning);
  EXPECT_EQ(h.job(b1).phase, JobPhase::kRunning);
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
// The guarantee and the rules against loops.

// a 4 + b 4 on an 8-GPU node, every job older than any amortisation: a runs 2 GPUs
// (inside its guarantee), b 6 (borrowing 2), all past the first LAS level.
struct GuaranteeCase {
  explicit GuaranteeCase(SchedulerOptions o) : h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o) {
    for (int i = 0; i < 6; ++i) {
      b.push_back(h.Submit(Gang("b" + std::to_string(i), "b", {1}), 0));
    }
    EXPECT_EQ(h.Cycle(0).starts.size(), 6u);
    a.push_back(h.Submit(Gang("a0", "a", {1}, 0, kSecond), kSecond));
    a.push_back(h.Submit(Gang("a1", "a", {1}, 0, kSecond), kSecond));
    EXPECT_EQ(h.Cycle(kSecond).starts.size(), 2u);
  }
  Harness h;
  std::vector<JobId> a, b;
};

TEST(JobSchedulerTest, LasTakesOnlyWhatAnotherQueueBorrows) {
  SchedulerOptions o;
  o.preempt_las = true;
  o.las_thresholds = {500.0};
  GuaranteeCase c(o);
  const Micros now = 1000 * kSecond;
  // b's new job may take a job of its own queue, never one of a's (the most recently
  // started, so the first in victim order): a would drop below its nominal 4.
  JobId p = c.h.Submit(Gang("p", "b", {1}, 0, now), now);
  CycleResult r = c.h.Cycle(now);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, p);
  EXPECT_EQ(c.h.job(r.preemptions[0].victim).queue, c.h.queue("b"));
  // a's new job may take one of b's 2 borrowed GPUs.
  c.h.Evict(r.preemptions[0].victim, now + 30 * kSecond);
  ASSERT_EQ(c.h.Cycle(now + 30 * kSecond).starts.size(), 1u);
  const Micros later = 2000 * kSecond;
  JobId q = c.h.Submit(Gang("q", "a", {1}, 0, later), later);
  r = c.h.Cycle(later);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, q);
  EXPECT_EQ(c.h.job(r.preemptions[0].victim).queue, c.h.queue("b"));
}

// What both evicted-job tests share, from a full node on which b borrows with b0
// (Borrower: 2 GPUs, checkpointing every 100 s) and b1 running: a's job p reclaims the
// cheapest victim, b0 (it loses 30 s of 2 GPUs); p starts and a job of `borrower_queue`
// borrows the GPU freed beyond p's. When b1 ends, b0 fits b's nominal quota again but
// preempts nothing; a job of b that was never evicted, of the same shape (the cycle's
// memo of failed searches must tell them apart), reclaims: *borrower, *fresh and that
// cycle's result *r.
void ReclaimB0ThenTryBoth(Harness& h, JobId b0, JobId b1, const std::string& borrower_queue,
                          JobId* borrower, JobId* fresh, CycleResult* r) {
  Micros now = 1000 * kSecond;
  JobId p = h.Submit(Gang("p", "a", {1}, 0, now), now);
  ASSERT_EQ(Victims(h.Cycle(now)), std::vector<uint64_t>{b0.value()});
  now += 30 * kSecond;
  h.Evict(b0, now);
  *borrower = h.Submit(Gang("x", borrower_queue, {1}, 0, now), now);
  ASSERT_EQ(Started(h.Cycle(now)), (std::vector<uint64_t>{p.value(), borrower->value()}));
  ASSERT_TRUE(h.quota().IsBorrowing(h.queue(borrower_queue)));
  now += 10 * kSecond;
  h.Finish(b1, now);
  *r = h.Cycle(now);
  EXPECT_TRUE(r->preemptions.empty());
  EXPECT_TRUE(r->starts.empty());
  now += 10 * kSecond;
  *fresh = h.Submit(Gang("fresh", "b", {2}, 0, now), now);
  *r = h.Cycle(now);
}

TEST(JobSchedulerTest, AReclaimedJobTakesNothingBackFromTheQueueThatEvictedIt) {
  // a 4 + b 4 on 8 GPUs. b borrows 1 GPU: b0 and three 1-GPU jobs; a runs 3 GPUs. The
  // borrower is a's: b0 could reclaim it, but takes nothing back from a, whose job
  // evicted it.
  SchedulerOptions o;
  o.preempt_reclaim = true;
  Harness h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o);
  JobId b0 = h.Submit(Borrower("b0", 2, 100 * kSecond), 0);
  JobId b1 = h.Submit(Gang("b1", "b", {1}), 0);
  h.Submit(Gang("b2", "b", {1}), 0);
  h.Submit(Gang("b3", "b", {1}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    h.Submit(Gang("a" + std::to_string(i), "a", {1}, 0, kSecond), kSecond);
  }
  ASSERT_EQ(h.Cycle(kSecond).starts.size(), 3u);
  JobId x, fresh;
  CycleResult r;
  ReclaimB0ThenTryBoth(h, b0, b1, "a", &x, &fresh, &r);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, fresh);
  EXPECT_EQ(h.job(r.preemptions[0].victim).queue, h.queue("a"));
}

// Nor from a third queue: with a 3, b 3, d 2 on 8 GPUs, the borrower is d's. b0 could
// reclaim its GPU from d, and d's job in turn from a: it does not. A job of b that was
// never evicted does.
TEST(JobSchedulerTest, AReclaimedJobTakesNothingFromAThirdQueueEither) {
  SchedulerOptions o;
  o.preempt_reclaim = true;
  Harness h({GpuNode("n0")},
            Tree({CohortNode("c"), QueueNode("a", "c", {Q(kGpu, 3000)}),
                  QueueNode("b", "c", {Q(kGpu, 3000)}), QueueNode("d", "c", {Q(kGpu, 2000)})}),
            o);
  JobId b0 = h.Submit(Borrower("b0", 2, 100 * kSecond), 0);
  JobId b1 = h.Submit(Gang("b1", "b", {1}), 0);
  h.Submit(Gang("b2", "b", {1}), 0);
  h.Submit(Gang("d0", "d", {1}), 0);
  h.Submit(Gang("d1", "d", {1}), 0);
  h.Submit(Gang("a0", "a", {1}), 0);
  h.Submit(Gang("a1", "a", {1}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 7u);  // b borrows 1, the node is full
  JobId d2, fresh;
  CycleResult r;
  ReclaimB0ThenTryBoth(h, b0, b1, "d", &d2, &fresh, &r);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, fresh);
  EXPECT_EQ(r.preemptions[0].victim, d2);
}

// Victim searches for jobs within their queue's nominal quota have a budget of their
// own: a borrower ahead in the order that spends the cycle's only search does not hold
// back the reclaim of a queue within its guarantee.
TEST(JobSchedulerTest, ABorrowersSearchesLeaveReclaimItsOwn) {
  SchedulerOptions o;
  o.preempt_reclaim = true;
  o.max_preemption_searches = 1;
  Harness h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o);
  JobId b0 = h.Submit(Gang("b0", "b", {4}), 0);
  JobId b1 = h.Submit(Gang("b1", "b", {2}), 0);
  JobId a0 = h.Submit(Gang("a0", "a", {2}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 3u);
  ASSERT_TRUE(h.quota().IsBorrowing(h.queue("b")));
  const Micros now = 100 * kSecond;
  // b2 comes first (FIFO) and would borrow: its search (which finds nothing: b may not
  // reclaim) is the cycle's one. a1 fits a's nominal quota: it reclaims b1's GPUs.
  JobId b2 = h.Submit(Gang("b2", "b", {2}, 0, 50 * kSecond), 50 * kSecond);
  JobId a1 = h.Submit(Gang("a1", "a", {2}, 0, now), now);
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, a1);
  EXPECT_EQ(r.preemptions[0].victim, b1);
  EXPECT_EQ(h.job(b2).phase, JobPhase::kPending);
  (void)b0;
  (void)a0;
}

TEST(JobSchedulerTest, FreedGpusGoToAQueueWithinItsQuotaBeforeABorrower) {
  // b's job is first in FIFO order but would borrow; a's fits a's nominal quota. When
  // 2 GPUs free up, a's job starts on them, b's waits.
  SchedulerOptions o;
  Harness h({GpuNode("n0")}, TwoQueueCohort(4000, 4000), o);
  JobId b0 = h.Submit(Gang("b0", "b", {4}), 0);
  JobId b1 = h.Submit(Gang("b1", "b", {2}), 0);
  JobId a0 = h.Submit(Gang("a0", "a", {2}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 3u);
  const Micros now = 100 * kSecond;
  JobId b2 = h.Submit(Gang("b2", "b", {2}, 0, now - kSecond), now - kSecond);
  JobId a1 = h.Submit(Gang("a1", "a", {2}, 0, now), now);
  h.Finish(b1, now);
  CycleResult r = h.Cycle(now);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{a1.value()});
  EXPECT_EQ(h.job(b2).phase, JobPhase::kPending);
  (void)b0;
  (void)a0;
}

TEST(JobSchedulerTest, APreemptorThatCannotStartOnceItsVictimsAreGoneClaimsNothing) {
  // a (nominal 10) and b (nominal 6) on an H100 node and an A100 node; b borrows both.
  // a's p1 may run only on H100s and reclaims b's job there; by the time that victim is
  // gone, p1's room is taken (here the node is drained; in a busy cluster another job
  // starts there), so p1 cannot start. It then claims nothing: counted as a preemption
  // still in flight, its 8 GPUs left a's next 4-GPU job outside a's nominal quota, so
  // that job never reclaimed (a tenant's gangs waited days behind such preemptors).
  SchedulerOptions o;
  o.preempt_reclaim = true;
  Harness h({GpuNode("h100"), GpuNode("a100", 8, "A100-80GB")}, TwoQueueCohort(10000, 6000), o);
  JobId on_h100 = h.Submit(Borrower("on_h100", 8, 0), 0);
  JobId on_a100 = h.Submit(Borrower("on_a100", 8, 0), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  ASSERT_EQ(h.job(on_h100).allocations[0].node, NodeId(0));
  Micros now = 100 * kSecond;
  JobSpec pinned = Gang("p1", "a", {8}, 0, now);
  pinned.tasks[0].models.Add(Model("H100-80GB"));
  JobId p1 = h.Submit(std::move(pinned), now);
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(r.preemptions.size(), 1u);
  ASSERT_EQ(r.preemptions[0].victim, on_h100);
  now += o.grace;
  h.Evict(on_h100, now);
  ASSERT_TRUE(h.state().SetNodeDrained(NodeId(0), true).ok());
  r = h.Cycle(now);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_TRUE(r.preemptions.empty());  // nothing for p1 to take: b's job is on an A100
  EXPECT_EQ(h.job(p1).phase, JobPhase::kPending);

  // a's next job fits a's nominal quota (0 + 4 of 10) and b borrows (8 of 6): reclaim.
  now += kSecond;
  JobId p2 = h.Submit(Gang("p2", "a", {4}, 0, now), now);
  r = h.Cycle(now);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, p2);
  EXPECT_EQ(r.preemptions[0].victim, on_a100);
}

TEST(JobSchedulerTest, AForgottenPreemptorNoLongerGoesFirstWithinTheNominalPass) {
  // b (nominal 4) borrows the H100 node for v; b's p, of higher priority, evicts v but
  // cannot start (the node is drained meanwhile) and is forgotten as a preemptor. Once
  // the node is back, a's q (within a's nominal 12) and p (which would borrow) both
  // want it: jobs within their nominal quota start first, so q gets it. A forgotten
  // preemptor used to keep going first, borrowing, in every later cycle.
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("h100"), GpuNode("a100", 8, "A100-80GB")}, TwoQueueCohort(12000, 4000), o);
  auto on_h100 = [](JobSpec s) {
    s.tasks[0].models.Add(Model("H100-80GB"));
    return s;
  };
  JobId v = h.Submit(on_h100(Gang("v", "b", {8})), 0);
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{v.value()});
  Micros now = 100 * kSecond;
  JobId p = h.Submit(on_h100(Gang("p", "b", {8}, 10, now)), now);
  CycleResult r = h.Cycle(now);
  ASSERT_EQ(Victims(r), std::vector<uint64_t>{v.value()});
  now += o.grace;
  h.Evict(v, now);
  ASSERT_TRUE(h.state().SetNodeDrained(NodeId(0), true).ok());
  r = h.Cycle(now);
  ASSERT_TRUE(r.starts.empty());
  ASSERT_EQ(h.job(p).phase, JobPhase::kPending);

  now += kSecond;
  ASSERT_TRUE(h.state().SetNodeDrained(NodeId(0), false).ok());
  JobId q = h.Submit(on_h100(Gang("q", "a", {8}, 0, now)), now);
  r = h.Cycle(now);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{q.value()});
  EXPECT_EQ(h.job(p).phase, JobPhase::kPending);
}

TEST(JobSchedulerTest, AHeldPreemptorDoesNotStartOnceItsVictimsAreGone) {
  // p evicts v by priority, then is held (an array throttle or a user's hold on the
  // server): when v is gone, p must not start, nor keep v's GPUs from v.
  SchedulerOptions o;
  o.preempt_priority = true;
  Harness h({GpuNode("n0")}, OneQueue(), o);
  JobId v = h.Submit(Gang("v", "q", {8}), 0);
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{v.value()});
  Micros now = 100 * kSecond;
  JobId p = h.Submit(Gang("p", "q", {8}, 10, now), now);
  ASSERT_EQ(Victims(h.Cycle(now)), std::vector<uint64_t>{v.value()});
  h.lifecycle().HoldUntil(h.job(p), now + kHour);
  now += o.grace;
  h.Evict(v, now);
  CycleResult r = h.Cycle(now);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{v.value()});
  EXPECT_EQ(h.job(p).phase, JobPhase::kPending);
}

}  // namespace
}  // namespace tessera
