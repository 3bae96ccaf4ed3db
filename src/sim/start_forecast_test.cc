#include "sim/start_forecast.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sched/testing/scheduler_harness.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

constexpr Micros kMinute = 60 * kSecond;

SchedulerPolicy Policy(std::string job_order, std::string queue_order = "") {
  SchedulerPolicy p;
  p.name = job_order;
  p.job_order = std::move(job_order);
  p.queue_order = std::move(queue_order);
  return p;
}

// The live core as a harness drives it, snapshotted at `now`; `runtime[i]` is job i's
// remaining (running) or whole (pending) predicted runtime.
ForecastInput Snapshot(Harness& h, const QueueTreeSpec& queues, Micros now,
                       const std::vector<Micros>& runtime, SchedulerPolicy policy) {
  ForecastInput in;
  in.now = now;
  in.tree = std::make_shared<const QueueTree>(QueueTree::Create(queues, Catalog()).value());
  in.state = h.state();
  in.policy = std::move(policy);
  for (size_t i = 0; i < h.jobs().size(); ++i) {
    in.jobs.push_back(ForecastJob{h.jobs()[i], runtime[i]});
  }
  return in;
}

const JobForecast& Of(const Forecast& f, size_t job) {
  for (const JobForecast& j : f.pending) {
    if (j.job == job) {
      return j;
    }
  }
  ADD_FAILURE() << "job " << job << " is not in the forecast";
  return f.pending.front();
}

TEST(StartForecastTest, PendingJobsStartAsTheRunningJobEndsThenInTurn) {
  // One node of 8 GPUs; an 8-GPU job running with 10 min left, two 8-GPU jobs waiting.
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  JobId running = h.Submit(Gang("running", "q", {8}), 0);
  h.Cycle(0);
  ASSERT_EQ(h.job(running).phase, JobPhase::kRunning);
  const Micros now = 5 * kMinute;
  JobId first = h.Submit(Gang("first", "q", {8}, 0, kMinute), kMinute);
  JobId second = h.Submit(Gang("second", "q", {8}, 0, 2 * kMinute), 2 * kMinute);
  h.Cycle(now);
  ForecastInput in = Snapshot(h, OneQueue(), now, {10 * kMinute, 30 * kMinute, 20 * kMinute},
                              Policy("fifo"));
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->pending.size(), 2u);
  EXPECT_EQ(Of(*f, first.value()).eta, now + 10 * kMinute);
  EXPECT_EQ(Of(*f, second.value()).eta, now + 10 * kMinute + 30 * kMinute);
  EXPECT_EQ(Of(*f, first.value()).position, 1);
  EXPECT_EQ(Of(*f, second.value()).position, 2);
  EXPECT_EQ(Of(*f, second.value()).queue_position, 2);
  EXPECT_EQ(Of(*f, first.value()).blocking.kind, ForecastBlocking::Kind::kGpus);
}

TEST(StartForecastTest, AJobBehindAThreeSecondJobStartsInSeconds) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  h.Submit(Gang("short", "q", {8}), 0);
  h.Cycle(0);
  JobId waiting = h.Submit(Gang("waiting", "q", {8}), kSecond);
  h.Cycle(kSecond);
  ForecastInput in = Snapshot(h, OneQueue(), kSecond, {2 * kSecond, kHour}, Policy("fifo"));
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Of(*f, waiting.value()).eta, 3 * kSecond);
}

TEST(StartForecastTest, TheRemainingTimeIsCutToTheLimitAndNeverBelowTheFloor) {
  JobRecord r;
  r.phase = JobPhase::kRunning;
  r.run_start = 0;
  EXPECT_EQ(ForecastRemaining(kHour, r, 10 * kMinute, kMinute), 50 * kMinute);
  r.spec.runtime_limit = 20 * kMinute;
  EXPECT_EQ(ForecastRemaining(kHour, r, 10 * kMinute, kMinute), 10 * kMinute);
  EXPECT_EQ(ForecastRemaining(kHour, r, 30 * kMinute, kMinute), kMinute);  // overdue
  r.spec.runtime_limit = 0;
  // Two hours into a one-hour prediction: half as long again.
  EXPECT_EQ(ForecastRemaining(kHour, r, 2 * kHour, kMinute, 0.5), kHour);
  EXPECT_EQ(ForecastRemaining(kHour, r, 2 * kHour, kMinute), kMinute);
}

