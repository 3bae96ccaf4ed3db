#include "sched/job_lifecycle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sched/testing/scheduler_harness.h"

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

// Records every event the lifecycle reports.
class EventLog final : public LifecycleListener {
 public:
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& e) override {
    (void)job;
    events.push_back(e);
  }
  std::vector<LifecycleEvent> events;
};

// One queue "q" with a GPU quota, so that charges show in the ledger.
QueueTreeSpec QuotaQueue() { return Tree({QueueNode("q", "", {Q(kGpu, 64'000)})}); }

SchedulerOptions PriorityPreemption() {
  SchedulerOptions o;
  o.preempt_priority = true;
  return o;
}

TEST(JobLifecycleTest, AStartHoldsTheGangAndItsEndReleasesEverything) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, QuotaQueue(), SchedulerOptions{});
  EventLog log;
  h.lifecycle().set_listener(&log);
  JobId gang = h.Submit(Gang("g", "q", {8, 4}), 0);
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{gang.value()});
  const JobRecord& j = h.job(gang);
  EXPECT_EQ(j.phase, JobPhase::kRunning);
  EXPECT_EQ(j.held, (std::vector<uint8_t>{1, 1}));
  EXPECT_TRUE(j.counted);
  EXPECT_EQ(h.state().allocated_gpu_milli().value(), 12'000);
  EXPECT_EQ(h.quota().Usage(h.queue("q"), 0), 12'000);

  h.Finish(gang, 100 * kSecond);
  EXPECT_EQ(j.phase, JobPhase::kFinished);
  EXPECT_TRUE(j.allocations.empty());
  EXPECT_TRUE(j.held.empty());
  EXPECT_FALSE(j.counted);
  EXPECT_EQ(h.state().allocated_gpu_milli().value(), 0);
  EXPECT_EQ(h.state().allocated_cpu().value(), 0);
  EXPECT_EQ(h.quota().Usage(h.queue("q"), 0), 0);
  EXPECT_DOUBLE_EQ(j.attained_gpu_seconds, 12.0 * 100);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());

  ASSERT_EQ(log.events.size(), 3u);
  EXPECT_EQ(log.events[0].kind, LifecycleEvent::Kind::kSubmitted);
  EXPECT_EQ(log.events[1].kind, LifecycleEvent::Kind::kStarted);
  EXPECT_EQ(log.events[2].kind, LifecycleEvent::Kind::kFinished);
  EXPECT_EQ(log.events[2].end, JobEnd::kSucceeded);
  EXPECT_EQ(log.events[2].ran, 100 * kSecond);
}

TEST(JobLifecycleTest, APreemptorWaitsForExactlyItsVictimsAndIsNominatedWhenTheyAreGone) {
  Harness h({GpuNode("n0")}, QuotaQueue(), PriorityPreemption());
  EventLog log;
  h.lifecycle().set_listener(&log);
  JobId low1 = h.Submit(Gang("low1", "q", {4}), 0);
  JobId low2 = h.Submit(Gang("low2", "q", {4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  JobId high = h.Submit(Gang("high", "q", {8}, 10, 50 * kSecond), 50 * kSecond);
  CycleResult r = h.Cycle(50 * kSecond);
  ASSERT_EQ(r.preemptions.size(), 2u);
  // Counted at the decision: both victims are signalled, the preemptor waits for two.
  EXPECT_EQ(h.job(high).victims_in_flight, 2);
  EXPECT_EQ(h.job(low1).preemptions, 1);
  EXPECT_EQ(h.job(low2).preemptions, 1);
  EXPECT_EQ(h.job(low1).preemptor, high);
  EXPECT_EQ(h.job(low1).phase, JobPhase::kStopping);
  ASSERT_EQ(log.events.back().kind, LifecycleEvent::Kind::kSignalled);
  EXPECT_EQ(log.events.back().by, high);

  // The first victim leaves: one still in flight, not nominated.
  h.Evict(low1, 60 * kSecond);
  EXPECT_EQ(h.job(high).victims_in_flight, 1);
  EXPECT_FALSE(h.job(high).nominated);
  EXPECT_FALSE(h.job(low1).preemptor.valid());
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
  // The second one finishes inside its grace period: that settles it as well.
  h.Finish(low2, 70 * kSecond);
  EXPECT_EQ(h.job(high).victims_in_flight, 0);
  EXPECT_TRUE(h.job(high).nominated);
  EXPECT_EQ(Started(h.Cycle(70 * kSecond)), std::vector<uint64_t>{high.value()});
  EXPECT_EQ(h.job(low1).phase, JobPhase::kPending);
  EXPECT_FALSE(h.job(high).nominated);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, ARequeueResumesFromTheBestCheckpointAndReportsTheWorkLost) {
  Harness h({GpuNode("n0")}, QuotaQueue(), PriorityPreemption());
  EventLog log;
  h.lifecycle().set_listener(&log);
  JobSpec spec = Gang("ckpt", "q", {8});
  spec.checkpoint_interval = 100 * kSecond;
  JobId job = h.Submit(spec, 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.Submit(Gang("high", "q", {8}, 10, 250 * kSecond), 250 * kSecond);
  ASSERT_EQ(h.Cycle(250 * kSecond).preemptions.size(), 1u);
  // Evicted at 280 s: the periodic checkpoint at 200 s beats the one reported at 150 s.
  h.lifecycle().Requeue(h.job(job), 150 * kSecond, RequeueCause::kPreempted, 280 * kSecond);
  const JobRecord& j = h.job(job);
  EXPECT_EQ(j.phase, JobPhase::kPending);
  EXPECT_EQ(j.resumed_from, 200 * kSecond);
  EXPECT_EQ(j.eligible_since, 280 * kSecond);
  const LifecycleEvent& e = log.events.back();
  ASSERT_EQ(e.kind, LifecycleEvent::Kind::kRequeued);
  EXPECT_EQ(e.saved, 200 * kSecond);
  EXPECT_EQ(e.ran, 280 * kSecond);
  EXPECT_DOUBLE_EQ(e.lost_gpu_seconds, 8.0 * 80);
  EXPECT_EQ(h.scheduler().pending(), 2u);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, ARequeueHeldBackStartsOnlyOnceItsTimeHasCome) {
  Harness h({GpuNode("n0")}, QuotaQueue(), SchedulerOptions{});
  EventLog log;
  h.lifecycle().set_listener(&log);
  JobId job = h.Submit(Gang("retry", "q", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.lifecycle().Stopping(h.job(job));
  // A failed attempt restarts after a 30 s backoff: pending, but not offered to a cycle.
  h.lifecycle().Requeue(h.job(job), 0, RequeueCause::kFailure, 10 * kSecond, 40 * kSecond);
  EXPECT_EQ(h.job(job).phase, JobPhase::kPending);
  EXPECT_EQ(h.lifecycle().HeldUntil(job), 40 * kSecond);
  EXPECT_EQ(h.scheduler().pending(), 0u);
  EXPECT_EQ(log.events.back().kind, LifecycleEvent::Kind::kRequeued);
  EXPECT_EQ(log.events.back().cause, RequeueCause::kFailure);
  EXPECT_TRUE(h.Cycle(39 * kSecond).starts.empty());
  EXPECT_TRUE(h.lifecycle().ReleaseDue(39 * kSecond).empty());
  // A rebind (the server rebuilding its core) keeps the hold.
  h.lifecycle().Bind(&h.state(), &h.quota(), &h.scheduler());
  ASSERT_TRUE(h.lifecycle().Restore(h.job(job)).ok());
  EXPECT_EQ(h.scheduler().pending(), 0u);
  // The cycle at 40 s releases it first, then starts it: the second start.
  ASSERT_EQ(Started(h.Cycle(40 * kSecond)), std::vector<uint64_t>{job.value()});
  EXPECT_EQ(h.job(job).starts, 2);
  EXPECT_EQ(h.lifecycle().HeldUntil(job), 0);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());

  // A held job that is cancelled leaves the hold too; a later release finds nothing.
  h.lifecycle().Stopping(h.job(job));
  h.lifecycle().Requeue(h.job(job), 0, RequeueCause::kFailure, 50 * kSecond, 80 * kSecond);
  h.lifecycle().Finish(h.job(job), JobEnd::kCancelled, 60 * kSecond);
  EXPECT_EQ(h.lifecycle().HeldUntil(job), 0);
  EXPECT_TRUE(h.lifecycle().ReleaseDue(100 * kSecond).empty());
  EXPECT_EQ(h.scheduler().pending(), 0u);
}

TEST(JobLifecycleTest, AGatedJobWaitsForUngateAcrossRebindAndBackoff) {
  Harness h({GpuNode("n0")}, QuotaQueue(), SchedulerOptions{});
  JobId first = h.Submit(Gang("first", "q", {8}), 0);
  JobId second = h.Submit(Gang("second", "q", {8}), 0);
  h.lifecycle().Gate(h.job(first));
  EXPECT_TRUE(h.lifecycle().Gated(first));
  EXPECT_EQ(h.scheduler().pending(), 1u);
  // A rebind (the server rebuilding its core) keeps it out of the queue.
  h.scheduler().Dequeue(h.job(second));
  h.lifecycle().Bind(&h.state(), &h.quota(), &h.scheduler());
  ASSERT_TRUE(h.lifecycle().Restore(h.job(first)).ok());
  ASSERT_TRUE(h.lifecycle().Restore(h.job(second)).ok());
  EXPECT_EQ(h.scheduler().pending(), 1u);
  // The free GPUs go to the job behind it.
  ASSERT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{second.value()});
  h.Finish(second, 10 * kSecond);
  EXPECT_TRUE(h.Cycle(10 * kSecond).starts.empty());
  h.lifecycle().Ungate(h.job(first), 20 * kSecond);
  EXPECT_FALSE(h.lifecycle().Gated(first));
  EXPECT_EQ(h.job(first).eligible_since, 20 * kSecond);
  ASSERT_EQ(Started(h.Cycle(20 * kSecond)), std::vector<uint64_t>{first.value()});
  // Gate means nothing to a running job; a second Ungate nothing at all.
  h.lifecycle().Gate(h.job(first));
  EXPECT_FALSE(h.lifecycle().Gated(first));
  h.lifecycle().Ungate(h.job(first), 21 * kSecond);
  EXPECT_EQ(h.scheduler().pending(), 0u);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());

  // Gated while its restart backoff runs: the backoff's end does not enqueue it, the
  // gate's end does; a cancelled gated job leaves the gate.
  h.lifecycle().Stopping(h.job(first));
  h.lifecycle().Requeue(h.job(first), 0, RequeueCause::kFailure, 30 * kSecond, 40 * kSecond);
  h.lifecycle().Gate(h.job(first));
  EXPECT_TRUE(h.lifecycle().ReleaseDue(50 * kSecond).empty());
  EXPECT_EQ(h.scheduler().pending(), 0u);
  h.lifecycle().Ungate(h.job(first), 60 * kSecond);
  EXPECT_EQ(h.scheduler().pending(), 1u);
  h.lifecycle().Gate(h.job(first));
  h.lifecycle().Finish(h.job(first), JobEnd::kCancelled, 70 * kSecond);
  EXPECT_FALSE(h.lifecycle().Gated(first));
  EXPECT_EQ(h.scheduler().pending(), 0u);
}

TEST(JobLifecycleTest, ALostTaskIsReleasedAtOnceAndTheRestWhenTheAttemptEnds) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, QuotaQueue(), SchedulerOptions{});
  JobId gang = h.Submit(Gang("g", "q", {8, 8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  h.lifecycle().DetachTask(h.job(gang), 1);
  EXPECT_EQ(h.job(gang).held, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(h.state().allocated_gpu_milli().value(), 8'000);
  // The quota charge stays until the attempt ends: the job is still the queue's.
  EXPECT_EQ(h.quota().Usage(h.queue("q"), 0), 16'000);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
  h.lifecycle().Requeue(h.job(gang), 0, RequeueCause::kNodeLost, 10 * kSecond);
  EXPECT_EQ(h.state().allocated_gpu_milli().value(), 0);
  EXPECT_EQ(h.quota().Usage(h.queue("q"), 0), 0);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
  // It starts again as a whole.
  EXPECT_EQ(Started(h.Cycle(10 * kSecond)), std::vector<uint64_t>{gang.value()});
}

TEST(JobLifecycleTest, CancellingAPendingJobTakesItOutOfTheQueue) {
  Harness h({GpuNode("n0")}, QuotaQueue(), SchedulerOptions{});
  JobId big = h.Submit(Gang("big", "q", {8}), 0);
  JobId next = h.Submit(Gang("next", "q", {8}, 0, kSecond), kSecond);
  ASSERT_EQ(Started(h.Cycle(kSecond)), std::vector<uint64_t>{big.value()});
  h.lifecycle().Finish(h.job(next), JobEnd::kCancelled, 2 * kSecond);
  EXPECT_EQ(h.job(next).phase, JobPhase::kFinished);
  EXPECT_EQ(h.scheduler().pending(), 0u);
  h.Finish(big, 3 * kSecond);
  EXPECT_TRUE(h.Cycle(3 * kSecond).starts.empty());
}

// A core built afresh for the harness's two nodes, as a driver builds when it restarts,
// and bound to the harness's lifecycle.
struct FreshCore {
  explicit FreshCore(Harness& h)
      : state(Cluster({GpuNode("n0"), GpuNode("n1")})),
        quota(h.tree()),
        scheduler(h.tree(), state, SchedulerOptions{}, nullptr, nullptr, TestProfile(),
                  7LL * 24 * kHour) {
    h.lifecycle().Bind(&state, &quota, &scheduler);
  }
  ClusterState state;
  QuotaLedger quota;
  JobScheduler scheduler;
};

TEST(JobLifecycleTest, RestoreAfterRebindPutsBackWhatIsHeld) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, QuotaQueue(), SchedulerOptions{});
  JobId whole = h.Submit(Gang("whole", "q", {4}), 0);
  JobId split = h.Submit(Gang("split", "q", {8, 4}), 0);
  JobId waiting = h.Submit(Gang("waiting", "q", {8, 8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  // A fresh core, as a driver builds when it restarts: the split gang's second task is
  // no longer held (its node was lost).
  h.job(split).held[1] = 0;
  FreshCore core(h);
  ClusterState& state = core.state;
  QuotaLedger& quota = core.quota;
  JobScheduler& scheduler = core.scheduler;
  for (JobRecord& j : h.jobs()) {
    ASSERT_TRUE(h.lifecycle().Restore(j).ok());
  }
  EXPECT_EQ(state.allocated_gpu_milli().value(), 4'000 + 8'000);
  EXPECT_EQ(quota.Usage(h.queue("q"), 0), 12'000);  // what is held is charged
  EXPECT_TRUE(h.job(whole).counted);
  EXPECT_FALSE(h.job(split).counted);  // a gang with a task missing is not running
  EXPECT_EQ(scheduler.pending(), 1u);
  EXPECT_EQ(h.job(waiting).phase, JobPhase::kPending);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
  h.lifecycle().Requeue(h.job(split), 0, RequeueCause::kNodeLost, kSecond);
  h.lifecycle().Finish(h.job(whole), JobEnd::kSucceeded, kSecond);
  EXPECT_EQ(state.allocated_gpu_milli().value(), 0);
  EXPECT_EQ(quota.Usage(h.queue("q"), 0), 0);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, AttachingATaskWhoseNodeCameBackHoldsAndChargesItAgain) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, QuotaQueue(), SchedulerOptions{});
  JobId split = h.Submit(Gang("split", "q", {8, 4}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  // After a driver restart: the core is built before n1's agent is back.
  h.job(split).held[1] = 0;
  FreshCore core(h);
  ClusterState& state = core.state;
  QuotaLedger& quota = core.quota;
  ASSERT_TRUE(h.lifecycle().Restore(h.job(split)).ok());
  EXPECT_EQ(quota.Usage(h.queue("q"), 0), 8'000);
  EXPECT_FALSE(h.job(split).counted);

  ASSERT_TRUE(h.lifecycle().AttachTask(h.job(split), 1).ok());
  EXPECT_EQ(h.job(split).held, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(state.allocated_gpu_milli().value(), 12'000);
  EXPECT_EQ(quota.Usage(h.queue("q"), 0), 12'000);
  EXPECT_TRUE(h.job(split).counted);  // the whole gang is held: it runs
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
  ASSERT_TRUE(h.lifecycle().AttachTask(h.job(split), 1).ok());  // already held: nothing
  EXPECT_EQ(state.allocated_gpu_milli().value(), 12'000);
  EXPECT_EQ(h.lifecycle().AttachTask(h.job(split), 2).code(), StatusCode::kInvalidArgument);

  // What no longer fits its node is refused, and nothing is held for it.
  h.lifecycle().DetachTask(h.job(split), 1);
  Allocation squatter = h.job(split).allocations[1];
  ASSERT_TRUE(state.Allocate(squatter).ok());
  EXPECT_EQ(h.lifecycle().AttachTask(h.job(split), 1).code(), StatusCode::kInternal);
  EXPECT_EQ(h.job(split).held[1], 0);
  ASSERT_TRUE(state.Release(squatter).ok());
  h.lifecycle().Finish(h.job(split), JobEnd::kSucceeded, kSecond);
  EXPECT_EQ(state.allocated_gpu_milli().value(), 0);
  EXPECT_EQ(quota.Usage(h.queue("q"), 0), 0);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, TheInvariantCheckCatchesWhatTheLifecycleDidNotDo) {
  Harness h({GpuNode("n0")}, QuotaQueue(), PriorityPreemption());
  JobId low = h.Submit(Gang("low", "q", {8}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 1u);
  JobId high = h.Submit(Gang("high", "q", {8}, 10, kSecond), kSecond);
  ASSERT_EQ(h.Cycle(kSecond).preemptions.size(), 1u);
  ASSERT_TRUE(h.lifecycle().CheckInvariants().empty());

  // A preemptor that forgot one of its victims.
  --h.job(high).victims_in_flight;
  std::vector<std::string> broken = h.lifecycle().CheckInvariants();
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_NE(broken[0].find("waits for 0 victims, 1 are in flight"), std::string::npos);
  ++h.job(high).victims_in_flight;

  // An allocation released behind the lifecycle's back.
  ASSERT_TRUE(h.state().Release(h.job(low).allocations[0]).ok());
  broken = h.lifecycle().CheckInvariants();
  ASSERT_FALSE(broken.empty());
  EXPECT_NE(broken[0].find("cluster holds 0 GPU milli, the jobs 8000"), std::string::npos);
  ASSERT_TRUE(h.state().Allocate(h.job(low).allocations[0]).ok());

  // A charge refunded twice.
  h.quota().Remove(h.queue("q"), h.job(low).charge);
  broken = h.lifecycle().CheckInvariants();
  ASSERT_FALSE(broken.empty());
  EXPECT_NE(broken[0].find("queue q is charged 0"), std::string::npos);
  h.quota().Add(h.queue("q"), h.job(low).charge);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, AVictimThatNeverLeavesKeepsItsPreemptorWaiting) {
  Harness h({GpuNode("n0", 4), GpuNode("n1", 4)}, QuotaQueue(), PriorityPreemption());
  JobId low_a = h.Submit(Gang("low-a", "q", {4}), 0);
  JobId low_b = h.Submit(Gang("low-b", "q", {4}, 0, 1), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  JobId high = h.Submit(Gang("high", "q", {4}, 10, kSecond), kSecond);
  CycleResult r = h.Cycle(kSecond);
  ASSERT_EQ(r.preemptions.size(), 1u);
  const JobId victim = r.preemptions[0].victim;
  const JobId other = victim == low_a ? low_b : low_a;
  // The other low job ending on its own does not settle the preemptor's victim.
  h.Finish(other, 2 * kSecond);
  EXPECT_EQ(h.job(high).victims_in_flight, 1);
  h.Evict(victim, 3 * kSecond);
  EXPECT_EQ(h.job(high).victims_in_flight, 0);
  EXPECT_TRUE(h.job(high).nominated);
  const std::vector<uint64_t> started = Started(h.Cycle(3 * kSecond));
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started[0], high.value());  // nominated: considered first
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

// A 2-GPU gang evicts two 1-GPU jobs on a node whose other GPUs it may not take. The
// first victim leaves while the second is still stopping: restarted on the GPU it freed,
// it would be evicted again as soon as the gang is nominated (live, hundreds of times a
// minute). With victim_hold it waits for the gang, which then starts at once.
void RunEvictedJobWaitsForItsPreemptor(Micros victim_hold, bool expect_held) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.victim_hold = victim_hold;
  Harness h({GpuNode("n0", 4)}, Tree({QueueNode("q", "", {Q(kGpu, 64'000)})}), o);
  JobId keep = h.Submit(Gang("keep", "q", {2}, 20), 0);
  JobId v1 = h.Submit(Gang("v1", "q", {1}), 0);
  JobId v2 = h.Submit(Gang("v2", "q", {1}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 3u);
  JobId gang = h.Submit(Gang("gang", "q", {1, 1}, 10, 10 * kSecond), 10 * kSecond);
  std::vector<uint64_t> victims = Victims(h.Cycle(10 * kSecond));
  std::sort(victims.begin(), victims.end());
  ASSERT_EQ(victims, (std::vector<uint64_t>{v1.value(), v2.value()}));
  h.Evict(v1, 11 * kSecond);
  const std::vector<uint64_t> started = Started(h.Cycle(11 * kSecond));
  if (expect_held) {
    EXPECT_TRUE(started.empty()) << "the victim restarted into what it freed for the gang";
    h.Evict(v2, 12 * kSecond);
    EXPECT_EQ(Started(h.Cycle(12 * kSecond)), std::vector<uint64_t>{gang.value()});
    EXPECT_EQ(h.job(v1).preemptions, 1);
    // Once the gang runs, its victims may start again (here nothing is free).
    EXPECT_TRUE(Started(h.Cycle(13 * kSecond)).empty());
    h.Finish(gang, 20 * kSecond);
    EXPECT_EQ(Started(h.Cycle(20 * kSecond)).size(), 2u);
  } else {
    EXPECT_EQ(started, std::vector<uint64_t>{v1.value()});
    h.Evict(v2, 12 * kSecond);
    // The gang is nominated, does not fit, and evicts the job restarted a second ago.
    EXPECT_EQ(Victims(h.Cycle(12 * kSecond)), std::vector<uint64_t>{v1.value()});
    EXPECT_EQ(h.job(v1).preemptions, 2);
  }
  EXPECT_EQ(h.job(keep).phase, JobPhase::kRunning);
  EXPECT_TRUE(h.lifecycle().CheckInvariants().empty());
}

TEST(JobLifecycleTest, AnEvictedJobWaitsForItsPreemptorWithVictimHold) {
  RunEvictedJobWaitsForItsPreemptor(60 * kSecond, true);
}

TEST(JobLifecycleTest, WithoutVictimHoldTheVictimIsRestartedAndEvictedAgain) {
  RunEvictedJobWaitsForItsPreemptor(0, false);
}

// The hold ends with its window even if the preemptor never starts.
TEST(JobLifecycleTest, AVictimHoldEndsWithItsWindow) {
  SchedulerOptions o;
  o.preempt_priority = true;
  o.victim_hold = 30 * kSecond;
  Harness h({GpuNode("n0", 4)}, Tree({QueueNode("q", "", {Q(kGpu, 64'000)})}), o);
  h.Submit(Gang("keep", "q", {2}, 20), 0);
  JobId v1 = h.Submit(Gang("v1", "q", {1}), 0);
  JobId v2 = h.Submit(Gang("v2", "q", {1}), 0);
  ASSERT_EQ(h.Cycle(0).starts.size(), 3u);
  h.Submit(Gang("gang", "q", {1, 1}, 10, 10 * kSecond), 10 * kSecond);
  ASSERT_EQ(Victims(h.Cycle(10 * kSecond)).size(), 2u);
  h.Evict(v1, 11 * kSecond);
  EXPECT_TRUE(Started(h.Cycle(20 * kSecond)).empty());
  EXPECT_EQ(Started(h.Cycle(41 * kSecond + 1)), std::vector<uint64_t>{v1.value()});
  (void)v2;
}

}  // namespace
}  // namespace tessera