TEST(StartForecastTest, HigherPriorityStartsFirstAndHoldsTheFirstPosition) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{}, SubmitOrder(true));
  h.Submit(Gang("running", "q", {8}), 0);
  h.Cycle(0);
  JobId low = h.Submit(Gang("low", "q", {8}, 0, kSecond), kSecond);
  JobId high = h.Submit(Gang("high", "q", {8}, 5, 2 * kSecond), 2 * kSecond);
  h.Cycle(2 * kSecond);
  ForecastInput in = Snapshot(h, OneQueue(), 2 * kSecond, {kMinute, 10 * kMinute, 5 * kMinute},
                              Policy("priority"));
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Of(*f, high.value()).position, 1);
  EXPECT_EQ(Of(*f, low.value()).position, 2);
  EXPECT_EQ(Of(*f, high.value()).eta, 2 * kSecond + kMinute);
  EXPECT_EQ(Of(*f, low.value()).eta, 2 * kSecond + kMinute + 5 * kMinute);
}

TEST(StartForecastTest, FairShareFavoursTheQueueThatUsedLess) {
  // Queue a has used the node for an hour; b has not. Both wait for the node: b first.
  const QueueTreeSpec queues = Tree({QueueNode("a"), QueueNode("b")});
  Harness h({GpuNode("n0")}, queues, SchedulerOptions{}, SubmitOrder(false),
            MakeQueueOrder("fairshare").value());
  h.Submit(Gang("a-running", "a", {8}), 0);
  h.Cycle(0);
  JobId a = h.Submit(Gang("a-next", "a", {8}, 0, kMinute), kMinute);
  JobId b = h.Submit(Gang("b-next", "b", {8}, 0, 2 * kMinute), 2 * kMinute);
  h.Cycle(kHour);
  ForecastInput in =
      Snapshot(h, queues, kHour, {kMinute, 10 * kMinute, 10 * kMinute}, Policy("fifo", "fairshare"));
  in.usage = h.scheduler().SaveUsage(kHour);
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Of(*f, b.value()).position, 1);
  EXPECT_EQ(Of(*f, b.value()).queue_position, 1);
  EXPECT_EQ(Of(*f, a.value()).queue_position, 1);
  EXPECT_EQ(Of(*f, b.value()).eta, kHour + kMinute);
  EXPECT_EQ(Of(*f, a.value()).eta, kHour + kMinute + 10 * kMinute);
}

TEST(StartForecastTest, NoEstimateBeyondTheHorizon) {
  Harness h({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  h.Submit(Gang("long", "q", {8}), 0);
  h.Cycle(0);
  JobId waiting = h.Submit(Gang("waiting", "q", {8}), 0);
  ForecastInput in = Snapshot(h, OneQueue(), 0, {2 * kHour, kHour}, Policy("fifo"));
  ForecastOptions options;
  options.horizon = kHour;
  StatusOr<Forecast> f = RunStartForecast(std::move(in), options);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(Of(*f, waiting.value()).eta.has_value());
  EXPECT_EQ(f->horizon_end, kHour);
}

TEST(StartForecastTest, AJobOverItsQueuesQuotaIsBlockedByQuotaAndGetsNoEstimate) {
  // Queue b has no quota and cannot borrow (a uses all of the cohort's).
  const QueueTreeSpec queues = TwoQueueCohort(8000, 0);
  Harness h({GpuNode("n0"), GpuNode("n1")}, queues, SchedulerOptions{});
  h.Submit(Gang("a-running", "a", {8}), 0);
  h.Cycle(0);
  JobId b = h.Submit(Gang("b-waits", "b", {8}), 0);
  h.Cycle(kSecond);
  ForecastInput in = Snapshot(h, queues, kSecond, {kHour, kHour}, Policy("fifo"));
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const JobForecast& fb = Of(*f, b.value());
  EXPECT_EQ(fb.blocking.kind, ForecastBlocking::Kind::kQuota);
  EXPECT_EQ(fb.blocking.queue, "b");
  // Quota frees when a's job ends.
  EXPECT_EQ(fb.eta, kSecond + kHour);
}

TEST(StartForecastTest, SameSnapshotSameForecast) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, OneQueue(), SchedulerOptions{});
  std::vector<Micros> runtime;
  for (int i = 0; i < 40; ++i) {
    h.Submit(Gang("j" + std::to_string(i), "q", {1 + i % 8}), i * kSecond);
    runtime.push_back((1 + i % 7) * kMinute);
  }
  h.Cycle(40 * kSecond);
  auto run = [&] {
    return RunStartForecast(Snapshot(h, OneQueue(), 40 * kSecond, runtime, Policy("fifo")),
                            ForecastOptions{})
        .value();
  };
  Forecast a = run(), b = run();
  ASSERT_EQ(a.pending.size(), b.pending.size());
  ASSERT_GT(a.pending.size(), 10u);
  for (size_t i = 0; i < a.pending.size(); ++i) {
    EXPECT_EQ(a.pending[i].job, b.pending[i].job);
    EXPECT_EQ(a.pending[i].eta, b.pending[i].eta);
    EXPECT_TRUE(a.pending[i].eta.has_value());
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

TEST(StartForecastBlockingTest, AJobThatFitsNowWaitsItsTurnAndOneThatStartsIsBlockedByNothing) {
  // Two nodes of 8 GPUs; one runs an 8-GPU job. Under strict fifo a 16-GPU job waits for
  // both nodes, and a 4-GPU job behind it fits the free node but waits its turn.
  SchedulerOptions strict;
  strict.strict_fifo = true;
  Harness h({GpuNode("n0"), GpuNode("n1")}, OneQueue(), strict);
  h.Submit(Gang("running", "q", {8}), 0);
  h.Cycle(0);
  const Micros now = kMinute;
  JobId big = h.Submit(Gang("big", "q", {8, 8}, 0, now), now);
  JobId small = h.Submit(Gang("small", "q", {4}, 0, now), now);
  h.Cycle(now);
  ASSERT_EQ(h.job(small).phase, JobPhase::kPending) << "fifo: behind the 16-GPU job";
  SchedulerPolicy policy = Policy("fifo");
  policy.options.strict_fifo = true;
  ForecastInput in =
      Snapshot(h, OneQueue(), now, {10 * kMinute, 30 * kMinute, 5 * kMinute}, policy);
  StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Of(*f, big.value()).blocking.kind, ForecastBlocking::Kind::kGpus);
  EXPECT_EQ(Of(*f, small.value()).blocking.kind, ForecastBlocking::Kind::kTurn);
  EXPECT_EQ(BlockingKindName(ForecastBlocking::Kind::kTurn), "turn");

  // A job submitted since the last cycle that fits: the forecast's first cycle starts it.
  Harness g({GpuNode("n0")}, OneQueue(), SchedulerOptions{});
  JobId fresh = g.Submit(Gang("fresh", "q", {2}), 0);
  ForecastInput in2 = Snapshot(g, OneQueue(), 0, {kMinute}, Policy("fifo"));
  StatusOr<Forecast> f2 = RunStartForecast(std::move(in2), ForecastOptions{});
  ASSERT_TRUE(f2.ok()) << f2.status().ToString();
  EXPECT_EQ(Of(*f2, fresh.value()).eta, 0);
  EXPECT_EQ(Of(*f2, fresh.value()).blocking.kind, ForecastBlocking::Kind::kNone);
}

TEST(StartForecastBlockingTest, TheForecastPlacesWithTheLearnedWorkloadWhenGivenOne) {
  Harness h({GpuNode("n0"), GpuNode("n1")}, OneQueue(), SchedulerOptions{});
  h.Submit(Gang("running", "q", {8}), 0);
  h.Cycle(0);
  JobId waiting = h.Submit(Gang("waiting", "q", {8, 8}, 0, kSecond), kSecond);
  h.Cycle(kSecond);
  for (bool learned : {false, true}) {
    ForecastInput in = Snapshot(h, OneQueue(), kSecond, {kMinute, kHour}, Policy("fifo"));
    in.placement = "tessera";
    if (learned) {
      TaskRequest t;
      t.cpu = MilliCpu(4000);
      t.gpu_count = 8;
      t.gpu_milli = MilliGpu(1000);
      in.typical = FindTypicalTasks(std::vector<TaskRequest>{t});
    }
    StatusOr<Forecast> f = RunStartForecast(std::move(in), ForecastOptions{});
    ASSERT_TRUE(f.ok()) << "learned " << learned << ": " << f.status().ToString();
    EXPECT_EQ(Of(*f, waiting.value()).eta, kSecond + kMinute) << "learned " << learned;
  }
}

}  // namespace
}  // namespace tessera
